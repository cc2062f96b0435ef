"""The plugin's checkpoint store: claim records in memory, each change durable before it counts.

Every mutation computes the new record, writes the whole checkpoint (``host.checkpoint_files``)
and only then publishes it in memory, so memory never claims more than the disk holds. Rules are
``core.plugin.checkpoint_lifecycle``'s (docs/design.md#checkpoint). One lock guards the map,
never held while a caller's update function runs (on a copy, retried if the claim changed) or
across API or hardware work. Records go in and out as copies; an unreadable checkpoint fails
:meth:`CheckpointStore.load` and is left untouched.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable
from pathlib import Path

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.core.plugin import checkpoint_lifecycle as lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import checkpoint_files
from sriov_dra_rules import errors


@typing.overload
def copy_record(record: model.ClaimRecord) -> model.ClaimRecord: ...
@typing.overload
def copy_record(record: None) -> None: ...
def copy_record(record: model.ClaimRecord | None) -> model.ClaimRecord | None:
    """A copy of ``record`` that shares no mutable state with it, at a quarter of ``deepcopy``'s cost.

    Every field of the record model is immutable except ``PreparedDevice.vf_config`` (a JSON
    object), which is copied; ``tests/host/test_checkpoint.py`` pins that inventory. The frozen
    instances are copied through their ``__dict__`` (the model has no ``__post_init__``).
    """
    if record is None:
        return None
    out = _shallow(record)
    devices = []
    for device in record.devices:
        copied = _shallow(device)
        copied.__dict__["vf_config"] = _copy_json(device.vf_config)
        devices.append(copied)
    out.__dict__["devices"] = tuple(devices)
    return out


_T = typing.TypeVar("_T")


def _shallow(obj: _T) -> _T:
    out: _T = object.__new__(type(obj))
    out.__dict__.update(obj.__dict__)
    return out


def _copy_json(value: typing.Any) -> typing.Any:
    """A copy of JSON data sharing no dict or list with it (scalars are immutable and shared)."""
    if type(value) is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy_json(v) for v in value]
    return value


_Compute = Callable[[model.ClaimRecord | None], model.ClaimRecord | None]
"""Given a copy of a claim's record (``None``: none), return the new one (``None`` deletes), or the
copy itself to write nothing; may raise to abort without any effect."""


class CheckpointStore:
    """Thread-safe, durable map of claim UID → :class:`~sriov_dra.core.plugin.checkpoint_model.ClaimRecord`.

    Call :meth:`load` once before anything else. ``files`` is injectable (default
    :class:`~sriov_dra.host.checkpoint_files.CheckpointFiles` of ``path``, the readable copy
    ``checkpoint.json``) so tests can fail or time writes.
    Raises (every method after :meth:`load`): ``ContractViolation`` when used before ``load``.
    """

    def __init__(self, path: Path, *, files: checkpoint_files.CheckpointFiles | None = None) -> None:
        self._path = path
        self._files = files if files is not None else checkpoint_files.CheckpointFiles(path)
        self._lock = threading.Lock()
        self._claims: dict[identities.ClaimUid, model.ClaimRecord] = {}
        self._loaded = False

    @property
    def path(self) -> Path:
        """The readable copy ``checkpoint.json`` (the durable record is its sibling ``checkpoint.slots``)."""
        return self._path

    @property
    def source(self) -> Path:
        """The file the last :meth:`load` read the checkpoint from (``checkpoint.slots``, or a legacy ``checkpoint.json``)."""
        return self._files.source

    def close(self) -> None:
        """Release the files and the writer lock; :meth:`load` to use the store again.

        Waits for a write in progress; every later mutation raises ``ContractViolation`` without
        writing, so once this returns this store never writes again (the hand-over relies on it).
        """
        with self._lock:
            self._files.close()
            self._loaded = False

    def successor_waiting(self) -> bool:
        """Whether another process waits for this store's writer lock (docs/plugin.md#rolling-update)."""
        return self._files.successor_waiting()

    # --- reading ----------------------------------------------------------------------------------

    def load(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Read and verify the checkpoint (creating an empty one when absent); return all claims.

        Takes the writer lock, removes leftover temporaries of an interrupted write, then adopts a
        legacy ``checkpoint.json`` or rewrites a stale copy, both only after the content decoded.
        Raises: ``ContractViolation`` naming the file for corrupt content, a checksum mismatch, a
        slot file without a valid slot, an unknown version (reason ``UnsupportedVersion``) or a
        lock held by another process, with the files and the in-memory state left as they were;
        ``OSError`` when a file or the directory is unreadable or an absent checkpoint cannot be
        created.
        """
        raw = self._files.read()
        if raw is None:
            self._files.write(codec.encode_checkpoint(model.Checkpoint()))
            claims: dict[identities.ClaimUid, model.ClaimRecord] = {}
        else:
            claims = dict(codec.decode_checkpoint(raw, source=str(self._files.source)).claims)
            self._files.settle()
        with self._lock:
            self._claims = claims
            self._loaded = True
        return self.all_claims()

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise errors.ContractViolation(
                f"checkpoint store {self._path} was used before load(); call load() first"
            )

    def snapshot_claim(self, claim_uid: str) -> model.ClaimRecord | None:
        """Return a copy of the record of ``claim_uid``, or ``None`` when there is none."""
        self._require_loaded()
        with self._lock:
            record = self._claims.get(identities.ClaimUid(claim_uid))
        return copy_record(record)

    def snapshot_pod(self, pod_uid: str) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Return copies of every record whose consumer is ``pod_uid``, keyed by claim UID in ascending order."""
        self._require_loaded()
        with self._lock:
            found = {uid: r for uid, r in self._claims.items() if r.pod_uid == pod_uid}
        return {uid: copy_record(found[uid]) for uid in sorted(found)}

    def all_claims(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Return copies of every record, keyed by claim UID in ascending order."""
        self._require_loaded()
        with self._lock:
            current = dict(self._claims)
        return {uid: copy_record(current[uid]) for uid in sorted(current)}

    # --- mutations --------------------------------------------------------------------------------

    def _commit(self, claim_uid: identities.ClaimUid, compute: _Compute) -> model.ClaimRecord | None:
        """Apply ``compute`` (see :data:`_Compute`) to the claim's record, persist the result, publish it."""
        self._require_loaded()
        while True:
            with self._lock:
                current = self._claims.get(claim_uid)
            given = copy_record(current)
            new = compute(given)
            if new is given:
                return given
            with self._lock:
                self._require_loaded()  # closed meanwhile (handed over): never write again
                if self._claims.get(claim_uid) is not current:
                    continue  # another writer changed this claim meanwhile: recompute
                claims = dict(self._claims)
                if new is None:
                    del claims[claim_uid]
                else:
                    claims[claim_uid] = new
                # only the changed claim is validated: the others were when they were committed or
                # loaded, and records are immutable (copies go in and out)
                data = codec.encode_checkpoint(model.Checkpoint(claims=claims), changed=(claim_uid,))
                self._files.write(data)  # raises: memory keeps the old state
                self._claims = claims
            return copy_record(new)

    def set_claim(self, record: model.ClaimRecord) -> model.ClaimRecord:
        """Persist ``record`` as the record of its claim UID and return a copy of it.

        Raises: ``LifecycleBlocked`` (reason ``ClaimReleaseInProgress``) when a record for the
        claim UID exists for another Pod (in any phase, including ``ReleaseComplete``) or its
        release has started; ``ContractViolation`` for an invalid record or a disallowed change
        of existing managed bindings; ``OSError`` when the write fails (memory unchanged).
        """
        own = copy_record(record)

        def compute(current: model.ClaimRecord | None) -> model.ClaimRecord | None:
            lifecycle.check_set_claim(current, own)
            return current if current == own else own

        return typing.cast(model.ClaimRecord, self._commit(own.claim_uid, compute))

    def _mutate(
        self, claim_uid: str, what: str, change: Callable[[model.ClaimRecord], model.ClaimRecord]
    ) -> model.ClaimRecord:
        def compute(current: model.ClaimRecord | None) -> model.ClaimRecord:
            if current is None:
                raise errors.ContractViolation(
                    f"cannot {what} claim {claim_uid}: it has no checkpoint record; snapshot the claim "
                    "first and treat an absent record as already released"
                )
            new = change(current)
            return current if new == current else new

        return typing.cast(model.ClaimRecord, self._commit(identities.ClaimUid(claim_uid), compute))

    def update_managed_bindings(self, claim_uid: str, update: lifecycle.BindingUpdate) -> model.ClaimRecord:
        """Narrowly update the claim's managed bindings and persist; return the new record.

        ``update`` is a function applied to each managed binding (pure: it may run more than once
        under contention) or a mapping attachmentID → replacement binding. Only phase
        Pending↔Ready and the shadow UID may change (``checkpoint_lifecycle``). An update that
        changes nothing writes nothing.
        Raises: ``ContractViolation`` for an absent claim or a disallowed change; ``Conflict``
        (``ShadowConflict``) for a replaced shadow UID; ``OSError`` when the write fails (memory
        unchanged).
        """
        return self._mutate(claim_uid, "update", lambda r: lifecycle.apply_binding_update(r, update))

    def mark_managed_deleting(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``Deleting`` for the claim's Pending/Ready bindings; return the new record.

        ``Deleting`` and ``ReleaseComplete`` bindings are kept as they are (never downgraded).
        Raises: ``ContractViolation`` for an absent claim; ``OSError`` when the write fails
        (memory unchanged).
        """
        return self._mutate(claim_uid, "mark Deleting for", lifecycle.mark_deleting)

    def mark_managed_release_complete(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``ReleaseComplete`` for the claim's Deleting bindings; return the new record.

        Raises: ``ContractViolation`` for an absent claim or a binding not yet ``Deleting``;
        ``OSError`` when the write fails (the bindings stay ``Deleting``; replay the idempotent
        local cleanup and retry).
        """
        return self._mutate(claim_uid, "mark ReleaseComplete for", lifecycle.mark_release_complete)

    def delete_claim(self, claim_uid: str) -> bool:
        """Remove the record of ``claim_uid`` only (the Pod's other claims stay); ``False`` when there is none.

        A record with managed bindings can be removed only once every binding is ``ReleaseComplete``.
        Raises: ``ContractViolation`` when a managed binding is not yet ``ReleaseComplete``;
        ``OSError`` when the write fails (the record stays).
        """
        found = False

        def compute(current: model.ClaimRecord | None) -> None:
            nonlocal found
            found = current is not None
            if current is None:
                return None
            pending = [
                b.attachment_id
                for b in current.managed_bindings()
                if b.phase is not model.Phase.RELEASE_COMPLETE
            ]
            if pending:
                raise errors.ContractViolation(
                    f"claim {current.namespace}/{current.name} ({claim_uid}) still has bindings that are not "
                    f"ReleaseComplete ({', '.join(pending)}); finish the release before removing the record"
                )
            return None

        self._commit(identities.ClaimUid(claim_uid), compute)
        return found
