"""Names, paths and timeouts of the kubelet plugin protocols (Kubernetes 1.36).

Every wire string the kubelet and a DRA plugin must agree on outside the messages: gRPC service
names, registration ``supported_versions``, the plugin type, the conventional socket locations
and the kubelet's call deadlines (kubelet v1.36, k8s.io/dynamic-resource-allocation
``kubeletplugin`` v0.36). The plugin server and the lab's kubelet simulator both read them here.
Pure values and path arithmetic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

PLUGIN_TYPE_DRA = "DRAPlugin"
"""``PluginInfo.type`` of a DRA plugin (Go const ``DRAPlugin`` in pluginregistration v1)."""


class DraService(enum.StrEnum):
    """DRA node services, as listed in ``PluginInfo.supported_versions``.

    The values are the registration strings (``<version>.DRAPlugin``), not bare versions: a
    1.36 kubelet rejects ``"v1beta1"``. Declared in the kubelet's order of preference.
    """

    V1 = "v1.DRAPlugin"
    V1BETA1 = "v1beta1.DRAPlugin"


HEALTH_SERVICE = "v1alpha1.DRAResourceHealth"
"""Registration string of the device health stream; advertised only when it is served."""

DRA_SUPPORTED_VERSIONS: tuple[str, ...] = (DraService.V1.value, DraService.V1BETA1.value)
"""What a plugin serving both DRA versions advertises, v1 first so the kubelet picks it."""

# Fully qualified gRPC service names: the wire paths are "/<full name>/<method>".
DRA_V1_FULL_NAME = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
DRA_V1BETA1_FULL_NAME = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
REGISTRATION_FULL_NAME = "pluginregistration.Registration"
HEALTH_FULL_NAME = "v1alpha1.DRAResourceHealth"

KUBELET_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
"""Parent of each driver's data directory (``<dir>/<driver>/dra.sock``)."""
KUBELET_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")
"""Directory the kubelet's plugin watcher scans for registration sockets."""
DRA_SOCKET_NAME = "dra.sock"

PREPARE_CALL_TIMEOUT_S = 45.0
"""Deadline of each NodePrepare/NodeUnprepare call (kubelet ``defaultClientCallTimeout``)."""
REGISTRATION_DIAL_TIMEOUT_S = 10.0
"""How long the kubelet waits to connect to a new registration socket."""
GET_INFO_TIMEOUT_S = 1.0
"""Deadline of the kubelet's ``GetInfo`` call during registration."""
NOTIFY_TIMEOUT_S = 5.0
"""Deadline of the kubelet's ``NotifyRegistrationStatus`` call."""
HEALTH_DEFAULT_TIMEOUT_S = 30.0
"""A device not reported for this long turns Unknown at the kubelet (``DefaultHealthTimeout``)."""

UNIX_PATH_MAX_BYTES = 107
"""Longest usable unix socket path: ``sun_path`` is 108 bytes including the terminating NUL."""


@dataclass(frozen=True)
class PluginSockets:
    """The two sockets of one plugin instance.

    Shapes: ``dra`` is the DRA service socket (also serving the health stream), advertised as
    ``PluginInfo.endpoint``; ``registration`` is the socket in the kubelet's registry directory.
    Both are absolute, because the kubelet dials the endpoint string as given.
    """

    dra: Path
    registration: Path


def plugin_sockets(
    driver_name: str,
    *,
    plugins_dir: Path = KUBELET_PLUGINS_DIR,
    registry_dir: Path = KUBELET_REGISTRY_DIR,
    instance: str = "",
) -> PluginSockets:
    """Conventional socket paths for ``driver_name``, as the Go ``kubeletplugin`` helper lays them out.

    Without ``instance``: ``<plugins_dir>/<driver>/dra.sock`` and ``<registry_dir>/<driver>-reg.sock``.
    With ``instance`` (a pod UID, for rolling updates): ``dra-<instance>.sock`` and
    ``<driver>-<instance>-reg.sock``.

    Raises: ``ValueError`` if the driver name is empty or contains a path separator, a directory is
    relative, or a path exceeds :data:`UNIX_PATH_MAX_BYTES`.
    Source: dynamic-resource-allocation v0.36.2 ``kubeletplugin/draplugin.go`` ``Start()``.
    """
    if not driver_name or "/" in driver_name or driver_name.startswith("."):
        raise ValueError(
            f"driver name {driver_name!r} cannot name a socket: use a DNS subdomain such as "
            "'sriovnetwork.k8snetworkplumbingwg.io'"
        )
    for label, directory in (("plugins_dir", plugins_dir), ("registry_dir", registry_dir)):
        if not directory.is_absolute():
            raise ValueError(
                f"{label} {str(directory)!r} is relative; the kubelet dials the advertised path "
                "as-is, so pass an absolute directory"
            )
    suffix = f"-{instance}" if instance else ""
    sockets = PluginSockets(
        dra=plugins_dir / driver_name / f"dra{suffix}.sock",
        registration=registry_dir / f"{driver_name}{suffix}-reg.sock",
    )
    for path in (sockets.dra, sockets.registration):
        if len(str(path).encode()) > UNIX_PATH_MAX_BYTES:
            raise ValueError(
                f"socket path {str(path)!r} is {len(str(path).encode())} bytes, longer than the "
                f"unix limit of {UNIX_PATH_MAX_BYTES}; choose shorter directories"
            )
    return sockets


INSTANCE_NAME_LENGTH = 16
"""Characters of a Pod UID kept in per-instance socket names (:func:`instance_name`)."""


def instance_name(pod_uid: str) -> str:
    """The part of a Pod UID per-instance socket names carry: its first 16 letters and digits.

    A full UID makes the registration socket ``/var/lib/kubelet/plugins_registry/<driver>-<uid>-reg.sock``
    116 bytes for this driver, past the unix limit; 16 hex digits of a random UID keep 60 random
    bits, enough to tell apart the two instances a rolling update runs on one node.
    Shapes: ``"93b0302e-be73-4fb5-b413-b3014714d9eb"`` → ``"93b0302ebe734fb5"``.
    """
    return "".join(c for c in pod_uid if c.isalnum())[:INSTANCE_NAME_LENGTH]


def grpc_target(socket_path: Path) -> str:
    """gRPC target string for a unix socket, as the kubelet dials it (``unix:<path>``).

    Shapes: ``Path("/var/lib/kubelet/plugins/x/dra.sock")`` → ``"unix:/var/lib/kubelet/plugins/x/dra.sock"``.
    """
    return f"unix:{socket_path}"
