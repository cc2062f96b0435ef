"""Run CNI plugins the way a container runtime does: one plugin call, or a whole network config list.

Used by the cni test tier, the guard benchmark and the lab's kubelet simulator, so all of them run
the CNI chain exactly alike:

* :func:`invoke` runs one plugin with the CNI environment (``CNI_COMMAND``, ``CNI_CONTAINERID``,
  ``CNI_NETNS``, ``CNI_IFNAME``, ``CNI_ARGS``, ``CNI_PATH``) and a config on stdin, and decodes
  its answer (a result or a CNI error object);
* :func:`runtime_choice` / :func:`run_network` pick the lexically first ``.conf``/``.conflist``/
  ``.json`` of a conf dir (the runtime's rule) and run its plugins like libcni: ADD in order with
  ``prevResult``, DEL/CHECK in reverse, each plugin's config holding the list's ``cniVersion`` and
  ``name`` and only the ``runtimeConfig`` keys its ``capabilities`` declare;
* :func:`build_bin_dir` assembles a CNI bin dir of wrappers around the pinned binaries, each of
  which appends one line per call to a record file (:func:`recorded_calls`), so a test can prove
  which plugins ran (and that none did).

It never interprets a plugin's work; it only passes what a runtime passes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

CONFIG_SUFFIXES: Final = (".conf", ".conflist", ".json")
DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class CniResult:
    """The answer of one plugin (or of a list: its last plugin's).

    Units: ``duration_s`` seconds of wall time. Shapes: ``result`` the decoded stdout object on
    success (``None`` when empty), ``error`` the CNI error object on failure.
    """

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        """True when the plugin exited 0."""
        return self.exit_code == 0

    @property
    def result(self) -> dict[str, Any] | None:
        """The decoded result on success (``None`` on failure or empty output)."""
        if not self.ok or not self.stdout.strip():
            return None
        doc = json.loads(self.stdout)
        return doc if isinstance(doc, dict) else None

    @property
    def error(self) -> dict[str, Any] | None:
        """The decoded CNI error object on failure (``{"msg": <stdout/stderr>}`` if not JSON)."""
        if self.ok:
            return None
        try:
            doc = json.loads(self.stdout)
        except ValueError:
            return {"code": 0, "msg": (self.stdout or self.stderr).strip()}
        return doc if isinstance(doc, dict) else {"code": 0, "msg": self.stdout}


def k8s_args(namespace: str, name: str, uid: str | None = None, infra_container_id: str = "") -> str:
    """The CNI_ARGS a Kubernetes runtime sends (``IgnoreUnknown=1;K8S_POD_NAMESPACE=...;...``)."""
    items = [("IgnoreUnknown", "1"), ("K8S_POD_NAMESPACE", namespace), ("K8S_POD_NAME", name)]
    items.append(("K8S_POD_INFRA_CONTAINER_ID", infra_container_id))
    if uid is not None:
        items.append(("K8S_POD_UID", uid))
    return ";".join(f"{k}={v}" for k, v in items)


@dataclass(frozen=True)
class Attachment:
    """Where and for whom a CNI call runs (the runtime's per-sandbox values)."""

    container_id: str
    netns: str
    cni_args: str
    ifname: str = "eth0"
    cni_path: Sequence[Path] = field(default_factory=tuple)

    def env(self, command: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for ``command`` (``PATH`` plus the CNI variables and ``extra``)."""
        env = {"PATH": os.environ.get("PATH", DEFAULT_PATH)}
        env.update(extra or {})
        env.update(
            {
                "CNI_COMMAND": command,
                "CNI_CONTAINERID": self.container_id,
                "CNI_NETNS": self.netns,
                "CNI_IFNAME": self.ifname,
                "CNI_ARGS": self.cni_args,
                "CNI_PATH": os.pathsep.join(str(p) for p in self.cni_path),
            }
        )
        return env


def invoke(
    plugin: Path,
    command: str,
    attachment: Attachment,
    config: Mapping[str, Any] | bytes,
    *,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> CniResult:
    """Run ``plugin`` once for ``command`` with ``config`` on stdin.

    Units: ``timeout_s`` seconds. Raises: ``subprocess.TimeoutExpired`` when it runs longer.
    """
    stdin = config if isinstance(config, bytes) else json.dumps(config).encode()
    start = time.monotonic()
    proc = subprocess.run(
        [str(plugin)],
        input=stdin,
        capture_output=True,
        env=attachment.env(command, env),
        timeout=timeout_s,
        check=False,
    )
    return CniResult(
        exit_code=proc.returncode,
        stdout=proc.stdout.decode("utf-8", "replace"),
        stderr=proc.stderr.decode("utf-8", "replace"),
        duration_s=time.monotonic() - start,
    )


def runtime_choice(conf_dir: Path) -> Path:
    """The config file a runtime uses: the lexically first ``.conf``/``.conflist``/``.json``.

    Raises: ``FileNotFoundError`` when there is none.
    """
    names = sorted(n for n in os.listdir(conf_dir) if n.endswith(CONFIG_SUFFIXES) and not n.startswith("."))
    if not names:
        raise FileNotFoundError(f"no CNI network config in {conf_dir}")
    return conf_dir / names[0]


def load_network(path: Path) -> dict[str, Any]:
    """Read a ``.conf`` or ``.conflist`` as a list: a single plugin becomes ``{"plugins": [it]}``."""
    doc = json.loads(path.read_bytes())
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a JSON object")
    if "plugins" in doc:
        return doc
    return {"cniVersion": doc.get("cniVersion"), "name": doc.get("name"), "plugins": [doc]}


def plugin_config(
    network: Mapping[str, Any],
    plugin: Mapping[str, Any],
    *,
    runtime_config: Mapping[str, Any] | None = None,
    prev_result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One plugin's stdin as libcni builds it: list ``cniVersion``/``name``, declared runtimeConfig, prevResult."""
    conf = dict(plugin)
    conf["cniVersion"] = network.get("cniVersion")
    conf["name"] = network.get("name")
    caps = plugin.get("capabilities")
    if runtime_config and isinstance(caps, Mapping):
        chosen = {k: v for k, v in runtime_config.items() if caps.get(k) is True}
        if chosen:
            conf["runtimeConfig"] = chosen
    if prev_result is not None:
        conf["prevResult"] = dict(prev_result)
    return conf


def run_network(
    network: Mapping[str, Any],
    command: str,
    attachment: Attachment,
    *,
    bin_dirs: Sequence[Path],
    runtime_config: Mapping[str, Any] | None = None,
    prev_result: Mapping[str, Any] | None = None,
    timeout_s: float = 120.0,
) -> CniResult:
    """Run every plugin of ``network`` for ``command`` as libcni does; stop at the first failure.

    ADD runs in list order feeding each result to the next as ``prevResult``; DEL and CHECK run
    in reverse order with ``prev_result`` (the cached ADD result) as every plugin's prevResult.
    Raises: ``FileNotFoundError`` naming a plugin type missing from ``bin_dirs``.
    """
    plugins = [p for p in network.get("plugins", []) if isinstance(p, Mapping)]
    order = plugins if command == "ADD" else list(reversed(plugins))
    last = CniResult(0, "", "", 0.0)
    previous = prev_result if command != "ADD" else None
    for plugin in order:
        binary = find_plugin(str(plugin.get("type")), bin_dirs)
        conf = plugin_config(network, plugin, runtime_config=runtime_config, prev_result=previous)
        last = invoke(binary, command, attachment, conf, timeout_s=timeout_s)
        if not last.ok:
            return last
        if command == "ADD":
            previous = last.result
    return last


def find_plugin(plugin_type: str, bin_dirs: Sequence[Path]) -> Path:
    """The executable for ``plugin_type`` in ``bin_dirs``. Raises: ``FileNotFoundError``."""
    for directory in bin_dirs:
        candidate = directory / plugin_type
        if os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"CNI plugin {plugin_type!r} not found in {[str(d) for d in bin_dirs]}")


def _wrapper(name: str, command: Sequence[str], record_file: Path | None) -> str:
    record = ""
    if record_file is not None:
        fmt = "%s\\t%s\\t%s\\t%s\\n"
        record = (
            f'printf \'{fmt}\' {shlex.quote(name)} "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_IFNAME" '
            f">> {shlex.quote(str(record_file))}\n"
        )
    return f'#!/bin/sh\n# sriov-dra lab CNI wrapper for {name}\n{record}exec {shlex.join(command)} "$@"\n'


def build_bin_dir(
    dest: Path, plugins: Mapping[str, Sequence[str]], *, record_file: Path | None = None
) -> Path:
    """Write one executable wrapper per plugin name into ``dest`` and return ``dest``.

    Shapes: ``plugins`` maps the plugin name (its CNI ``type``) to the command that implements
    it (``[binary]`` or ``[python, "-m", module, ...]``). With ``record_file`` every call appends
    ``name<TAB>command<TAB>containerID<TAB>ifname`` before running the plugin.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name, command in plugins.items():
        path = dest / name
        path.write_text(_wrapper(name, command, record_file))
        path.chmod(0o755)
    return dest


@dataclass(frozen=True)
class RecordedCall:
    """One plugin call seen by a recording wrapper."""

    plugin: str
    command: str
    container_id: str
    ifname: str


def recorded_calls(record_file: Path, *, container_id: str | None = None) -> list[RecordedCall]:
    """The calls recorded so far, oldest first, optionally only those for ``container_id``."""
    if not record_file.exists():
        return []
    calls = []
    for line in record_file.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            continue
        call = RecordedCall(*parts)
        if container_id is None or call.container_id == container_id:
            calls.append(call)
    return calls
