# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Where the ``multus-guard`` shim sends an ADD: to stock Multus directly, or to the guard daemon.

Only a Pod with managed bindings on this node is the guard's business (docs/design.md#guard). The
shim tells that from node-local state, without the API server: the plugin records every managed
binding, with its Pod UID, in its checkpoint before the kubelet creates the sandbox
(docs/design.md#checkpoint), and the runtime names the Pod in ``CNI_ARGS`` (``K8S_POD_UID``).
:func:`decide` reads that checkpoint with the shared read-only reader and answers managed,
unmanaged, or cannot tell, with why. Reads the node (the checkpoint); standard library and
siblings only, by relative import: the installed shim runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import checkpoint_doc, checkpoint_read, cni_args


@dataclass(frozen=True)
class Route:
    """What :func:`decide` found.

    ``managed``: ``True`` (the Pod has managed bindings here: the daemon checks it), ``False`` (it
    has none: stock Multus alone decides its ADD) or ``None`` (cannot tell: the daemon decides from
    the live Pod); ``why`` names the fact that decided, for the shim's messages.
    """

    managed: bool | None
    why: str


_UID_CHARS = frozenset("0123456789abcdefABCDEF-")
_CANONICAL_V1_END = b',"version":1}\n'
"""How the plugin's canonical checkpoint document of version 1 ends (``checkpoint_codec``)."""


def _reading(checkpoint: Path) -> checkpoint_read.Reading | None:
    """The checkpoint's newest bytes (``None``: neither file exists). Raises: as ``checkpoint_read.read``."""
    try:
        return checkpoint_read.read(checkpoint)
    except FileNotFoundError:
        return None


def _pod_uids(found: checkpoint_read.Reading) -> frozenset[str]:
    bindings = checkpoint_doc.managed_bindings(found.payload, source=str(found.source))
    return frozenset(uid for b in bindings if isinstance(uid := b["pod_uid"], str) and uid)


def managed_pod_uids(checkpoint: Path) -> frozenset[str] | None:
    """The Pod UIDs with at least one managed binding (any phase) in the plugin's checkpoint.

    ``checkpoint`` is the plugin's ``checkpoint.json`` path; the durable ``checkpoint.slots``
    beside it is read when present (``checkpoint_read``). ``None`` when neither file exists: no
    managed binding was ever recorded there.
    Raises: ``ContractViolation`` (reason ``UnsupportedVersion`` for another version) for a
    checkpoint that is corrupt or of another version; ``OSError`` when it cannot be read.
    """
    found = _reading(checkpoint)
    return None if found is None else _pod_uids(found)


def _certainly_not_named(found: checkpoint_read.Reading, uid: str) -> bool:
    """True when no record of the slot file's verified payload can name Pod ``uid``.

    Only for bytes whose slot digest matched (exactly what the plugin wrote), in the canonical
    version-1 form, and a UID of hex digits and dashes, which JSON writes as itself: then a UID
    absent from the bytes is in no record. Anything else is decoded in full.
    """
    return (
        found.source.name == checkpoint_doc.SLOTS_FILE_NAME
        and not found.problems
        and found.payload.endswith(_CANONICAL_V1_END)
        and all(c in _UID_CHARS for c in uid)
        and uid.encode() not in found.payload
    )


def decide(checkpoint: Path, runtime_args: str) -> Route:
    """Whether the ADD whose ``CNI_ARGS`` are ``runtime_args`` is for a Pod with managed bindings here.

    Managed when its ``K8S_POD_UID`` is among :func:`managed_pod_uids`; unmanaged when it is not,
    or when no binding is recorded at all (then no Pod on this node is managed, whatever its UID);
    cannot tell when the checkpoint cannot be read or decoded, or when some binding is recorded and
    ``CNI_ARGS`` name no Pod UID (absent, empty, or items that are not all ``key=value``). A UID
    the verified slot bytes do not contain is unmanaged without decoding them. Never raises.
    """
    uid = next((v for k, v in reversed(cni_args.items(runtime_args) or []) if k == cni_args.POD_UID_ARG), "")
    try:
        found = _reading(checkpoint)
        if found is not None and uid and _certainly_not_named(found, uid):
            return Route(False, f"Pod UID {uid} has no managed binding in {checkpoint}")
        pods = None if found is None else _pod_uids(found)
    except Exception as exc:  # corrupt, another version, unreadable, anything else: cannot tell
        return Route(None, f"the plugin's checkpoint {checkpoint} cannot be read ({exc})")
    if not pods:
        return Route(False, f"no managed binding is recorded in {checkpoint}")
    if not uid:
        return Route(
            None, f"CNI_ARGS name no {cni_args.POD_UID_ARG} and {checkpoint} records managed bindings"
        )
    if uid in pods:
        return Route(True, f"Pod UID {uid} has managed bindings in {checkpoint}")
    return Route(False, f"Pod UID {uid} has no managed binding in {checkpoint}")
