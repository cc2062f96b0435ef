"""This node's auto-attach mode, when ``--multus-auto-attach-node-label`` gates it per node.

The install's preflight gate labels a Node ``<label>=true`` only while every check of that node
passes (the guard's daemon up, the running guard, Multus and plugin images the installed ones;
docs/install.md): the plugin reads its Node at start and runs auto-attach fully only there. A node
without the label whose checkpoint holds auto-attached bindings runs it release-only: the recorded
bindings are still repaired and released (only auto-attach can release them,
docs/design.md#release), but no new claim is prepared (``AutoAttachGateClosed``). Any other node
is manual. The mode holds for the process: the preflight restarts a release-only plugin whose
bindings are all released, so that it starts manual. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ENABLED: str = "true"
"""The label value that turns auto-attach on; any other value, or none, closes the gate."""


class Mode(enum.StrEnum):
    """The plugin's auto-attach mode on its node; the values are what it reports (docs/plugin.md#flags)."""

    FULL = "full"
    """Auto-attach: new claims get managed bindings; recorded ones are repaired and released."""
    RELEASE_ONLY = "release-only"
    """The gate is closed but bindings are recorded: those are repaired and released; new claims refused."""
    OFF = "off"
    """Manual mode (upstream's MULTUS mode): no managed binding exists or is made."""


@dataclass(frozen=True)
class Decision:
    """``mode``: this node's auto-attach mode; ``why``: the fact that decided, for the log and refusals."""

    mode: Mode
    why: str


def decide(label: str, node: str, node_labels: Mapping[str, str], managed_claims: Sequence[str]) -> Decision:
    """The auto-attach mode of Node ``node`` with ``node_labels`` when ``label`` gates it.

    Full when the Node carries ``label=true``; release-only when it does not but the checkpoint
    records auto-attached bindings (``managed_claims``: their claim UIDs); else off (manual
    mode). ``why`` names the label, what was found and how the gate opens again.
    """
    value = node_labels.get(label)
    if value == ENABLED:
        return Decision(Mode.FULL, f"Node {node} carries {label}={ENABLED}")
    found = f"has {label}={value}" if value is not None else f"does not carry {label}"
    if managed_claims:
        return Decision(
            Mode.RELEASE_ONLY,
            f"Node {node} {found} (its auto-attach gate is closed), but the checkpoint holds auto-attached "
            f"bindings (claims {', '.join(sorted(managed_claims))}): they are still repaired and released, "
            "no new claim is prepared; fix the failed preflight checks and run the preflight again "
            "(it sets the label and restarts the plugin), or drain the node (playbooks/drain.yml) and run the "
            "preflight again (with no binding left it restarts the plugin in manual mode)",
        )
    return Decision(
        Mode.OFF,
        f"Node {node} {found}: manual mode (the preflight gate sets {label}={ENABLED} once every node "
        "check passed; docs/install.md)",
    )
