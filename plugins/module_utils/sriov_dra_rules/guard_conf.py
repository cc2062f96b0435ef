# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The guard plugin's CNI config: its keys, their defaults and the one parser of them.

The runtime hands the ``multus-guard`` shim its entry of ``00-multus-guard.conflist`` on stdin,
flattened as libcni does it. :func:`parse_conf` is the one reading of that object, run by the
shim on the node (installed with this package beside it), by the guard daemon on the forwarded
request, and through :func:`check_entry` by the install contract (``cni_install``). The keys and
their meaning: docs/guard.md ("Keys of the guard's plugin config"). Standard library and
siblings only, by relative import (this directory is two packages; see ``__init__``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from . import errors, names, strict_json

DEFAULT_SOCKET: Final = "/run/sriov-dra/multus-guard.sock"
"""The guard daemon's unix socket unless ``guard.socket`` says otherwise."""
DEFAULT_TIMEOUT_S: Final = 180.0
"""How long the shim waits for the daemon's answer; above the daemon's ADD budget (110 s)."""
MAX_TIMEOUT_S: Final = 3600.0
"""The longest ``guard.timeoutSeconds`` accepted: an hour (a CNI ADD waiting longer is a fault)."""
DEFAULT_PLUGIN_CHECKPOINT: Final = f"/var/lib/kubelet/plugins/{names.DRIVER_NAME}/checkpoint.json"
"""The plugin's checkpoint at its default ``--state-dir`` (its durable ``checkpoint.slots`` beside it)."""
DEFAULT_DAEMON_SOCKET_DIR: Final = "/run/multus/"
DEFAULT_THIN_KUBECONFIG: Final = "/etc/cni/net.d/multus.d/multus.kubeconfig"
MODES: Final = ("thick", "thin")
"""``multus.mode``: ``multus-shim`` to a running ``multus-daemon``, or the ``multus`` binary."""
RESERVED_MULTUS_KEYS: Final = frozenset(
    {"type", "name", "cniVersion", "delegates", "clusterNetwork", "kubeconfig", "daemonSocketDir"}
    | {"runtimeConfig", "capabilities", "args", "prevResult"}
)
"""Keys of ``multus.config`` the guard always sets itself (refused there)."""
TEXT_KEYS: Final = (
    ("guard", "socket"),
    ("guard", "pluginCheckpoint"),
    ("multus", "binary"),
    ("multus", "clusterNetwork"),
    ("multus", "daemonSocketDir"),
    ("multus", "kubeconfig"),
    ("multus", "daemonConfigFile"),
)
"""Optional keys of the guard's entry that, when present (not ``null``), must be non-empty strings."""


class GuardConfError(ValueError):
    """The guard's CNI config is malformed.

    Shapes: ``key`` the dotted key (``multus.mode``, ``guard``, ``cniVersion``) or ``""`` for the
    whole text; ``problem`` what is wrong with it and the fix (``must be "thick" or "thin", got
    'fat'``). ``str()`` is ``config key <key> <problem>`` (the shim's message).
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"config key {key} {problem}" if key else problem)
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class GuardConf:
    """The guard plugin's config, as the runtime passes it on stdin.

    Shapes: ``mode`` is ``"thick"`` (``multus-shim`` to a running ``multus-daemon``) or ``"thin"``
    (the ``multus`` binary); ``primary_config`` the pinned primary network's config file, inlined
    as ``delegates[0]``; ``cluster_network``, when set, is given to Multus as ``clusterNetwork``
    instead (a path or NAD name as Multus resolves it); ``extra`` more Multus NetConf keys copied
    into the synthesized config. ``plugin_checkpoint`` is the plugin's ``checkpoint.json`` the
    shim reads to tell a Pod with managed bindings from an ordinary one;
    ``verify_ordinary_selections`` sends every ADD to the daemon and verifies ordinary selections
    after Multus too (docs/design.md#guard). ``raw`` is the whole decoded stdin object.
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
    plugin_checkpoint: str = DEFAULT_PLUGIN_CHECKPOINT
    verify_ordinary_selections: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def multus_name(self) -> str:
        """The Multus executable looked for on ``CNI_PATH``: ``multus-shim`` (thick) or ``multus`` (thin)."""
        return "multus-shim" if self.mode == "thick" else "multus"


def _section(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise GuardConfError(key, f"must be an object, got {strict_json.kind(value)}")
    return value


def _root_text(entry: Mapping[str, Any], key: str, fix: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise GuardConfError(key, f"must be a non-empty string, got {value!r}{fix}")
    return value


def _short(value: object) -> str:
    """``repr(value)``, cut to 40 characters (a 400-digit number stays readable in a message)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def check_entry(entry: Mapping[str, Any]) -> dict[str, str | None]:
    """Check the guard's flattened entry; return its string-valued keys.

    Shapes: ``entry`` is the decoded object the runtime passes (``cniVersion``, ``name``,
    ``guard``, ``multus``, ...); the result maps ``"cniVersion"``, ``"name"``, ``"mode"``,
    ``"primaryConfig"`` and each ``"<section>.<key>"`` of :data:`TEXT_KEYS` to its string, or to
    ``None`` for an absent optional key.
    Raises: :class:`GuardConfError` naming the first wrong key: ``cniVersion`` or ``name`` not a
    non-empty string, ``guard``/``multus``/``multus.config`` not an object, an unknown
    ``multus.mode``, a missing ``multus.primaryConfig``, an optional key that is not a non-empty
    string, a ``guard.verifyOrdinarySelections`` that is not a boolean, a non-positive (or boolean)
    ``guard.timeoutSeconds``, or a reserved key in
    ``multus.config``.
    Source: docs/guard.md ("Keys of the guard's plugin config").
    """
    out: dict[str, str | None] = {
        "cniVersion": _root_text(entry, "cniVersion", " (use the primary's version)"),
        "name": _root_text(entry, "name", ""),
    }
    sections = {"guard": _section(entry, "guard"), "multus": _section(entry, "multus")}
    mode = sections["multus"].get("mode")
    if mode not in MODES:
        raise GuardConfError("multus.mode", f'must be "thick" or "thin", got {mode!r}')
    out["mode"] = mode
    primary = sections["multus"].get("primaryConfig")
    if primary is None:
        raise GuardConfError("multus.primaryConfig", "is required: the pinned primary network's file")
    if not isinstance(primary, str) or not primary:
        raise GuardConfError(
            "multus.primaryConfig", f"must be the pinned primary network's file, got {primary!r}"
        )
    out["multus.primaryConfig"] = primary
    for section, key in TEXT_KEYS:
        value = sections[section].get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise GuardConfError(
                f"{section}.{key}", f"must be a non-empty string, got {value!r}; remove it to use the default"
            )
        out[f"{section}.{key}"] = value
    verify = sections["guard"].get("verifyOrdinarySelections", False)
    if not isinstance(verify, bool):
        raise GuardConfError(
            "guard.verifyOrdinarySelections", f"must be true or false, got {strict_json.kind(verify)}"
        )
    timeout = sections["guard"].get("timeoutSeconds", DEFAULT_TIMEOUT_S)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT_S  # also keeps float() and socket.settimeout from overflowing
    ):
        raise GuardConfError(
            "guard.timeoutSeconds",
            f"must be a positive number of seconds up to {MAX_TIMEOUT_S:g}, got {_short(timeout)}",
        )
    extra = sections["multus"].get("config", {})
    if not isinstance(extra, dict):
        raise GuardConfError("multus.config", f"must be an object, got {strict_json.kind(extra)}")
    reserved = sorted(RESERVED_MULTUS_KEYS.intersection(extra))
    if reserved:
        raise GuardConfError("multus.config", f"must not set {reserved}; the guard sets these keys itself")
    return out


def parse_conf(stdin: bytes) -> GuardConf:
    """Decode and validate the guard's stdin config (:func:`check_entry`).

    Raises: :class:`GuardConfError` with ``key`` ``""`` when stdin is not strict JSON (UTF-8,
    no repeated key, no NaN, not nested too deeply; the problems are named with their paths) or
    not an object, else as :func:`check_entry`.
    """
    try:
        obj = strict_json.decode_plain(stdin.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise GuardConfError("", f"the CNI config on stdin is not JSON: not UTF-8 text ({exc})") from None
    except errors.InvalidSpec as exc:
        found = "; ".join(str(e) for e in exc.errors)
        raise GuardConfError("", f"the CNI config on stdin is not JSON: {found}") from None
    if not isinstance(obj, dict):
        raise GuardConfError("", "the CNI config on stdin must be a JSON object")
    keys = check_entry(obj)
    guard, multus = obj.get("guard", {}), obj.get("multus", {})
    return GuardConf(
        cni_version=str(keys["cniVersion"]),
        name=str(keys["name"]),
        mode=str(keys["mode"]),
        primary_config=str(keys["multus.primaryConfig"]),
        socket=keys["guard.socket"] or DEFAULT_SOCKET,
        timeout_s=float(guard.get("timeoutSeconds", DEFAULT_TIMEOUT_S)),
        binary=keys["multus.binary"],
        cluster_network=keys["multus.clusterNetwork"],
        daemon_socket_dir=keys["multus.daemonSocketDir"] or DEFAULT_DAEMON_SOCKET_DIR,
        kubeconfig=keys["multus.kubeconfig"] or DEFAULT_THIN_KUBECONFIG,
        daemon_config_file=keys["multus.daemonConfigFile"],
        plugin_checkpoint=keys["guard.pluginCheckpoint"] or DEFAULT_PLUGIN_CHECKPOINT,
        verify_ordinary_selections=guard.get("verifyOrdinarySelections", False),
        extra=dict(multus.get("config", {})),
        raw=obj,
    )
