# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The runtime's ``CNI_ARGS`` as the ``multus-guard`` shim reads them: split as Multus splits them.

``;``-separated ``key=value`` items (Multus v4.3.0 refuses an item without exactly one ``=``) and
the Pod UID they may name (``K8S_POD_UID``, sent by containerd and CRI-O). Standard library only:
the installed shim runs it.
"""

from __future__ import annotations

from typing import Final

POD_UID_ARG: Final = "K8S_POD_UID"
"""The ``CNI_ARGS`` key naming the Pod's UID."""


def items(text: str) -> list[tuple[str, str]] | None:
    """``CNI_ARGS`` as ``(key, value)`` items in order, or ``None`` when one is not ``key=value``.

    Shapes: ``""`` gives ``[]``; an empty key, a second ``=`` or the empty item of a trailing
    ``;`` gives ``None``.
    """
    if text == "":
        return []
    found: list[tuple[str, str]] = []
    for item in text.split(";"):
        key, sep, value = item.partition("=")
        if not sep or "=" in value or not key:
            return None
        found.append((key, value))
    return found
