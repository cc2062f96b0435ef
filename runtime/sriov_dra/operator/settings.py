"""The operator's settings: one frozen dataclass per concern, each field with its unit and default reason.

Built once by the entrypoint from flags and environment variables; read everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sriov_dra.core.operator import node_policy, sriov_network
from sriov_dra.servicekit import logs


@dataclass(frozen=True)
class ReconcileSettings:
    """What the controllers generate and where."""

    namespace: str
    """Operator namespace: node policies are read here and every generated DeviceAttributes and
    SriovResourcePolicy is written here (it must equal the plugin's policy namespace)."""
    resource_prefix: str = sriov_network.DEFAULT_RESOURCE_PREFIX
    """``RESOURCE_PREFIX`` of the legacy NAD annotation and the compatibility resourceName
    attribute; ``openshift.io`` is upstream's Helm default."""
    dra_enabled: bool = True
    """With the DRA provider disabled nothing is generated and DRA policies report DRAInactive."""
    nic_ids: tuple[node_policy.NicId, ...] = ()
    """Supported-NIC table (PF → VF device IDs) used to translate ``nicSelector.deviceID``."""
    resync_period_s: float = 300.0
    """Full reconciliation of every network and of the DRA plan, in seconds, as missed-event
    recovery; upstream's node-policy controller uses the same 5 minutes."""
    field_manager: str = "sriov-dra-operator"
    """Field manager of every write (visible in managedFields)."""


@dataclass(frozen=True)
class RetrySettings:
    """Backoff of a failed reconcile key (seconds)."""

    initial_s: float = 0.5
    """First retry after a failure; short so transient conflicts clear quickly."""
    max_s: float = 60.0
    """Cap of the exponential backoff; a permanent failure retries once a minute."""


@dataclass(frozen=True)
class LeaderSettings:
    """Single active replica through a Lease (client-go default timings)."""

    enabled: bool = True
    """Disable only for a single-replica test run."""
    lease_name: str = "sriov-dra-operator"
    lease_namespace: str = ""
    """Empty means the operator namespace."""
    identity: str = ""
    """Candidate identity; empty means ``<hostname>_<pid>``."""
    lease_duration_s: int = 15
    renew_deadline_s: int = 10
    retry_period_s: int = 2


@dataclass(frozen=True)
class ServeSettings:
    """The HTTP endpoint for ``/metrics``, ``/healthz`` and ``/readyz``."""

    metrics_address: str = "0.0.0.0:8080"
    """``host:port``; empty disables the endpoint. Port 8080 inside the Pod network (the operator
    is not host-networked)."""
    log_format: logs.LogFormat = logs.LogFormat.TEXT
    log_level: str = "INFO"


@dataclass(frozen=True)
class OperatorSettings:
    """Everything ``python -m sriov_dra.operator`` was started with."""

    reconcile: ReconcileSettings
    retry: RetrySettings = field(default_factory=RetrySettings)
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)
    kubeconfig: str = ""
    """Path of a kubeconfig; empty means the in-cluster service account."""
