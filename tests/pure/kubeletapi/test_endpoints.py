"""Conventional kubelet plugin socket paths (``sriov_dra.kubeletapi.endpoints``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.kubeletapi import endpoints

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"


def test_default_paths_are_the_kubelet_conventions() -> None:
    sockets = endpoints.plugin_sockets(DRIVER)
    assert sockets.dra == Path(f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock")
    assert sockets.registration == Path(f"/var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock")


POD_UID = "0f0e2b1c-6a35-4c2d-9a57-6cbbf1f7d1aa"


def test_instance_suffix_gives_rolling_update_names() -> None:
    sockets = endpoints.plugin_sockets("x.example.com", instance=POD_UID)
    assert sockets.dra.name == f"dra-{POD_UID}.sock"
    assert sockets.registration.name == f"x.example.com-{POD_UID}-reg.sock"


def test_our_driver_name_with_a_pod_uid_exceeds_sun_path_in_the_default_registry() -> None:
    # /var/lib/kubelet/plugins_registry/<36-char driver>-<36-char uid>-reg.sock is 116 bytes:
    # per-instance (rolling update) socket names cannot be used with this driver name there.
    with pytest.raises(ValueError, match="is 116 bytes, longer than the unix limit of 107"):
        endpoints.plugin_sockets(DRIVER, instance=POD_UID)


def test_directories_are_configurable(tmp_path: Path) -> None:
    sockets = endpoints.plugin_sockets(
        "x.example.com", plugins_dir=tmp_path / "p", registry_dir=tmp_path / "r"
    )
    assert sockets == endpoints.PluginSockets(
        dra=tmp_path / "p" / "x.example.com" / "dra.sock",
        registration=tmp_path / "r" / "x.example.com-reg.sock",
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"driver_name": ""}, "cannot name a socket"),
        ({"driver_name": "a/b"}, "cannot name a socket"),
        ({"driver_name": ".hidden"}, "cannot name a socket"),
        ({"driver_name": DRIVER, "plugins_dir": Path("relative")}, "plugins_dir 'relative' is relative"),
        ({"driver_name": DRIVER, "registry_dir": Path("relative")}, "registry_dir 'relative' is relative"),
        ({"driver_name": DRIVER, "plugins_dir": Path("/" + "d" * 80)}, "longer than the unix limit of 107"),
    ],
    ids=[
        "empty-driver",
        "driver-with-slash",
        "hidden-driver-name-ignored-by-watcher",
        "relative-plugins-dir",
        "relative-registry-dir",
        "path-over-sun-path-limit",
    ],
)
def test_invalid_inputs_are_rejected_with_the_fix(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        endpoints.plugin_sockets(**kwargs)  # type: ignore[arg-type]


def test_grpc_target_is_unix_scheme_with_the_path() -> None:
    assert endpoints.grpc_target(Path("/run/x/dra.sock")) == "unix:/run/x/dra.sock"
