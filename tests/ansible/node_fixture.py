"""A temporary node for the preflight: CNI binaries that answer VERSION, the guard in front of thick Multus."""

from __future__ import annotations

import json
from pathlib import Path

from sriov_dra.guard import install

CNI_OK = '#!/bin/sh\ncat >/dev/null\necho \'{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}\'\n'
BINARIES = ("multus-shim", "multus-guard", "sriov", "host-local", "whereabouts")


def prepare(root: Path) -> dict[str, object]:
    """Lay out a node under ``root`` that passes every node check; return the preflight module options."""
    conf, bin_dir = root / "net.d", root / "bin"
    (conf / "multus.d").mkdir(parents=True)
    bin_dir.mkdir()
    for name in BINARIES:
        (bin_dir / name).write_text(CNI_OK)
        (bin_dir / name).chmod(0o755)
    primary = conf / "10-flannel.conflist"
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}]}))
    install.write_conflist(conf, install.guard_conflist(primary_config=primary, mode="thick"))
    daemon = conf / "multus.d" / "daemon-config.json"
    daemon.write_text(json.dumps({"multusConfigFile": "auto", "multusMasterCNI": primary.name}))
    caches = [root / "var" / "lib" / "cni" / "multus", root / "var" / "lib" / "cni" / "sriov"]
    for cache in caches:
        cache.mkdir(parents=True)
    return {
        "cni_conf_dir": str(conf),
        "cni_bin_dir": str(bin_dir),
        "multus_daemon_config": str(daemon),
        "cache_dirs": [str(c) for c in caches],
        "legacy_device_plugin_config": str(root / "etc" / "pcidp" / "config.json"),
    }
