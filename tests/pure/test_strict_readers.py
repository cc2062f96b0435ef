"""Every parser of JSON or YAML that a person wrote goes through the one strict reader.

Person-written text is read with ``sriov_dra_rules.strict_json`` (JSON: a repeated key is refused
with its path, no NaN) or ``sriov_dra.host.strict_yaml`` (YAML: a repeated mapping key is refused).
This test walks the syntax tree of every module of the runtime (``runtime/sriov_dra``) and of the
collection (``plugins/``) and counts each other way of parsing JSON or YAML: ``json.load(s)``,
``json.JSONDecoder``, ``raw_decode``, any ``yaml`` load function or loader class, and the same
names imported from ``json``/``yaml`` (aliases included). A file may use them only when listed
below, at most as often as listed, with the reason: text that a program wrote (API server bodies,
CNI plugin results, our own state files and checkpoint), or a part that must stand alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = (REPO / "runtime" / "sriov_dra", REPO / "plugins", REPO / "lab" / "sriov_dra_lab")
JSON_NAMES = frozenset({"load", "loads", "JSONDecoder"})
YAML_NAMES = frozenset(
    {"load", "load_all", "safe_load", "safe_load_all", "full_load", "full_load_all", "unsafe_load"}
    | {"unsafe_load_all", "compose", "compose_all", "parse", "scan"}
    | {"Loader", "SafeLoader", "FullLoader", "UnsafeLoader", "BaseLoader", "CLoader", "CSafeLoader"}
    | {"CFullLoader", "CUnsafeLoader", "CBaseLoader"}
)

API = "a response body of the API server (machine-written; the client library decodes the rest)"
CNI_RESULT = "the stdout of a CNI plugin or of a tool's -j output (machine-written)"
ALLOWED: dict[str, tuple[int, str]] = {
    "plugins/module_utils/sriov_dra_rules/strict_json.py": (1, "the one strict JSON reader itself"),
    "runtime/sriov_dra/host/strict_yaml.py": (
        3,
        "the one strict YAML reader itself (a SafeLoader subclass and its type annotations)",
    ),
    "runtime/sriov_dra/core/plugin/checkpoint_codec.py": (
        1,
        "our own checkpoint: a checksummed codec that refuses repeated keys and NaN itself",
    ),
    "runtime/sriov_dra/core/networks.py": (
        2,
        "the Pod networks annotation, read as Multus's Go decoder reads it (a repeated key: the last "
        "one wins, every occurrence type-checked), and each element's exact source text "
        "(raw_decode); see tests/pure/core/test_networks.py",
    ),
    "runtime/sriov_dra/guard/shim.py": (
        1,
        "the guard daemon's answer (our own wire format); the guard's config, its primary and Multus's "
        "daemon config go through sriov_dra_rules (installed beside the shim)",
    ),
    "plugins/module_utils/sriov_dra_rules/multus_cache.py": (
        1,
        "Multus's delegate cache, read as Multus's Go decoder reads it (machine-written)",
    ),
    "runtime/sriov_dra/guard/server.py": (1, "the shim's request on the guard socket (our own wire format)"),
    "runtime/sriov_dra/guard/verify.py": (1, "Multus's network-status annotation (machine-written)"),
    "runtime/sriov_dra/kube/errors.py": (1, API),
    "runtime/sriov_dra/kube/objects.py": (1, API),
    "runtime/sriov_dra/kube/pods.py": (1, API),
    "runtime/sriov_dra/kube/apiserver_probes.py": (1, "the API server's /version answer (machine-written)"),
    "plugins/module_utils/sriov_dra_rules/preflight_node.py": (2, CNI_RESULT),
    "plugins/module_utils/devlink.py": (1, "iproute2's devlink -j output (machine-written; never raises)"),
    "lab/sriov_dra_lab/fakes/fake_sysfs.py": (1, "the fake sysfs tree's own metadata file (written by it)"),
    "runtime/sriov_dra/cli/inspect_rows.py": (
        3,
        "display only, never acted on: Multus's network-status, the shadow config our plugin wrote, "
        "and the source NAD's name for a column (its config is read strictly by the plugin)",
    ),
    "lab/sriov_dra_lab/sriov_cni.py": (
        5,
        "the lab's stand-in for sriov-cni (a Go plugin whose decoder keeps the last key): the config "
        "Multus hands it, its own state and VF map files, and the IPAM plugin's result or error",
    ),
    "lab/sriov_dra_lab/cni.py": (
        3,
        "CNI results on stdout, and the primary network config the lab itself installed, read as "
        "the container runtime's libcni reads it",
    ),
    "lab/sriov_dra_lab/cni_node.py": (1, "the 00-multus.conf that thick Multus generated"),
    "lab/sriov_dra_lab/demo.py": (1, "API server audit log lines (machine-written)"),
    "lab/sriov_dra_lab/iproute.py": (1, CNI_RESULT),
    "lab/sriov_dra_lab/real_node.py": (1, CNI_RESULT),
    "lab/sriov_dra_lab/kubelet_state.py": (1, "the kubelet simulator's own state file"),
    "lab/sriov_dra_lab/lab_dir.py": (1, "the lab's own state file"),
    "lab/sriov_dra_lab/images.py": (1, "the image index tools/build-image.sh writes (machine-written)"),
    "lab/sriov_dra_lab/real_stack.py": (
        2,
        "crictl's inspect, inspectp and pods JSON output (machine-written)",
    ),
}


def _aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the ``json`` and ``yaml`` modules in ``tree``."""
    json_names, yaml_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "json":
                    json_names.add(alias.asname or "json")
                elif alias.name == "yaml":
                    yaml_names.add(alias.asname or "yaml")
    return json_names, yaml_names


def parser_uses(path: Path) -> list[str]:
    """Each way ``path`` parses JSON or YAML without the strict readers, as ``line: text``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    json_names, yaml_names = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if (owner in json_names and node.attr in JSON_NAMES) or (
                owner in yaml_names and node.attr in YAML_NAMES
            ):
                found.append(f"{node.lineno}: {owner}.{node.attr}")
            elif node.attr == "raw_decode":
                found.append(f"{node.lineno}: .raw_decode")
        elif isinstance(node, ast.ImportFrom) and node.module in ("json", "yaml"):
            names = JSON_NAMES if node.module == "json" else YAML_NAMES
            found += [
                f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name in names
            ]
    return found


FILES = sorted(p for root in ROOTS for p in root.rglob("*.py") if "_pb2" not in p.name)


def test_only_listed_files_parse_json_or_yaml_without_the_strict_readers() -> None:
    uses = {str(p.relative_to(REPO)): parser_uses(p) for p in FILES}
    unlisted = {f: u for f, u in uses.items() if u and f not in ALLOWED}
    over = {f: u for f, u in uses.items() if f in ALLOWED and len(u) > ALLOWED[f][0]}
    assert unlisted == {}, "read person-written text with strict_json or host.strict_yaml, or list it here"
    assert over == {}, "more parser uses than listed: use the strict reader, or list and justify the new one"


def test_every_listed_file_exists_and_still_parses() -> None:
    stale = [f for f in ALLOWED if not (REPO / f).exists() or not parser_uses(REPO / f)]
    assert stale == []
    assert all(count > 0 and len(reason) > 20 for count, reason in ALLOWED.values())


@pytest.mark.parametrize(
    "source",
    [
        "import json\njson.loads(t)\n",
        "import json as j\nj.load(f)\n",
        "from json import loads\n",
        "import yaml\nyaml.safe_load(t)\n",
        "import yaml as y\ny.load_all(t, Loader=y.SafeLoader)\n",
        "from yaml import safe_load_all\n",
        "d = json.JSONDecoder()\nd.raw_decode(t)\n",
    ],
    ids=["json-loads", "json-alias-load", "from-json-import", "yaml-safe-load", "yaml-alias-and-loader",
         "from-yaml-import", "raw-decode"],
)  # fmt: skip
def test_the_walk_finds_every_spelling(source: str, tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(source if "JSONDecoder" not in source else "import json\n" + source)
    assert parser_uses(path), source
    path.write_text("from sriov_dra_rules import strict_json\nstrict_json.decode(t)\n# json.loads(t)\n")
    assert parser_uses(path) == []
