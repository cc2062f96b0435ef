"""The plugin's durable checkpoint store: claim records in memory, persisted before they count.

``CheckpointStore`` keeps every prepared claim's record (``core.plugin.checkpoint_model``) in memory and on
disk through ``host.checkpoint_files``: durably in ``checkpoint.slots`` (an A/B slot file, one
``fdatasync`` per write, so a crash leaves the old or the new checkpoint) and as a readable copy
``checkpoint.json`` in the plugin directory. Every mutation builds the new state, writes the whole
checkpoint, and only then publishes the new state in memory; when the write fails the in-memory
state is left as it was (the rollback the spec asks for), so memory never claims more than the
disk holds.

The mutation API is narrow (spec §6.3): ``set_claim`` (claim-UID uniqueness: another Pod waits
with ``ClaimReleaseInProgress`` while any record for the UID exists), ``update_managed_bindings``
(phase Pending↔Ready and shadow UID only), ``mark_managed_deleting``,
``mark_managed_release_complete`` and ``delete_claim`` (one claim; the Pod's other claims stay).
Rules live in ``core.plugin.checkpoint_lifecycle``; this module only applies them atomically.

Concurrency: one lock guards the in-memory map. It is held only to read a record and to
check-encode-write-publish a change; caller-supplied update functions run outside it, against a
snapshot, and the change is retried if another thread changed that claim meanwhile (every retry
means another writer made progress). Never hold it across API or hardware work. Returned records are
copies (:func:`copy_record`); callers can never mutate the store's state.

This module must never delete or rewrite a checkpoint it cannot read: a corrupt file or unknown
version fails ``load`` with an actionable ``ContractViolation`` and the files are left untouched.
"""

from __future__ import annotations

import copy
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Final

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.core.plugin import checkpoint_lifecycle as lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import checkpoint_files
from sriov_dra_rules import errors

CHECKPOINT_FILE_NAME: Final = checkpoint_files.CHECKPOINT_FILE_NAME
"""The readable copy's name inside the plugin directory (``/var/lib/kubelet/plugins/<driver>/``), as upstream."""

SLOTS_FILE_NAME: Final = checkpoint_files.SLOTS_FILE_NAME
"""The durable record's name inside the plugin directory (``host.checkpoint_files``)."""

CHECKPOINT_FILE_MODE: Final = checkpoint_files.CHECKPOINT_FILE_MODE
"""Permission bits: rendered CNI configs may reference IPAM credentials; only root reads it."""

CheckpointFiles = checkpoint_files.CheckpointFiles
"""The files seam: tests and benchmarks subclass it to fail or time writes (``write(data)``)."""

_Compute = Callable[[model.ClaimRecord | None], model.ClaimRecord | None]


@typing.overload
def copy_record(record: model.ClaimRecord) -> model.ClaimRecord: ...
@typing.overload
def copy_record(record: None) -> None: ...
def copy_record(record: model.ClaimRecord | None) -> model.ClaimRecord | None:
    """A copy of ``record`` that shares no mutable state with it, at a quarter of ``deepcopy``'s cost.

    The record model is frozen dataclasses whose fields are strings, enums, tuples of strings and
    nested frozen dataclasses, all immutable and safely shared, except ``PreparedDevice.vf_config``
    (a JSON object), which is copied. ``tests/host/test_checkpoint.py`` pins that inventory
    of field types, so a new mutable field fails a test instead of leaking shared state.

    The copies are made field by field (the instance dict, no ``__init__``: the model has no
    ``__post_init__``) and ``vf_config`` as JSON: with ``dataclasses.replace`` and ``deepcopy``
    the dozen record copies of one 8-VF prepare cost about 1 ms of plugin CPU (issue 5).
    """
    if record is None:
        return None
    out = _shallow(record)
    out.__dict__["devices"] = tuple(_copy_device(d) for d in record.devices)
    return out


_T = typing.TypeVar("_T")


def _shallow(obj: _T) -> _T:
    """A new instance of a frozen dataclass holding the same field values."""
    out: _T = object.__new__(type(obj))
    out.__dict__.update(obj.__dict__)
    return out


def _copy_device(device: model.PreparedDevice) -> model.PreparedDevice:
    out = _shallow(device)
    out.__dict__["vf_config"] = _copy_json(device.vf_config)
    return out


def _copy_json(value: model.JsonValue) -> typing.Any:
    """A copy of JSON data sharing no dict or list with it; JSON scalars are immutable and shared.

    Anything else (never valid in a record: ``checkpoint_model.json_value_problem``) is deep-copied.
    """
    kind = type(value)
    if kind is dict:
        return {k: _copy_json(v) for k, v in typing.cast(model.JsonObject, value).items()}
    if kind is list:
        return [_copy_json(v) for v in typing.cast(list[model.JsonValue], value)]
    if kind is str or kind is bool or kind is int or kind is float or value is None:
        return value
    return copy.deepcopy(value)


class _Unchanged(Exception):
    """Internal signal: the computed record equals the current one; skip the write."""


class CheckpointStore:
    """Thread-safe, durable map of claim UID → :class:`~sriov_dra.core.plugin.checkpoint_model.ClaimRecord`.

    Call :meth:`load` once before anything else. ``files`` is injectable (keyword-only; default
    :class:`CheckpointFiles` of ``path``) so tests can make persistence fail and observe the
    in-memory rollback.

    Raises (every method after :meth:`load`): ``ContractViolation`` when used before ``load``.
    Source: spec §6.3; upstream ``pkg/podmanager`` (reference ``dra-driver-sriov.md`` §5).
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
        """Release the files (and the slot file's lock, :mod:`sriov_dra.host.slot_file`); reload to use again."""
        with self._lock:
            self._files.close()
            self._loaded = False

    # --- reading ----------------------------------------------------------------------------------

    def load(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Read and verify the checkpoint (creating an empty one when absent); return all claims.

        Leftover temporaries of an interrupted write are removed first (one active plugin per
        node, spec §6.3); a legacy ``checkpoint.json`` alone is adopted into the slot file and a
        stale readable copy is rewritten, both only after the content decoded
        (:class:`CheckpointFiles`). Raises: ``ContractViolation`` naming the file for corrupt
        content, a checksum mismatch, a slot file without a valid slot or an unknown version
        (reason ``UnsupportedVersion``), with the files left untouched and the in-memory state
        unchanged; ``OSError`` when a file or the directory is unreadable or an absent checkpoint
        cannot be created.
        """
        raw = self._files.read()
        if raw is None:
            empty = model.Checkpoint()
            self._files.write(codec.encode_checkpoint(empty))
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
        """Return a deep copy of the record of ``claim_uid``, or ``None`` when there is none."""
        self._require_loaded()
        with self._lock:
            record = self._claims.get(identities.ClaimUid(claim_uid))
        return copy_record(record)

    def snapshot_pod(self, pod_uid: str) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Return deep copies of every record whose consumer is ``pod_uid``, keyed by claim UID.

        Shapes: keys in ascending claim-UID order.
        """
        self._require_loaded()
        with self._lock:
            found = {uid: r for uid, r in self._claims.items() if r.pod_uid == pod_uid}
        return {uid: copy_record(found[uid]) for uid in sorted(found)}

    def all_claims(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Return deep copies of every record, keyed by claim UID in ascending order."""
        self._require_loaded()
        with self._lock:
            current = dict(self._claims)
        return {uid: copy_record(current[uid]) for uid in sorted(current)}

    # --- mutations --------------------------------------------------------------------------------

    def _commit(self, claim_uid: identities.ClaimUid, compute: _Compute) -> model.ClaimRecord | None:
        """Apply ``compute`` to the claim's record and persist the result, then publish it.

        ``compute`` gets a deep copy of the current record (or ``None``) and returns the new record
        (``None`` deletes); it runs outside the lock and may raise to abort without any effect.
        """
        self._require_loaded()
        while True:
            with self._lock:
                current = self._claims.get(claim_uid)
            try:
                new = compute(copy_record(current))
            except _Unchanged:
                return copy_record(current)
            with self._lock:
                if self._claims.get(claim_uid) is not current:
                    continue  # another writer changed this claim meanwhile: recompute
                claims = dict(self._claims)
                if new is None:
                    claims.pop(claim_uid, None)
                else:
                    claims[claim_uid] = new
                # only the changed claim is validated: every other record was validated when it
                # was committed or loaded, and records are immutable (copies go in and out)
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
        Source: spec §6.3 ("enforce claim-UID uniqueness atomically in Set"), §8.1 step 2.
        """
        own = copy_record(record)

        def compute(current: model.ClaimRecord | None) -> model.ClaimRecord:
            lifecycle.check_set_claim(current, own)
            if current == own:
                raise _Unchanged
            return own

        result = self._commit(own.claim_uid, compute)
        assert result is not None
        return result

    def _existing(self, claim_uid: str, what: str) -> Callable[[model.ClaimRecord | None], model.ClaimRecord]:
        def require(current: model.ClaimRecord | None) -> model.ClaimRecord:
            if current is None:
                raise errors.ContractViolation(
                    f"cannot {what} claim {claim_uid}: it has no checkpoint record; snapshot the claim "
                    "first and treat an absent record as already released"
                )
            return current

        return require

    def _mutate(
        self,
        claim_uid: str,
        what: str,
        change: Callable[[model.ClaimRecord], model.ClaimRecord],
    ) -> model.ClaimRecord:
        require = self._existing(claim_uid, what)

        def compute(current: model.ClaimRecord | None) -> model.ClaimRecord:
            old = require(current)
            new = change(old)
            if new == old:
                raise _Unchanged
            return new

        result = self._commit(identities.ClaimUid(claim_uid), compute)
        assert result is not None
        return result

    def update_managed_bindings(self, claim_uid: str, update: lifecycle.BindingUpdate) -> model.ClaimRecord:
        """Narrowly update the claim's managed bindings and persist; return the new record.

        ``update`` is a function applied to each managed binding (it must be pure: it may run more
        than once under contention) or a mapping attachmentID → replacement binding. Only phase
        Pending↔Ready and the shadow UID may change (see ``checkpoint_lifecycle``). An update that
        changes nothing writes nothing. Durable when it returns, like every write of the store.

        Raises: ``ContractViolation`` for an absent claim or a disallowed change; ``Conflict``
        (``ShadowConflict``) for a replaced shadow UID; ``OSError`` when the write fails (memory
        unchanged). Source: spec §6.3, §8.1 step 3, §8.3.
        """
        return self._mutate(claim_uid, "update", lambda r: lifecycle.apply_binding_update(r, update))

    def mark_managed_deleting(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``Deleting`` for the claim's Pending/Ready bindings; return the new record.

        ``Deleting`` and ``ReleaseComplete`` bindings are kept as they are (never downgraded).
        Raises: ``ContractViolation`` for an absent claim; ``OSError`` when the write fails
        (memory unchanged). Source: spec §8.4.
        """
        return self._mutate(claim_uid, "mark Deleting for", lifecycle.mark_deleting)

    def mark_managed_release_complete(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``ReleaseComplete`` for the claim's Deleting bindings; return the new record.

        Raises: ``ContractViolation`` for an absent claim or a binding not yet ``Deleting``;
        ``OSError`` when the write fails (the bindings stay ``Deleting``; replay the idempotent
        local cleanup and retry). Source: spec §8.4 step 6.
        """
        return self._mutate(claim_uid, "mark ReleaseComplete for", lifecycle.mark_release_complete)

    def delete_claim(self, claim_uid: str) -> bool:
        """Remove the record of ``claim_uid`` only; other claims of the same Pod stay.

        Returns ``False`` (and writes nothing) when there is no record. A record with managed
        bindings can be removed only once every binding is ``ReleaseComplete``.

        Raises: ``ContractViolation`` when a managed binding is not yet ``ReleaseComplete``;
        ``OSError`` when the write fails (the record stays). Source: spec §8.4 step 9.
        """
        removed = False

        def compute(current: model.ClaimRecord | None) -> None:
            nonlocal removed
            removed = False
            if current is None:
                raise _Unchanged
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
            removed = True
            return None

        self._commit(identities.ClaimUid(claim_uid), compute)
        return removed
