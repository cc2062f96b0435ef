"""Startup step 2: the node's checkpoint loaded, and refused when this build cannot serve it.

docs/plugin.md#startup-order: a corrupt file or an unknown version stops the plugin and leaves the
files untouched, and so does a checkpoint holding auto-attached bindings in a process without
auto-attach (only auto-attach releases them). ``driver.main`` turns :class:`Refused` into its
``startup failed`` exit.
"""

from __future__ import annotations

import logging

from sriov_dra.driver import settings
from sriov_dra.host import checkpoint
from sriov_dra_rules import checkpoint_doc, errors

LOG = logging.getLogger("sriov_dra.driver")


class Refused(Exception):
    """The checkpoint cannot be used by this process; the message names the file and the fix."""


def load(cfg: settings.PluginSettings) -> tuple[checkpoint.CheckpointStore, int]:
    """Load the checkpoint of ``cfg.state_dir`` (creating the directory and an empty checkpoint).

    Returns the store and the number of prepared claims. Raises: :class:`Refused`.
    """
    try:
        cfg.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        store = checkpoint.CheckpointStore(cfg.state_dir / checkpoint_doc.CHECKPOINT_FILE_NAME)
        records = store.load()
    except errors.SriovDraError as exc:
        raise Refused(f"cannot load the checkpoint: {exc}") from exc
    except OSError as exc:
        raise Refused(
            f"cannot read or create the checkpoint in {cfg.state_dir}: {exc}; check --state-dir and "
            "that the plugin runs as root with the host directory mounted"
        ) from exc
    managed = sorted(uid for uid, r in records.items() if r.managed_bindings())
    if managed and not cfg.multus_auto_attach:
        store.close()
        raise Refused(
            f"checkpoint {store.path} holds auto-attached network bindings (claims {', '.join(managed)}) "
            "that this build cannot release; run the plugin version that wrote them, or drain the node "
            "and release those workloads first. The file was left untouched"
        )
    files = {"path": str(store.path), "source": str(store.source)}
    LOG.info("checkpoint loaded", extra={"op": "startup", **files, "claims": len(records)})
    return store, len(records)
