"""The device metadata files as a Pod's container reads them: the demo's METADATA column.

On a real node the file is read from inside the container (``kubectl exec <pod> -- cat <path>``,
the path the 1.36 kubelet-plugin helper mounts it at, docs/design.md#device-metadata); a
simulated node runs no container, so there the host file the mount would show is read. Each
correlation row gets its VF's entry of the file: ``networkData`` as ``<if> <ips> <mac>`` and the
document's generation, or why there is none.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from sriov_dra.core import metadata_document
from sriov_dra.core.plugin import device_metadata
from sriov_dra_lab import binaries
from sriov_dra_rules import errors, names

TITLE = "METADATA (IN CONTAINER)"


def container_paths(claim: Mapping[str, Any], driver: str = names.DRIVER_NAME) -> dict[str, str]:
    """Top-level request of this driver's results → where a container reads its file."""
    identity = device_metadata.claim_identity(claim)
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    requests = {device_metadata.base_request(r["request"]) for r in results if r.get("driver") == driver}
    return {r: device_metadata.container_path(identity, r, driver) for r in sorted(requests)}


def exec_cat(kubeconfig: str, namespace: str, pod: str, path: str) -> str | None:
    """The file's text as the Pod's first container reads it, or ``None`` when ``cat`` fails."""
    return _exec(kubeconfig, namespace, pod, "cat", path)


def exec_env(kubeconfig: str, namespace: str, pod: str) -> str:
    """The environment of a process in the Pod's first container (``env``), ``""`` when it fails."""
    return _exec(kubeconfig, namespace, pod, "env") or ""


def _exec(kubeconfig: str, namespace: str, pod: str, *argv: str) -> str | None:
    kubectl = str(binaries.find("kubectl"))
    done = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", "exec", "-n", namespace, pod, "--", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def device_entry(text: str | None, device: str) -> dict[str, Any] | None:
    """The ``requests[].devices[]`` entry named ``device`` in the file's text, with the document's
    ``metadata.generation`` under ``"generation"``; ``None`` when the text is absent or does not list it."""
    if not text:
        return None
    try:
        doc = metadata_document.decode(text.encode(), source="the container's file")
    except errors.ContractViolation:
        return None
    generation = doc["metadata"]["generation"]  # type: ignore[index]
    for request in doc["requests"]:  # type: ignore[attr-defined]
        for entry in request["devices"]:
            if entry.get("name") == device:
                return {**entry, "generation": generation}
    return None


def cell(entry: Mapping[str, Any] | None) -> str:
    """``dra0 192.0.2.5/24 02:..:0a gen 2``; ``(no file)``, or ``(no networkData)``."""
    if entry is None:
        return "(no file)"
    data = entry.get("networkData")
    if not data:
        return f"(no networkData) gen {entry['generation']}"
    ips = ",".join(data.get("ips") or []) or "-"
    return f"{data.get('interfaceName', '-')} {ips} {data.get('hardwareAddress') or '-'} gen {entry['generation']}"


def with_column(table: str, rows: int, title: str, values: Sequence[str]) -> str:
    """``table`` (``sriov-dra inspect``'s: a Pod line, the header, then one line per row) with one more
    column ``title`` holding ``values``, one per row. Lines after the rows are kept as they are."""
    lines = table.splitlines()
    if rows == 0 or len(lines) < rows + 2 or len(values) != rows:
        return table
    width = max(len(line) for line in lines[1 : rows + 2])
    lines[1] = f"{lines[1].ljust(width)}  {title}"
    for i, value in enumerate(values):
        lines[2 + i] = f"{lines[2 + i].ljust(width)}  {value}"
    return "\n".join(lines)
