"""``multus-guard``: the CNI plugin the runtime calls instead of Multus (stdlib and rules only).

``ADD`` of a Pod with managed bindings on this node (the plugin's checkpoint says so,
:mod:`sriov_dra_rules.guard_route`), or of a Pod it cannot tell about, goes to the guard daemon
over a unix socket and its answer is printed with its exit status (an unreachable daemon: CNI
error 11 saying why the daemon was needed); the ADD of any other Pod execs stock Multus directly,
so its outcome is Multus's own, daemon up or down (docs/design.md#guard). ``DEL``, ``CHECK``, ``GC`` and ``STATUS`` exec
Multus directly with the same synthesized config, so teardown never needs the daemon; before a
DEL an unreadable Multus cache is set aside, and a thick DEL without ``K8S_POD_UID`` gets an
empty one (:func:`thick_del_env`; docs/guard.md, docs/design.md#cni-teardown). The one
definition, shared with the daemon, of that config (:func:`multus_config`), the wire format and
the CNI error object. Runs as ``python3 -I -S`` on the rules of :data:`RULES_VERSION`; rewrites
nothing else it forwards, never runs a delegate.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import socket  # imported where the daemon is asked: an ordinary Pod's ADD and teardown never load it

RULES_VERSION: str | None = None
"""``None`` in the source tree (``sriov_dra_rules`` is importable beside ``sriov_dra``); the installed
shim carries the digest of the rules directory installed for it (:func:`rules_dir`)."""
RULES_PARENT: Final = "multus-guard.d"
"""Beside the installed shim: ``multus-guard.d/<digest>/sriov_dra_rules/``."""


def rules_dir(shim_path: str, version: str) -> str:
    """The directory the installed shim at ``shim_path`` puts on ``sys.path``: ``<its dir>/multus-guard.d/<version>``."""
    return os.path.join(os.path.dirname(os.path.realpath(shim_path)), RULES_PARENT, version)


MIN_PYTHON: Final = (3, 11)  # the oldest the rules run on (enum.StrEnum); the node's python3 runs this file


def _cannot_start(msg: str, details: str) -> None:  # the CNI error object (code 11); exit 1
    print(json.dumps({"cniVersion": "1.0.0", "code": 11, "msg": f"multus-guard: {msg}", "details": details}))
    sys.exit(1)


if sys.version_info < MIN_PYTHON:  # pragma: no cover - only an installed shim on an old python3
    _cannot_start(
        f"{sys.executable} is Python {sys.version.split()[0]}, the shim needs 3.11 or later; install it with "
        "a newer interpreter (sriov-dra-guard install --interpreter, role variable guard_shim_interpreter)",
        f"interpreter {sys.executable}",
    )
# The installed file: its own rules, never another version's, and no bytecode written beside them.
if RULES_VERSION is not None:
    sys.dont_write_bytecode = True
    sys.path.insert(0, rules_dir(__file__, RULES_VERSION))
try:
    from sriov_dra_rules import cni_args, errors, guard_conf, guard_route, multus_cache, strict_json
except Exception as _bad:  # pragma: no cover - only an installed shim without (readable) rules
    why, where = f"{type(_bad).__name__}: {_bad}", rules_dir(__file__, str(RULES_VERSION))
    _cannot_start(
        f"cannot load its rules ({why}); run sriov-dra-guard install again",
        f"expected {where}/sriov_dra_rules",
    )

GuardConf = guard_conf.GuardConf
GuardConfError = guard_conf.GuardConfError
parse_conf = guard_conf.parse_conf
DEFAULT_SOCKET: Final = guard_conf.DEFAULT_SOCKET

SUPPORTED_VERSIONS: Final = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
PROTOCOL: Final = 1
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
PASSTHROUGH_COMMANDS: Final = frozenset({"DEL", "CHECK", "GC", "STATUS"})
DAEMON_WAIT_S: Final = 5.0
"""How long an ADD waits for a guard daemon to listen (no socket file, or none accepting) before it
fails with code 11: a daemon restarting, or a rollout's new Pod taking the socket over
(docs/guard.md#rolling-update). Bounded by the configured timeout as well."""
DAEMON_RETRY_S: Final = 0.05


class CniErrorCode(enum.IntEnum):
    """The ``code`` of a CNI error object (CNI spec "Error"); 100 and above are this plugin's own."""

    INVALID_ENV = 4
    DECODE = 6
    INVALID_CONFIG = 7
    TRY_AGAIN = 11
    REJECTED = 100
    VERIFICATION_FAILED = 101


def _read_json_file(path: str) -> object:
    """The strict JSON value in the file at ``path`` (:func:`sriov_dra_rules.strict_json.decode_file`).

    Raises: ``OSError`` when it cannot be read; ``ValueError`` naming each problem with its path.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return strict_json.decode_file(raw, what="file", source=path)
    except errors.InvalidSpec as exc:
        raise ValueError("; ".join(str(e) for e in exc.errors)) from None


def multus_config(conf: GuardConf, *, teardown: bool = False) -> dict[str, Any]:
    """Return the config Multus gets on stdin for this request.

    Thick: ``{"type": "multus-shim", "daemonSocketDir", ...}``; thin: ``{"type": "multus",
    "kubeconfig", ...}``. Both carry the guard's ``cniVersion`` and ``name``, ``multus.config``
    keys, the runtime's ``capabilities``, ``runtimeConfig`` and ``args`` unchanged, and the pinned
    primary inlined as ``delegates[0]`` (as thin_entrypoint writes it; inlining also keeps a
    conflist primary's DEL lossless in Multus v4.3.0, which re-marshals a ``clusterNetwork``
    conflist lossily, multus-cni #1449). ``multus.clusterNetwork``, when set, is passed
    instead of the inlined primary. Neither refers to Multus's own ``00-multus.conf``. With
    ``teardown`` (DEL, CHECK, GC, STATUS) an unreadable primary falls back to ``clusterNetwork``
    (Multus's delegate cache serves DEL), so teardown never fails here. ``retryDeleteOnError`` is
    ``true`` unless ``multus.config`` sets it: Multus v4.3.0 then keeps a container's delegate
    cache after a delegate DEL failed (it otherwise removes it, and the retried DEL finds nothing
    to release); thick daemon-config keys still win.
    Raises: :class:`GuardConfError` when the primary cannot be read on ADD.
    Source: docs/guard.md; Multus v4.3.0 ``pkg/multus/multus.go`` ``CmdDel``; multus-cni #355,
    #1449.
    """
    out: dict[str, Any] = {"cniVersion": conf.cni_version, "name": conf.name}
    out.update(conf.extra)
    out.setdefault("retryDeleteOnError", True)
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
        primary = _read_json_file(conf.primary_config)
        if not isinstance(primary, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        if not teardown:
            raise GuardConfError(
                "", f"cannot read the primary network config {conf.primary_config}: {exc}"
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
    name = conf.multus_name
    dirs = [d for d in cni_path.split(os.pathsep) if d]
    for directory in dirs:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    raise GuardConfError("", f"{name} not found in CNI_PATH {dirs}; install Multus or set multus.binary")


def multus_cache_dir(conf: GuardConf) -> str:
    """The directory Multus keeps its delegate cache in (``cniDir``), resolved as Multus resolves it.

    ``multus.config``'s ``cniDir``, else Multus's default ``/var/lib/cni/multus``; in thick mode
    the daemon's config file (``multus.daemonConfigFile``), whose keys override the guard's config
    for every request, wins. The path is read as the host sees it (the Multus role mounts the
    thick daemon's cache at the same path).
    Raises: :class:`GuardConfError` naming the file and key when the daemon config cannot be read,
    is not a JSON object, repeats a key, or a ``cniDir`` is not a non-empty string.
    Source: Multus v4.3.0 config loading (the thick daemon's overlay).
    """
    sources: list[tuple[str, dict[str, Any]]] = [("multus.config", conf.extra)]
    if conf.mode == "thick" and conf.daemon_config_file:
        path = conf.daemon_config_file
        try:
            daemon = _read_json_file(path)
        except (OSError, ValueError) as exc:
            raise GuardConfError(
                "", f"cannot read Multus daemon config {path} (multus.daemonConfigFile): {exc}"
            ) from exc
        if not isinstance(daemon, dict):
            raise GuardConfError("", f"Multus daemon config {path} is not a JSON object")
        sources.append((path, daemon))
    found = multus_cache.DEFAULT_MULTUS_CACHE_DIR
    for where, keys in sources:
        if "cniDir" in keys:
            value = keys["cniDir"]
            if not isinstance(value, str) or not value:
                raise GuardConfError("", f"cniDir in {where} must be a non-empty path, got {value!r}")
            found = value
    return found


def _set_aside_before_del(conf: GuardConf, env: dict[str, str]) -> None:
    """Run :func:`~sriov_dra_rules.multus_cache.set_aside_unreadable_cache` for this DEL and log what happened on stderr.

    Never raises: a DEL must reach Multus whatever this check meets.
    """
    container = env.get("CNI_CONTAINERID", "")
    try:
        moved = multus_cache.set_aside_unreadable_cache(
            multus_cache_dir(conf), container, stamp=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        )
    except Exception as exc:  # report it, then let Multus run as it would have
        print(
            f"multus-guard: op=DEL container={container}: cannot check Multus's delegate cache ({exc}); "
            "Multus runs with the cache as it is",
            file=sys.stderr,
        )
        return
    if moved is not None:
        path, copy, problem = moved
        print(
            f"multus-guard: op=DEL container={container} cache={path} copy={copy}: Multus's delegate cache "
            f"is unreadable ({problem}); moved it aside (the copy is kept) so Multus rebuilds the delegates "
            "from the live Pod and its NADs instead of skipping every delegate DEL",
            file=sys.stderr,
        )


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


def route_add(conf: GuardConf, env: dict[str, str]) -> guard_route.Route:
    """Whether this ADD needs the daemon: ``managed`` ``False`` sends it to stock Multus directly.

    With ``guard.verifyOrdinarySelections`` every ADD goes to the daemon (it verifies ordinary
    selections too); else :func:`sriov_dra_rules.guard_route.decide` on the plugin's checkpoint.
    """
    if conf.verify_ordinary_selections:
        return guard_route.Route(None, "guard.verifyOrdinarySelections is on: the daemon checks every ADD")
    return guard_route.decide(Path(conf.plugin_checkpoint), env.get("CNI_ARGS", ""))


def connect_daemon(path: str, timeout_s: float) -> socket.socket:
    """A socket connected to the guard daemon at ``path``, waiting while none listens there.

    No socket file or a refused connection is retried every :data:`DAEMON_RETRY_S` for at most
    :data:`DAEMON_WAIT_S` (and ``timeout_s``); the socket's timeout is ``timeout_s``.
    Raises: ``OSError`` with the last failure when the wait ends, or at once for any other error.
    """
    import socket

    deadline = time.monotonic() + min(DAEMON_WAIT_S, timeout_s)
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(DAEMON_RETRY_S)
        except BaseException:
            sock.close()
            raise


def _ask_daemon(conf: GuardConf, env: dict[str, str], stdin: bytes, why: str) -> tuple[int, str]:
    import socket

    details = (
        f"{why}; ADD is refused so that such a Pod never starts unchecked; start the sriov-dra-guard "
        "DaemonSet on this node (Pods without managed bindings, and DEL, CHECK, GC and STATUS, do not need it)"
    )
    try:
        request = encode_request(env, stdin)
    except UnicodeDecodeError as exc:
        return 1, cni_error(conf.cni_version, CniErrorCode.DECODE, f"multus-guard: stdin is not UTF-8: {exc}")
    if len(request) > MAX_MESSAGE_BYTES:  # the daemon would stop reading: a broken pipe, not a reason
        msg = (
            f"multus-guard: the request is {len(request)} bytes, over the guard daemon's limit of "
            f"{MAX_MESSAGE_BYTES} bytes; shrink the CNI config the runtime passes (runtimeConfig, prevResult)"
        )
        return 1, cni_error(conf.cni_version, CniErrorCode.INVALID_CONFIG, msg)
    try:
        sock = connect_daemon(conf.socket, conf.timeout_s)
    except OSError as exc:
        msg = f"multus-guard: the guard daemon is not reachable at {conf.socket}: {exc}"
        return 1, cni_error(conf.cni_version, CniErrorCode.TRY_AGAIN, msg, details)
    with sock:
        try:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
            return decode_response(read_all(sock))
        except TimeoutError:
            msg = f"multus-guard: no answer from the guard daemon at {conf.socket} within {conf.timeout_s:g}s"
            return 1, cni_error(conf.cni_version, CniErrorCode.TRY_AGAIN, msg, details)
        except (OSError, ValueError) as exc:
            msg = f"multus-guard: the guard daemon at {conf.socket} failed to answer: {exc}"
            return 1, cni_error(conf.cni_version, CniErrorCode.TRY_AGAIN, msg, details)


def thick_del_env(conf: GuardConf, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a DEL, with ``K8S_POD_UID=`` (empty) appended to ``CNI_ARGS`` naming no Pod UID in thick mode.

    Without the item the thick daemon (v4.3.0 ``podUID``) GETs the Pod to learn its UID and fails
    the whole DEL once the Pod is gone; ``multus-shim`` then answers success and no delegate's DEL
    runs, leaking the sandbox's IPAM and VF (multus-cni #1168). An empty UID skips that GET, and
    Multus's DEL runs as thin Multus runs it without a UID: the Pod read by name, no UID compared,
    the cached delegates released. Thin mode, ``CNI_ARGS`` with a ``K8S_POD_UID`` item, empty ones
    or ones not all ``key=value`` are returned unchanged.
    """
    items = cni_args.items(env.get("CNI_ARGS", ""))
    if conf.mode != "thick" or not items or any(k == cni_args.POD_UID_ARG for k, _ in items):
        return env
    return {**env, "CNI_ARGS": f"{env['CNI_ARGS']};{cni_args.POD_UID_ARG}="}


def _exec_multus(conf: GuardConf, env: dict[str, str]) -> int:
    """Replace this process with Multus, stdin replaced by the synthesized config (never returns).

    Raises: :class:`GuardConfError` when Multus is not found, or, on ADD, the primary is unreadable.
    """
    binary = multus_binary(conf, env.get("CNI_PATH", ""))
    command = env.get("CNI_COMMAND")
    if command == "DEL":
        _set_aside_before_del(conf, env)
        env = thick_del_env(conf, env)
    config = json.dumps(multus_config(conf, teardown=command != "ADD")).encode()
    fd = os.memfd_create("multus-guard-config")
    os.write(fd, config)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdout.flush()
    try:
        os.execve(binary, [binary], env)  # returns only by raising
    except OSError as exc:
        msg = f"multus-guard: cannot run Multus {binary}: {exc.strerror}; fix guard config key multus.binary"
        print(cni_error(conf.cni_version, CniErrorCode.INVALID_CONFIG, msg, binary))
    return 1


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
        print(cni_error("1.0.0", CniErrorCode.INVALID_CONFIG, f"multus-guard: {exc}"))
        return 1
    try:
        if command == "ADD":
            route = route_add(conf, env)
            if route.managed is False:
                return _exec_multus(conf, env)
            code, out = _ask_daemon(conf, env, stdin, route.why)
            sys.stdout.write(out)
            return code
        if command in PASSTHROUGH_COMMANDS:
            return _exec_multus(conf, env)
    except GuardConfError as exc:
        print(cni_error(conf.cni_version, CniErrorCode.INVALID_CONFIG, f"multus-guard: {exc}"))
        return 1
    print(
        cni_error(
            conf.cni_version, CniErrorCode.INVALID_ENV, f"multus-guard: unknown CNI_COMMAND {command!r}"
        )
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
