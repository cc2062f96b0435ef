"""A fixed discovered-VF inventory for the claim handler in tests and benchmarks.

**Fake, for tests only.** The plugin's handler reads the publisher's current snapshot
(``driver.main``); tests and ``bench/prepare.py`` hand it one discovery result instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.host import discovery


@dataclass(frozen=True)
class StaticInventory:
    """A ``driver.claim_context.Inventory`` over one discovery result."""

    found: Mapping[str, discovery.DiscoveredVf]

    def vfs(self) -> Mapping[str, discovery.DiscoveredVf]:
        """The discovered VFs by device name."""
        return self.found
