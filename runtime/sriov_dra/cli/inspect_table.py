"""How ``sriov-dra inspect`` shows its rows: the correlation table, or JSON for scripts.

One header line (Pod, node, claims, driver, pool), one line per VF with its claim conditions,
then the failed checks and VFs without a shadow, or the checks that passed and where the IPs came
from, each request's device metadata file when it was read on the node, and a footnote when
addresses carry no prefix; or every row as JSON with its verdict. Reads neither API nor node.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from sriov_dra.cli.inspect_rows import Row


def render_table(rows: Sequence[Row]) -> str:
    """The correlation table as text: one header, one line per VF, then failed checks if any."""
    if not rows:
        return "(no SR-IOV devices allocated to this Pod)"
    head = (
        "REQUEST",
        "DEVICE",
        "VF PCI",
        "PCIE ROOT",
        "PAIRED GPU",
        "SHADOW NAD",
        "TEMPLATE",
        "IF",
        "IP",
        "MAC",
        "RAIL SUBNET",
        "CONDITIONS",
    )
    lines = [
        (
            r.request,
            r.device,
            r.vf_pci,
            r.pcie_root,
            ", ".join(g.split(": ", 1)[1].split("/", 1)[-1] if ": " in g else g for g in r.gpus) or "-",
            r.shadow or "(none)",
            r.source or "-",
            r.interface or "-",
            ",".join(r.ips) or "-",
            r.mac or "-",
            r.subnet or "-",
            ",".join(r.conditions) or "-",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    first = rows[0]
    out = [
        f"Pod {first.pod} on node {first.node}: claim {', '.join(sorted({r.claim for r in rows}))}, "
        f"driver {first.driver}, pool {first.pool}"
    ]
    out.append(fmt.format(*head).rstrip())
    out.extend(fmt.format(*line).rstrip() for line in lines)
    failed = [f"  {r.request}: {k} failed" for r in rows for k, v in r.checks.items() if not v]
    missing = [f"  {r.request}: no shadow NAD bound to VF {r.vf_pci}" for r in rows if not r.shadow]
    if failed or missing:
        out.append("problems:")
        out.extend(missing + failed)
    else:
        origin = {r.ip_origin for r in rows} - {""}
        out.append(
            f"checks passed: {', '.join(sorted({k for r in rows for k in r.checks}))} (IPs from {', '.join(sorted(origin)) or '-'})"
        )
    shown: set[tuple[str, str]] = set()
    for r in rows:
        if r.metadata and (r.claim, r.request.split("/", 1)[0]) not in shown:
            shown.add((r.claim, r.request.split("/", 1)[0]))
            out.append(f"device metadata of {r.claim} request {r.request.split('/', 1)[0]}:")
            out.extend(f"  {line}" for line in r.metadata.rstrip("\n").splitlines())
    if any(r.ip_origin == "network-status" and any("/" not in ip for ip in r.ips) for r in rows):
        out.append(
            "IPs without prefix: Multus's network-status carries none; --netns <the Pod's network "
            "namespace path> reads each interface's address with its prefix on the node"
        )
    return "\n".join(out)


def render_json(rows: Sequence[Row]) -> str:
    """The rows as a JSON list (for scripts)."""
    return json.dumps([asdict(r) | {"ok": r.ok} for r in rows], indent=2)
