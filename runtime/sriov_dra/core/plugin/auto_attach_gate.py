"""Whether this node's plugin runs auto-attach, when ``--multus-auto-attach-node-label`` gates it per node.

The install's preflight gate labels a Node ``<label>=true`` only once every check of that node
passed (the guard's daemon up, the running guard, Multus and plugin images the installed ones;
docs/install.md): the plugin reads its Node at start and runs auto-attach only there, manual mode
elsewhere. A checkpoint that already holds auto-attached bindings keeps auto-attach on whatever
the label says, because only auto-attach can release them (docs/design.md#release). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ENABLED: str = "true"
"""The label value that turns auto-attach on; any other value, or none, leaves the node manual."""


@dataclass(frozen=True)
class Decision:
    """``on``: run auto-attach on this node; ``why``: the fact that decided, for the startup log."""

    on: bool
    why: str


def decide(label: str, node: str, node_labels: Mapping[str, str], managed_claims: Sequence[str]) -> Decision:
    """Auto-attach for Node ``node`` with ``node_labels`` when ``label`` gates it.

    On when the Node carries ``label=true``; also on, saying why, when it does not but the
    checkpoint records auto-attached bindings (``managed_claims``: their claim UIDs); else off
    (manual mode), naming the label and how it is set.
    """
    value = node_labels.get(label)
    if value == ENABLED:
        return Decision(True, f"Node {node} carries {label}={ENABLED}")
    found = f"has {label}={value}" if value is not None else f"does not carry {label}"
    if managed_claims:
        return Decision(
            True,
            f"Node {node} {found}, but the checkpoint holds auto-attached bindings (claims "
            f"{', '.join(sorted(managed_claims))}) that only auto-attach releases; drain the node "
            "(playbooks/drain.yml) to turn auto-attach off",
        )
    return Decision(
        False,
        f"Node {node} {found}: manual mode (the preflight gate sets {label}={ENABLED} once every node "
        "check passed; docs/install.md)",
    )
