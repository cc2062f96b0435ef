"""A temporary node for the preflight: CNI binaries that answer VERSION, the guard in front of thick Multus, and
the plugin's checkpoint the guard reads (written by the plugin's own store)."""

from __future__ import annotations

import json
from pathlib import Path

from sriov_dra.guard import install
from sriov_dra.host import checkpoint

CNI_OK = '#!/bin/sh\ncat >/dev/null\necho \'{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}\'\n'
BINARIES = ("multus-shim", "multus-guard", "sriov", "host-local", "whereabouts")
# The node checks of the preflight module, in the order it reports them.
NODE_CHECKS = [
    "cni-binaries",
    "cni-exec",
    "cni-add",
    "guard-first",
    "guard-config",
    "guard-checkpoint",
    "cache-mounts",
    "legacy-device-plugin",
]


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
    plugin_checkpoint = write_plugin_checkpoint(root / "plugin")
    install.write_conflist(
        conf,
        install.guard_conflist(
            primary_config=primary, mode="thick", plugin_checkpoint=str(plugin_checkpoint)
        ),
    )
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
        "plugin_checkpoint": str(plugin_checkpoint),
    }


def write_plugin_checkpoint(state_dir: Path) -> Path:
    """Create the empty checkpoint a starting plugin creates in ``state_dir``; return its ``checkpoint.json``."""
    state_dir.mkdir(parents=True, exist_ok=True)
    store = checkpoint.CheckpointStore(state_dir / "checkpoint.json")
    store.load()
    store.close()
    return store.path


def cli_flags(options: dict[str, object]) -> list[str]:
    """``sriov-dra preflight`` flags that give the same node options as ``options`` (module option names)."""
    flags: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, list):
            flags += [flag, *[str(v) for v in value]]
        else:
            flags += [flag, str(value)]
    return flags


def primary_path(options: dict[str, object]) -> Path:
    """The primary network config :func:`prepare` pinned."""
    return Path(str(options["cni_conf_dir"])) / "10-flannel.conflist"


def repin(options: dict[str, object], primary: Path) -> None:
    """Rewrite the guard's conflist (as the guard's installer writes it) to pin ``primary`` instead."""
    conf = Path(str(options["cni_conf_dir"]))
    doc = json.loads((conf / install.CONFLIST_NAME).read_text())
    doc["plugins"][0]["multus"]["primaryConfig"] = str(primary)
    (conf / install.CONFLIST_NAME).write_text(json.dumps(doc, indent=2) + "\n")


def break_node(options: dict[str, object], case: str) -> str:
    """Break the node :func:`prepare` laid out as ``case`` says; return the start of the expected reason.

    Cases: ``valid`` (nothing broken), ``multus-primary`` (the guard pins a Multus-generated
    ``00-multus.conf``), ``missing-primary``, ``corrupt-primary`` (truncated JSON),
    ``repeated-key-primary``, ``not-utf8-primary``, ``directory-primary``.
    """
    primary = primary_path(options)
    if case == "valid":
        return f"{options['cni_conf_dir']}/{install.CONFLIST_NAME}: mode thick, primary pinned to {primary}"
    if case == "multus-primary":
        generated = primary.with_name("00-multus.conf")
        generated.write_text(primary.read_text())
        repin(options, generated)
        return f"guard config {install.CONFLIST_NAME}: multus.primaryConfig {generated} is a Multus-generated file"
    if case == "missing-primary":
        primary.unlink()
        return f"cannot read primary network config {primary}: No such file or directory"
    if case == "corrupt-primary":
        primary.write_text('{"cniVersion": "1.0.0", "name": "cbr0", "plugins": [')
        return f"primary network config {primary} is not valid JSON: $: malformed JSON at line 1"
    if case == "repeated-key-primary":
        primary.write_text('{"cniVersion":"1.0.0","name":"cbr0","type":"flannel","type":"multus"}')
        return (
            f'primary network config {primary} is not valid JSON: $.type: duplicate key "type" in one object '
            'with the values "flannel" and "multus"'
        )
    if case == "not-utf8-primary":
        primary.write_bytes(b'{"name": "\xff"}')
        return f"primary network config {primary} is not UTF-8 text"
    if case == "directory-primary":
        primary.unlink()
        primary.mkdir()
        return f"cannot read primary network config {primary}: Is a directory"
    raise ValueError(f"unknown case {case!r}")


BROKEN_CASES = (
    "valid",
    "multus-primary",
    "missing-primary",
    "corrupt-primary",
    "repeated-key-primary",
    "not-utf8-primary",
    "directory-primary",
)
