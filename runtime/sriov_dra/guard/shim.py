"""``multus-guard``: the CNI plugin the container runtime calls instead of Multus (standard library only).

The runtime finds ``00-multus-guard.conflist`` first in its CNI config directory and runs this file
(installed as ``multus-guard`` in the CNI bin dir). What it does per ``CNI_COMMAND``:

* ``ADD``: forward the CNI environment and stdin to the guard daemon over a unix socket and print
  the daemon's answer (Multus's result, relayed unchanged, or a CNI error object) with its exit
  status. An unreachable or silent daemon fails the ADD with CNI error code 11 and a message that
  says why, so a Pod never starts without its managed networks. A request over the daemon's
  message limit fails here with code 7 naming the size (the daemon would stop reading mid-send).
* ``DEL``, ``CHECK``, ``GC``, ``STATUS``: exec Multus directly with the same synthesized config the
  daemon would use, the runtime's environment untouched and stdin replaced, so teardown never
  depends on the guard daemon (Multus's own exit status and output reach the runtime).
* ``VERSION``: answered here.

This file is also the one definition, shared with the daemon, of the guard's config keys
(:class:`GuardConf`), the Multus config the guard synthesizes (:func:`multus_config`), how Multus
is found (:func:`multus_binary`), the shim↔daemon wire format and the CNI error object. It must
import nothing but the standard library and start fast (``python3 -I -S``), must never add to or
rewrite the environment or CNI_ARGS it forwards, and must never run a delegate itself.

Source: spec §10, §11; ARCHITECTURE.md §6; reference multus.md §1.2, §2.1, §2.2, §2.5, §11.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Final

SUPPORTED_VERSIONS: Final = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
DEFAULT_SOCKET: Final = "/run/sriov-dra/multus-guard.sock"
DEFAULT_TIMEOUT_S: Final = 180.0
"""How long the shim waits for the daemon's answer; above the daemon's ADD budget (110 s)."""
DEFAULT_DAEMON_SOCKET_DIR: Final = "/run/multus/"
DEFAULT_THIN_KUBECONFIG: Final = "/etc/cni/net.d/multus.d/multus.kubeconfig"
PROTOCOL: Final = 1
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
PASSTHROUGH_COMMANDS: Final = frozenset({"DEL", "CHECK", "GC", "STATUS"})
RESERVED_MULTUS_KEYS: Final = frozenset(
    {"type", "name", "cniVersion", "delegates", "clusterNetwork", "kubeconfig", "daemonSocketDir"}
    | {"runtimeConfig", "capabilities", "args", "prevResult"}
)
"""Keys of ``multus.config`` the guard always sets itself."""

# CNI error codes (CNI spec "Error"); 100+ are this plugin's own.
CODE_INVALID_ENV: Final = 4
CODE_DECODE: Final = 6
CODE_INVALID_CONFIG: Final = 7
CODE_TRY_AGAIN: Final = 11
CODE_REJECTED: Final = 100
CODE_VERIFICATION_FAILED: Final = 101


class GuardConfError(ValueError):
    """The guard's CNI config (stdin) is malformed; the message names the key and the fix."""


@dataclass(frozen=True)
class GuardConf:
    """The guard plugin's config, as the runtime passes it on stdin.

    Shapes: ``mode`` is ``"thick"`` (``multus-shim`` to a running ``multus-daemon``) or ``"thin"``
    (the ``multus`` binary); ``primary_config`` the pinned primary network's config file, inlined
    as ``delegates[0]``; ``cluster_network``, when set, is given to Multus as ``clusterNetwork``
    instead (a path or NAD name as Multus resolves it); ``extra`` more Multus NetConf keys copied
    into the synthesized config. ``raw`` is the whole decoded stdin object.
    Units: ``timeout_s`` seconds.
    """

    cni_version: str
    name: str
    mode: str
    primary_config: str
    socket: str = DEFAULT_SOCKET
    timeout_s: float = DEFAULT_TIMEOUT_S
    binary: str | None = None
    cluster_network: str | None = None
    daemon_socket_dir: str = DEFAULT_DAEMON_SOCKET_DIR
    kubeconfig: str = DEFAULT_THIN_KUBECONFIG
    daemon_config_file: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


def _section(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key, {})
    if not isinstance(value, dict):
        raise GuardConfError(f"config key {key!r} must be an object, got {type(value).__name__}")
    return value


def _text(section: dict[str, Any], key: str, where: str, default: str | None = None) -> str | None:
    value = section.get(key, default)
    if value is not None and (not isinstance(value, str) or not value):
        raise GuardConfError(f"config key {where}.{key} must be a non-empty string, got {value!r}")
    return value


def parse_conf(stdin: bytes) -> GuardConf:
    """Decode and validate the guard's stdin config.

    Raises: :class:`GuardConfError` naming the key for malformed JSON, a missing or wrong-typed
    key, an unknown ``multus.mode``, a non-positive timeout or a reserved key in ``multus.config``.
    """
    try:
        obj = json.loads(stdin)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GuardConfError(f"the CNI config on stdin is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise GuardConfError(
            "the CNI config on stdin is not JSON: arrays or objects are nested too deeply"
        ) from exc
    if not isinstance(obj, dict):
        raise GuardConfError("the CNI config on stdin must be a JSON object")
    guard, multus = _section(obj, "guard"), _section(obj, "multus")
    version, name = obj.get("cniVersion"), obj.get("name")
    if not isinstance(version, str) or not version:
        raise GuardConfError("config key cniVersion must be a non-empty string (use the primary's version)")
    if not isinstance(name, str) or not name:
        raise GuardConfError("config key name must be a non-empty string")
    mode = multus.get("mode")
    if mode not in ("thick", "thin"):
        raise GuardConfError(f'config key multus.mode must be "thick" or "thin", got {mode!r}')
    primary = _text(multus, "primaryConfig", "multus")
    if primary is None:
        raise GuardConfError("config key multus.primaryConfig is required: the pinned primary network's file")
    timeout = guard.get("timeoutSeconds", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise GuardConfError(f"config key guard.timeoutSeconds must be a positive number, got {timeout!r}")
    extra = _section(multus, "config")
    reserved = sorted(RESERVED_MULTUS_KEYS.intersection(extra))
    if reserved:
        raise GuardConfError(f"multus.config must not set {reserved}; the guard sets these keys itself")
    return GuardConf(
        cni_version=version,
        name=name,
        mode=mode,
        primary_config=primary,
        socket=_text(guard, "socket", "guard", DEFAULT_SOCKET) or DEFAULT_SOCKET,
        timeout_s=float(timeout),
        binary=_text(multus, "binary", "multus"),
        cluster_network=_text(multus, "clusterNetwork", "multus"),
        daemon_socket_dir=_text(multus, "daemonSocketDir", "multus", DEFAULT_DAEMON_SOCKET_DIR)
        or DEFAULT_DAEMON_SOCKET_DIR,
        kubeconfig=_text(multus, "kubeconfig", "multus", DEFAULT_THIN_KUBECONFIG) or DEFAULT_THIN_KUBECONFIG,
        daemon_config_file=_text(multus, "daemonConfigFile", "multus"),
        extra=dict(extra),
        raw=obj,
    )


def multus_config(conf: GuardConf, *, teardown: bool = False) -> dict[str, Any]:
    """Return the config Multus gets on stdin for this request.

    Thick: ``{"type": "multus-shim", "daemonSocketDir", ...}``; thin: ``{"type": "multus",
    "kubeconfig", ...}``. Both carry the guard's ``cniVersion`` and ``name``, ``multus.config``
    keys, the runtime's ``capabilities``, ``runtimeConfig`` and ``args`` unchanged, and the pinned
    primary inlined as ``delegates[0]`` (as thin_entrypoint writes it; inlining also keeps a
    conflist primary's DEL lossless in Multus v4.3.0, which re-marshals a ``clusterNetwork``
    conflist lossily, reference multus.md §9). ``multus.clusterNetwork``, when set, is passed
    instead of the inlined primary. Neither refers to Multus's own ``00-multus.conf``. With
    ``teardown`` (DEL, CHECK, GC, STATUS) an unreadable primary falls back to ``clusterNetwork``
    (Multus's delegate cache serves DEL), so teardown never fails here.
    Raises: :class:`GuardConfError` when the primary cannot be read on ADD.
    Source: reference multus.md §2.1, §2.2, §2.5 (trap 4), §9, §11.1.
    """
    out: dict[str, Any] = {"cniVersion": conf.cni_version, "name": conf.name}
    out.update(conf.extra)
    for key in ("capabilities", "runtimeConfig", "args"):
        if key in conf.raw:
            out[key] = conf.raw[key]
    if conf.mode == "thick":
        out["type"] = "multus-shim"
        out["daemonSocketDir"] = conf.daemon_socket_dir
    else:
        out["type"] = "multus"
        out["kubeconfig"] = conf.kubeconfig
    if conf.cluster_network:
        out["clusterNetwork"] = conf.cluster_network
        return out
    try:
        with open(conf.primary_config, "rb") as f:
            try:
                primary = json.loads(f.read())
            except RecursionError:
                raise ValueError("arrays or objects are nested too deeply") from None
        if not isinstance(primary, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        if not teardown:
            raise GuardConfError(
                f"cannot read the primary network config {conf.primary_config}: {exc}"
            ) from exc
        out["clusterNetwork"] = conf.primary_config
        return out
    out["delegates"] = [primary]
    return out


def multus_binary(conf: GuardConf, cni_path: str) -> str:
    """Return the Multus executable: ``multus.binary``, else ``multus-shim``/``multus`` on CNI_PATH.

    Raises: :class:`GuardConfError` naming the searched directories when none is executable.
    """
    if conf.binary:
        return conf.binary
    name = "multus-shim" if conf.mode == "thick" else "multus"
    dirs = [d for d in cni_path.split(os.pathsep) if d]
    for directory in dirs:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    raise GuardConfError(f"{name} not found in CNI_PATH {dirs}; install Multus or set multus.binary")


def cni_error(cni_version: str, code: int, msg: str, details: str = "") -> str:
    """Return a CNI error object as JSON text (``cniVersion``, ``code``, ``msg``, ``details``)."""
    return json.dumps({"cniVersion": cni_version, "code": code, "msg": msg, "details": details})


def encode_request(env: dict[str, str], stdin: bytes) -> bytes:
    """Encode one shim→daemon request: the ``CNI_*`` environment and stdin (UTF-8 text).

    Raises: ``UnicodeDecodeError`` when stdin is not UTF-8.
    """
    cni_env = {k: v for k, v in env.items() if k.startswith("CNI_")}
    return json.dumps({"protocol": PROTOCOL, "env": cni_env, "stdin": stdin.decode("utf-8")}).encode()


def decode_response(data: bytes) -> tuple[int, str]:
    """Decode the daemon's answer into ``(exit status, stdout text)``.

    Raises: ``ValueError`` when it is not the expected JSON object.
    """
    obj = json.loads(data)
    if (
        not isinstance(obj, dict)
        or type(obj.get("exitCode")) is not int
        or not isinstance(obj.get("stdout"), str)
    ):
        raise ValueError("the guard daemon's answer is not {exitCode: int, stdout: str}")
    return obj["exitCode"], obj["stdout"]


def encode_response(exit_code: int, stdout: str) -> bytes:
    """Encode the daemon's answer (see :func:`decode_response`)."""
    return json.dumps({"exitCode": exit_code, "stdout": stdout}).encode()


def read_all(sock: socket.socket, limit: int = MAX_MESSAGE_BYTES) -> bytes:
    """Read until EOF; raise ``ValueError`` past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"message larger than {limit} bytes")
        chunks.append(chunk)


def _ask_daemon(conf: GuardConf, env: dict[str, str], stdin: bytes) -> tuple[int, str]:
    details = (
        "ADD is refused so that the Pod never starts without its managed networks; start the "
        "sriov-dra-guard DaemonSet on this node (DEL, CHECK, GC and STATUS do not need it)"
    )
    try:
        request = encode_request(env, stdin)
    except UnicodeDecodeError as exc:
        return 1, cni_error(conf.cni_version, CODE_DECODE, f"multus-guard: stdin is not UTF-8: {exc}")
    if len(request) > MAX_MESSAGE_BYTES:  # the daemon would stop reading: a broken pipe, not a reason
        msg = (
            f"multus-guard: the request is {len(request)} bytes, over the guard daemon's limit of "
            f"{MAX_MESSAGE_BYTES} bytes; shrink the CNI config the runtime passes (runtimeConfig, prevResult)"
        )
        return 1, cni_error(conf.cni_version, CODE_INVALID_CONFIG, msg)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(conf.timeout_s)
        try:
            sock.connect(conf.socket)
        except OSError as exc:
            msg = f"multus-guard: the guard daemon is not reachable at {conf.socket}: {exc}"
            return 1, cni_error(conf.cni_version, CODE_TRY_AGAIN, msg, details)
        try:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
            return decode_response(read_all(sock))
        except TimeoutError:
            msg = f"multus-guard: no answer from the guard daemon at {conf.socket} within {conf.timeout_s:g}s"
            return 1, cni_error(conf.cni_version, CODE_TRY_AGAIN, msg, details)
        except (OSError, ValueError) as exc:
            msg = f"multus-guard: the guard daemon at {conf.socket} failed to answer: {exc}"
            return 1, cni_error(conf.cni_version, CODE_TRY_AGAIN, msg, details)


def _exec_multus(conf: GuardConf, env: dict[str, str]) -> int:
    """Replace this process with Multus, stdin replaced by the synthesized config (never returns)."""
    binary = multus_binary(conf, env.get("CNI_PATH", ""))
    config = json.dumps(multus_config(conf, teardown=True)).encode()
    fd = os.memfd_create("multus-guard-config")
    os.write(fd, config)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdout.flush()
    os.execve(binary, [binary], env)
    return 127  # not reached


def main() -> int:
    """Run one CNI command (see the module docstring) and return the exit status."""
    env = dict(os.environ)
    command = env.get("CNI_COMMAND", "")
    stdin = sys.stdin.buffer.read()
    if command == "VERSION":
        print(
            json.dumps({"cniVersion": SUPPORTED_VERSIONS[-1], "supportedVersions": list(SUPPORTED_VERSIONS)})
        )
        return 0
    try:
        conf = parse_conf(stdin)
    except GuardConfError as exc:
        print(cni_error("1.0.0", CODE_INVALID_CONFIG, f"multus-guard: {exc}"))
        return 1
    try:
        if command == "ADD":
            code, out = _ask_daemon(conf, env, stdin)
            sys.stdout.write(out)
            return code
        if command in PASSTHROUGH_COMMANDS:
            return _exec_multus(conf, env)
    except GuardConfError as exc:
        print(cni_error(conf.cni_version, CODE_INVALID_CONFIG, f"multus-guard: {exc}"))
        return 1
    print(cni_error(conf.cni_version, CODE_INVALID_ENV, f"multus-guard: unknown CNI_COMMAND {command!r}"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
