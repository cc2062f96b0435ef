# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's base error and the one place that turns it into ``fail_json``.

Modules implement ``run(module) -> dict`` that never exits; ``main`` calls :func:`execute` and
then ``exit_json`` once. A :class:`ModuleError` (or a subclass) becomes
``fail_json(msg=..., exception=<traceback>, **extra)``; anything else propagates (a bug shows
Ansible's own traceback). It must import only the standard library and ansible.module_utils.
"""

from __future__ import annotations

import traceback


class ModuleError(Exception):
    """An expected failure whose message names the object, the bad value and the fix.

    ``extra`` holds result keys returned next to ``msg`` (e.g. ``errno`` or partial ``writes``).
    """

    def __init__(self, msg, **extra):
        super().__init__(msg)
        self.msg = msg
        self.extra = extra


def execute(module, run):
    """Call ``run(module)`` and return its result; fail the module on :class:`ModuleError`."""
    try:
        return run(module)
    except ModuleError as exc:
        module.fail_json(msg=exc.msg, exception=traceback.format_exc(), **exc.extra)
    return {}  # not reached: fail_json exits
