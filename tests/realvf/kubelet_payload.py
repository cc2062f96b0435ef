"""What a real kubelet in the realvf guest needs in the run image, for the one-Pod test
(``guest/test_one_pod_every_real_part.py``).

The run image gets :data:`GUEST_DIR` with ``bin/`` (the
pinned kubelet, containerd, containerd-shim-runc-v2 and ctr, Debian's runc), ``lib/`` (the shared
libraries runc loads), ``images/`` (the lab's pause and busybox OCI archives), the kubelet's
kubeconfig (``system:node:<kubeapi.KUBELET_NODE>``, naming the apiserver as the guest names it)
and the cluster CA; QEMU forwards the kubelet's port from the host (``kubeapi.Kubelet``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from sriov_dra_lab import binaries, images

PORT_ENV = "SRIOV_DRA_REALVF_KUBELET_PORT"
GUEST_DIR = ".realvf-node"
NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr")
_LDD_RE = re.compile(r"(/\S+) \(0x[0-9a-f]+\)$")


def env(kubelet: Any) -> dict[str, str]:
    """The guest environment of a run with a kubelet: the kubelet's port (:data:`PORT_ENV`)."""
    return {PORT_ENV: str(kubelet.port)}


def pseudo(kubelet: Any, workdir: Path) -> list[str]:
    """mksquashfs pseudo entries for :data:`GUEST_DIR` (see the module docstring).

    Raises: ``binaries.BinaryMissing`` for a pinned binary not built; ``FileNotFoundError`` without runc.
    """
    runc = Path(shutil.which("runc") or "/usr/sbin/runc")
    if not runc.is_file():
        raise FileNotFoundError("runc not found (Debian's runc package: tools/install-debian-deps.sh)")
    archives = workdir / "node-images"
    archives.mkdir(exist_ok=True)
    pause, _ = images.write_archive(images.pause_spec(binaries.find("pause")), archives)
    busybox, _ = images.write_archive(images.busybox_spec(), archives)
    out = [f"{GUEST_DIR} d 755 0 0"] + [f"{GUEST_DIR}/{d} d 755 0 0" for d in ("bin", "lib", "images")]
    for name in NODE_BINARIES:
        out.append(f"{GUEST_DIR}/bin/{name} f 755 0 0 cat {binaries.find(name)}")
    out.append(f"{GUEST_DIR}/bin/runc f 755 0 0 cat {runc}")
    ldd = subprocess.run(["ldd", str(runc)], capture_output=True, text=True, check=False).stdout
    for line in ldd.splitlines():
        found = _LDD_RE.search(line.strip())
        if found and "ld-linux" not in found.group(1):
            library = Path(found.group(1))
            out.append(f"{GUEST_DIR}/lib/{library.name} f 644 0 0 cat {library.resolve()}")
    out += [
        f"{GUEST_DIR}/images/pause.tar f 644 0 0 cat {pause}",
        f"{GUEST_DIR}/images/busybox.tar f 644 0 0 cat {busybox}",
        f"{GUEST_DIR}/kubelet.kubeconfig f 600 0 0 cat {kubelet.kubeconfig}",
        f"{GUEST_DIR}/ca.crt f 644 0 0 cat {kubelet.ca_cert}",
    ]
    return out
