"""Benchmark: shadow-config rendering cost relative to a plain JSON round trip of the same config.

``bench_render()`` times ``render.render_shadow_config`` and, in the same run on the same machine,
``json.loads`` + ``json.dumps`` of the same ``spec.config`` text, and returns the ratio of the two
(best of several repeats each). The goal is a ratio of at most :data:`GOAL_RATIO`: strict
decoding, validation, name/device materialisation, canonical encoding and hashing may cost at
most a few plain round trips. A ratio, not a duration, is reported because absolute times depend
on the machine; nothing here is a test assertion.

Run as a script (``make bench`` or ``.venv/bin/python bench/core_render.py``) to print the ratio.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import timing

from sriov_dra.core import render

GOAL_RATIO: Final = 5.0
"""Rendering may cost at most this many plain ``json.loads`` + ``json.dumps`` round trips."""

PCI: Final = "0000:3b:02.1"

# A realistic operator-style template: 4-space indented conflist, rail IPAM, tuning metaplugin.
SOURCE_NAD: Final[dict[str, object]] = {
    "apiVersion": "k8s.cni.cncf.io/v1",
    "kind": "NetworkAttachmentDefinition",
    "metadata": {
        "name": "rail-a-net",
        "namespace": "ai-workloads",
        "uid": "5a5a5a5a-0000-4000-8000-00000000000a",
    },
    "spec": {
        "config": json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "ai-workloads-rail-a",
                "plugins": [
                    {
                        "type": "sriov",
                        "vlan": 100,
                        "vlanQoS": 0,
                        "spoofchk": "on",
                        "trust": "off",
                        "logLevel": "info",
                        "capabilities": {"ips": True, "mac": True},
                        "ipam": {
                            "type": "whereabouts",
                            "range": "192.0.2.0/24",
                            "exclude": ["192.0.2.1/32", "192.0.2.254/32"],
                            "network_name": "rail-a",
                            "routes": [{"dst": "198.51.100.0/24", "gw": "192.0.2.1"}],
                        },
                    },
                    {"type": "tuning", "mtu": 9000, "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}},
                ],
            },
            indent=4,
        )
    },
}


def bench_render(*, calls: int = 2000, repeats: int = 7) -> float:
    """Return render time divided by plain ``json.loads`` + ``json.dumps`` time, measured now.

    Units: a dimensionless ratio; both sides are timed in this run, interleaved per repeat set,
    on the same config text.
    """
    spec = SOURCE_NAD["spec"]
    assert isinstance(spec, dict)
    text = spec["config"]
    assert isinstance(text, str)

    def plain() -> object:
        return json.dumps(json.loads(text), separators=(",", ":"))

    def rendered() -> object:
        return render.render_shadow_config(SOURCE_NAD, PCI)

    rendered()  # warm caches (regex compilation, imports)
    plain()
    render_s = timing.best_per_call(rendered, calls=calls, repeats=repeats)
    plain_s = timing.best_per_call(plain, calls=calls, repeats=repeats)
    return render_s / plain_s


def main() -> None:
    """Print the measured ratio and whether it meets :data:`GOAL_RATIO`."""
    ratio = bench_render()
    verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
    print(
        f"render_shadow_config / (json.loads + json.dumps): {ratio:.2f}x ({verdict} goal <= {GOAL_RATIO:.0f}x)"
    )


if __name__ == "__main__":
    main()
