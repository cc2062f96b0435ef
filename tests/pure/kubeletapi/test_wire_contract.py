"""Our protos match the published kubelet contract (Kubernetes 1.36) on the wire.

Expected values were written down from the upstream files, not derived from our protos:
k8s.io/kubelet v0.36.3 ``pkg/apis/dra/v1/api.proto``, ``pkg/apis/dra/v1beta1/api.proto``,
``pkg/apis/pluginregistration/v1/api.proto`` and ``pkg/apis/dra-health/v1alpha1/api.proto``.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from google.protobuf import descriptor

from sriov_dra.kubeletapi import (
    dra_v1_pb2,
    dra_v1beta1_pb2,
    drahealth_v1alpha1_pb2,
    endpoints,
    pluginregistration_v1_pb2,
)

# (module, proto package, service, full service name, methods)
SERVICES = [
    (
        dra_v1_pb2,
        "k8s.io.kubelet.pkg.apis.dra.v1",
        "DRAPlugin",
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
        {"NodePrepareResources": False, "NodeUnprepareResources": False},
    ),
    (
        dra_v1beta1_pb2,
        "k8s.io.kubelet.pkg.apis.dra.v1beta1",
        "DRAPlugin",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        {"NodePrepareResources": False, "NodeUnprepareResources": False},
    ),
    (
        pluginregistration_v1_pb2,
        "pluginregistration",
        "Registration",
        "pluginregistration.Registration",
        {"GetInfo": False, "NotifyRegistrationStatus": False},
    ),
    (
        drahealth_v1alpha1_pb2,
        "v1alpha1",
        "DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
        {"NodeWatchResources": True},
    ),
]
SERVICE_IDS = ["dra-v1", "dra-v1beta1", "pluginregistration-v1", "drahealth-v1alpha1"]

T = descriptor.FieldDescriptor
# (module, message, field, number, type, repeated)
FIELDS = [
    (dra_v1_pb2, "NodePrepareResourcesRequest", "claims", 1, T.TYPE_MESSAGE, True),
    (dra_v1_pb2, "NodePrepareResourcesResponse", "claims", 1, T.TYPE_MESSAGE, True),
    (dra_v1_pb2, "NodePrepareResourceResponse", "devices", 1, T.TYPE_MESSAGE, True),
    (dra_v1_pb2, "NodePrepareResourceResponse", "error", 2, T.TYPE_STRING, False),
    (dra_v1_pb2, "Device", "request_names", 1, T.TYPE_STRING, True),
    (dra_v1_pb2, "Device", "pool_name", 2, T.TYPE_STRING, False),
    (dra_v1_pb2, "Device", "device_name", 3, T.TYPE_STRING, False),
    (dra_v1_pb2, "Device", "cdi_device_ids", 4, T.TYPE_STRING, True),
    (dra_v1_pb2, "Device", "share_id", 5, T.TYPE_STRING, False),
    (dra_v1_pb2, "NodeUnprepareResourcesRequest", "claims", 1, T.TYPE_MESSAGE, True),
    (dra_v1_pb2, "NodeUnprepareResourcesResponse", "claims", 1, T.TYPE_MESSAGE, True),
    (dra_v1_pb2, "NodeUnprepareResourceResponse", "error", 1, T.TYPE_STRING, False),
    (dra_v1_pb2, "Claim", "namespace", 1, T.TYPE_STRING, False),
    (dra_v1_pb2, "Claim", "uid", 2, T.TYPE_STRING, False),
    (dra_v1_pb2, "Claim", "name", 3, T.TYPE_STRING, False),
    (dra_v1beta1_pb2, "NodePrepareResourceResponse", "error", 2, T.TYPE_STRING, False),
    (dra_v1beta1_pb2, "Device", "cdi_device_ids", 4, T.TYPE_STRING, True),
    (dra_v1beta1_pb2, "Claim", "uid", 2, T.TYPE_STRING, False),
    (dra_v1beta1_pb2, "Claim", "name", 3, T.TYPE_STRING, False),
    (pluginregistration_v1_pb2, "PluginInfo", "type", 1, T.TYPE_STRING, False),
    (pluginregistration_v1_pb2, "PluginInfo", "name", 2, T.TYPE_STRING, False),
    (pluginregistration_v1_pb2, "PluginInfo", "endpoint", 3, T.TYPE_STRING, False),
    (pluginregistration_v1_pb2, "PluginInfo", "supported_versions", 4, T.TYPE_STRING, True),
    (pluginregistration_v1_pb2, "RegistrationStatus", "plugin_registered", 1, T.TYPE_BOOL, False),
    (pluginregistration_v1_pb2, "RegistrationStatus", "error", 2, T.TYPE_STRING, False),
    (drahealth_v1alpha1_pb2, "DeviceIdentifier", "pool_name", 1, T.TYPE_STRING, False),
    (drahealth_v1alpha1_pb2, "DeviceIdentifier", "device_name", 2, T.TYPE_STRING, False),
    (drahealth_v1alpha1_pb2, "DeviceHealth", "device", 1, T.TYPE_MESSAGE, False),
    (drahealth_v1alpha1_pb2, "DeviceHealth", "health", 2, T.TYPE_ENUM, False),
    (drahealth_v1alpha1_pb2, "DeviceHealth", "last_updated_time", 3, T.TYPE_INT64, False),
    (drahealth_v1alpha1_pb2, "DeviceHealth", "health_check_timeout_seconds", 4, T.TYPE_INT64, False),
    (drahealth_v1alpha1_pb2, "DeviceHealth", "message", 5, T.TYPE_STRING, False),
    (drahealth_v1alpha1_pb2, "NodeWatchResourcesResponse", "devices", 1, T.TYPE_MESSAGE, True),
]
FIELD_IDS = [f"{m.__name__.rsplit('.', 1)[1]}-{msg}.{name}" for m, msg, name, *_ in FIELDS]


@pytest.mark.parametrize(("module", "package", "service", "full_name", "methods"), SERVICES, ids=SERVICE_IDS)
def test_service_full_name_and_methods_match_published_contract(
    module: ModuleType, package: str, service: str, full_name: str, methods: dict[str, bool]
) -> None:
    assert module.DESCRIPTOR.package == package
    svc = module.DESCRIPTOR.services_by_name[service]
    assert svc.full_name == full_name
    got = {m.name: (m.server_streaming, m.client_streaming) for m in svc.methods}
    assert got == {name: (streaming, False) for name, streaming in methods.items()}


@pytest.mark.parametrize(("module", "message", "field", "number", "ftype", "repeated"), FIELDS, ids=FIELD_IDS)
def test_field_number_and_type_match_published_contract(
    module: ModuleType, message: str, field: str, number: int, ftype: int, repeated: bool
) -> None:
    fd = module.DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
    assert (fd.number, fd.type, fd.is_repeated) == (number, ftype, repeated)


@pytest.mark.parametrize(
    ("module", "message", "expected"),
    [
        (dra_v1_pb2, "Device", {"request_names", "pool_name", "device_name", "cdi_device_ids", "share_id"}),
        (dra_v1beta1_pb2, "Device", {"request_names", "pool_name", "device_name", "cdi_device_ids"}),
        (dra_v1_pb2, "Claim", {"namespace", "uid", "name"}),
        (pluginregistration_v1_pb2, "RegistrationStatusResponse", set()),
        (pluginregistration_v1_pb2, "InfoRequest", set()),
        (drahealth_v1alpha1_pb2, "NodeWatchResourcesRequest", set()),
    ],
    ids=[
        "v1-device-has-share-id",
        "v1beta1-device-has-no-share-id",
        "claim-fields",
        "status-response-empty",
        "info-request-empty",
        "watch-request-empty",
    ],
)
def test_message_has_exactly_the_published_fields(
    module: ModuleType, message: str, expected: set[str]
) -> None:
    assert set(module.DESCRIPTOR.message_types_by_name[message].fields_by_name) == expected


def test_v1_share_id_is_proto3_optional_with_presence() -> None:
    fd = dra_v1_pb2.Device.DESCRIPTOR.fields_by_name["share_id"]
    assert fd.has_presence
    assert not dra_v1_pb2.Device().HasField("share_id")
    assert dra_v1_pb2.Device(share_id="").HasField("share_id")


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (dra_v1_pb2, "NodePrepareResourcesResponse"),
        (dra_v1_pb2, "NodeUnprepareResourcesResponse"),
        (dra_v1beta1_pb2, "NodePrepareResourcesResponse"),
        (dra_v1beta1_pb2, "NodeUnprepareResourcesResponse"),
    ],
    ids=["v1-prepare", "v1-unprepare", "v1beta1-prepare", "v1beta1-unprepare"],
)
def test_response_claims_is_a_map_keyed_by_string(module: ModuleType, message: str) -> None:
    entry = module.DESCRIPTOR.message_types_by_name[message].fields_by_name["claims"].message_type
    assert entry.GetOptions().map_entry
    assert entry.fields_by_name["key"].type == T.TYPE_STRING


def test_health_status_enum_values() -> None:
    values = {
        v.name: v.number for v in drahealth_v1alpha1_pb2.DESCRIPTOR.enum_types_by_name["HealthStatus"].values
    }
    assert values == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}


@pytest.mark.parametrize(
    ("constant", "module", "service"),
    [
        (endpoints.DRA_V1_FULL_NAME, dra_v1_pb2, "DRAPlugin"),
        (endpoints.DRA_V1BETA1_FULL_NAME, dra_v1beta1_pb2, "DRAPlugin"),
        (endpoints.REGISTRATION_FULL_NAME, pluginregistration_v1_pb2, "Registration"),
        (endpoints.HEALTH_FULL_NAME, drahealth_v1alpha1_pb2, "DRAResourceHealth"),
    ],
    ids=["dra-v1", "dra-v1beta1", "registration", "health"],
)
def test_endpoint_constants_name_the_generated_services(
    constant: str, module: ModuleType, service: str
) -> None:
    assert module.DESCRIPTOR.services_by_name[service].full_name == constant


def test_registration_strings_are_service_names_not_bare_versions() -> None:
    assert endpoints.DRA_SUPPORTED_VERSIONS == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    assert endpoints.HEALTH_SERVICE == "v1alpha1.DRAResourceHealth"
    assert endpoints.PLUGIN_TYPE_DRA == "DRAPlugin"
