"""``multus-guard``: the CNI plugin the runtime calls instead of Multus (stdlib and rules only).

``ADD`` goes to the guard daemon over a unix socket and its answer is printed with its exit
status (an unreachable daemon: CNI error 11); ``DEL``, ``CHECK``, ``GC`` and ``STATUS`` exec
Multus directly with the same synthesized config, so teardown never needs the daemon; before a
DEL an unreadable Multus cache is set aside (docs/guard.md, docs/design.md#cni-teardown). The one
definition, shared with the daemon, of that config (:func:`multus_config`), the wire format and
the CNI error object. Runs as ``python3 -I -S`` on the rules of :data:`RULES_VERSION`; never
rewrites what it forwards, never runs a delegate.
"""

from __future__ import annotations

import enum
import json
import os
import socket
import stat
import sys
import time
from typing import Any, Final

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
    from sriov_dra_rules import errors, guard_conf, strict_json
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
DEFAULT_MULTUS_CACHE_DIR: Final = "/var/lib/cni/multus"
"""Multus's ``cniDir`` default (v4.3.0 ``pkg/types/conf.go``): one delegate cache file per container ID."""
CORRUPT_COPY_INFIX: Final = ".corrupt-"
"""An unreadable cache ``<cniDir>/<id>`` is kept as ``<cniDir>/<id>.corrupt-<UTC time>[.<n>]``."""


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
    found = DEFAULT_MULTUS_CACHE_DIR
    for where, keys in sources:
        if "cniDir" in keys:
            value = keys["cniDir"]
            if not isinstance(value, str) or not value:
                raise GuardConfError("", f"cniDir in {where} must be a non-empty path, got {value!r}")
            found = value
    return found


def is_container_id(value: str) -> bool:
    """True for a CNI container ID (libcni's rule: ``[a-zA-Z0-9][a-zA-Z0-9_.-]*``), never a path."""
    return (
        bool(value) and all(c.isascii() and (c.isalnum() or c in "_.-") for c in value) and value[0].isalnum()
    )


def cache_problem(data: bytes) -> str | None:
    """Why Multus v4.3.0 cannot use ``data`` as a container's delegate cache, or ``None`` if it can.

    Multus's DEL decodes the file as a JSON list of delegate objects and indexes its first entry; a
    file that is not JSON (0 bytes, cut short by a crash), not a list, an empty list or a list with
    a non-object entry makes it log ``cannot properly delete`` (or panic) and answer success
    without running any delegate. Entries are not checked field by field.
    Shapes: the problem as a short phrase (``"0 bytes"``, ``"not JSON (...)"``, ``"a JSON object,
    not a list of delegates"``).
    Source: Multus v4.3.0 ``pkg/multus/multus.go`` ``CmdDel``; multus-cni #948, #1087.
    """
    if not data.strip():
        return f"{len(data)} bytes" if not data else "only whitespace"
    try:
        decoded = json.loads(data.decode("utf-8", "replace"), parse_constant=_no_constant)
    except ValueError as exc:
        return f"not JSON ({exc}; {len(data)} bytes, cut short?)"
    except RecursionError:
        return "not JSON (nested too deeply)"
    if not isinstance(decoded, list):
        return f"a JSON {_JSON_KINDS.get(type(decoded), 'value')}, not a list of delegates"
    if not decoded:
        return "an empty list of delegates"
    for index, entry in enumerate(decoded):
        if not isinstance(entry, dict):
            return f"delegate [{index}] is not a JSON object"
    return None


_JSON_KINDS: Final[dict[type, str]] = {
    dict: "object",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _keep_copy(path: str, data: bytes, stamp: str) -> str:
    """Put a copy of ``path`` (contents ``data``) next to it under a name no file has; return it."""
    for n in range(1000):
        copy = f"{path}{CORRUPT_COPY_INFIX}{stamp}" + (f".{n}" if n else "")
        try:
            os.link(path, copy)  # the same inode: contents, mode and mtime as Multus left them
            return copy
        except FileExistsError:
            continue
        except OSError:  # no hard links on this filesystem: write the bytes instead
            try:
                fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            return copy
    raise OSError(f"no free name for a copy of {path}")


def set_aside_unreadable_cache(
    cache_dir: str, container_id: str, *, stamp: str
) -> tuple[str, str, str] | None:
    """Move Multus's cache ``<cache_dir>/<container_id>`` aside when Multus cannot read it.

    A valid cache, a missing one and anything that is not a regular file are left untouched
    (``None``). An unreadable one (:func:`cache_problem`) is first linked (or copied) to
    ``<file>.corrupt-<stamp>[.<n>]`` next to it, never over an existing file, and only then
    removed, so DEL finds no cache: Multus v4.3.0 then rebuilds the delegates from the live Pod and
    its NADs (for a managed Pod the frozen shadows its finalizer keeps) and runs every delegate's
    DEL. Returns ``(path, copy, problem)`` when it moved one.
    Raises: ``OSError`` when the file cannot be read, copied or removed (a copy already made is
    kept); ``ValueError`` for a ``container_id`` that is not a CNI container ID.
    Source: Multus v4.3.0 ``CmdDel`` (a missing cache with the Pod alive is rebuilt; any other read
    failure skips every delegate); multus-cni #948, #1087.
    """
    if not is_container_id(container_id):
        raise ValueError(
            f"CNI_CONTAINERID {container_id!r} is not a container ID; its cache is not looked up"
        )
    path = os.path.join(cache_dir, container_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a directory or device by that name: not a cache file; Multus decides
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    problem = cache_problem(data)
    if problem is None:
        return None
    copy = _keep_copy(path, data, stamp)
    os.unlink(path)
    dir_fd = os.open(cache_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path, copy, problem


def _set_aside_before_del(conf: GuardConf, env: dict[str, str]) -> None:
    """Run :func:`set_aside_unreadable_cache` for this DEL and log what happened on stderr.

    Never raises: a DEL must reach Multus whatever this check meets.
    """
    container = env.get("CNI_CONTAINERID", "")
    try:
        moved = set_aside_unreadable_cache(
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


def _ask_daemon(conf: GuardConf, env: dict[str, str], stdin: bytes) -> tuple[int, str]:
    details = (
        "ADD is refused so that the Pod never starts without its managed networks; start the "
        "sriov-dra-guard DaemonSet on this node (DEL, CHECK, GC and STATUS do not need it)"
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
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(conf.timeout_s)
        try:
            sock.connect(conf.socket)
        except OSError as exc:
            msg = f"multus-guard: the guard daemon is not reachable at {conf.socket}: {exc}"
            return 1, cni_error(conf.cni_version, CniErrorCode.TRY_AGAIN, msg, details)
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


def _exec_multus(conf: GuardConf, env: dict[str, str]) -> int:
    """Replace this process with Multus, stdin replaced by the synthesized config (never returns)."""
    binary = multus_binary(conf, env.get("CNI_PATH", ""))
    if env.get("CNI_COMMAND") == "DEL":
        _set_aside_before_del(conf, env)
    config = json.dumps(multus_config(conf, teardown=True)).encode()
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
            code, out = _ask_daemon(conf, env, stdin)
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
