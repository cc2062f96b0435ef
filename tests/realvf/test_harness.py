"""The realvf harness's own parsing, without a guest: results over the serial port, junit XML, ids."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.realvf import vm

JUNIT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.realvf.guest.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.realvf.guest.test_a" name="test_param[x]" time="0.1"/>
<testcase classname="tests.realvf.guest.test_a" name="test_param[y]" time="0.1">
<failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="tests.realvf.guest.test_b" name="test_skip" time="0"><skipped message="no igb"/></testcase>
</testsuite></testsuites>"""


def test_parse_junit_merges_parametrized_cases_and_keeps_failure_messages() -> None:
    got = vm.parse_junit(JUNIT)
    assert got["test_a.py::test_ok"] == vm.GuestResult("passed", "")
    assert got["test_a.py::test_param"].outcome == "failed"
    assert "test_param[y]: failure: assert 1 == 2\ntrace" in got["test_a.py::test_param"].message
    assert got["test_b.py::test_skip"].outcome == "skipped"
    assert set(got) == {"test_a.py::test_ok", "test_a.py::test_param", "test_b.py::test_skip"}


@given(st.binary(max_size=4096), st.sampled_from(["\n", "\r\n"]), st.text("x \n", max_size=20))
def test_results_survive_the_serial_line_discipline(payload: bytes, newline: str, noise: str) -> None:
    encoded = base64.encodebytes(payload).decode().replace("\n", newline)
    text = f"{noise}{vm.RESULTS_BEGIN}{newline}{encoded}{vm.RESULTS_END}{newline}"
    assert vm._decode_results(text) == payload


def test_results_without_the_end_marker_are_not_taken() -> None:
    assert vm._decode_results(f"{vm.RESULTS_BEGIN}\nAAAA\n") is None


def test_guest_test_ids_are_the_module_level_test_functions(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "def test_one():\n    pass\n\nclass TestNo:\n    def test_in(self): pass\n"
    )
    (tmp_path / "helpers.py").write_text("def test_not_a_test_file():\n    pass\n")
    assert vm.guest_test_ids(tmp_path) == ["test_x.py::test_one"]


def test_publishing_an_image_deletes_images_unused_for_days_and_keeps_recent_ones(tmp_path: Path) -> None:
    stale, recent, built = tmp_path / "runtime-old.sqfs", tmp_path / "runtime-new.sqfs", tmp_path / ".tmp"
    for path in (stale, recent, built):
        path.write_bytes(b"x")
    old = time.time() - vm.IMAGE_KEEP_S - 60
    os.utime(stale, (old, old))
    final = vm._publish(built, tmp_path / "runtime-built.sqfs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runtime-built.sqfs", "runtime-new.sqfs"]
    assert final.read_bytes() == b"x"


def test_the_guest_kubeconfig_embeds_its_credentials_and_names_the_api_server_by_a_name_the_guest_maps_to_the_host(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    import yaml
    from tests.realvf import kubeapi

    for name, body in (("ca.crt", b"CA"), ("c.crt", b"CERT"), ("c.key", b"KEY")):
        (tmp_path / name).write_bytes(body)
    client_config = {
        "users": [
            {"user": {"client-certificate": str(tmp_path / "c.crt"), "client-key": str(tmp_path / "c.key")}}
        ]
    }
    issued = tmp_path / "issued.kubeconfig"
    issued.write_text(yaml.safe_dump(client_config))
    cp = SimpleNamespace(
        server="https://127.0.0.1:41234", ca_cert=tmp_path / "ca.crt", client_kubeconfig=lambda *a: issued
    )
    doc = yaml.safe_load(kubeapi.guest_kubeconfig(cp, tmp_path / "guest").read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    assert cluster["server"] == f"https://{kubeapi.API_HOST}:41234"
    assert [base64.b64decode(v) for v in (cluster["certificate-authority-data"], *user.values())] == [
        b"CA",
        b"CERT",
        b"KEY",
    ]
    assert (tmp_path / "guest").stat().st_mode & 0o777 == 0o600
    script = vm.run_script(
        base=Path("/b"),
        venv=Path("/v"),
        repo=Path("/r"),
        pytest_args=[],
        kernel="k",
        api_host=kubeapi.API_HOST,
    )
    assert f'{vm.HOST_FROM_GUEST} {kubeapi.API_HOST}" >> /etc/hosts' in script
    assert "SRIOV_DRA_REALVF_KUBECONFIG=/r/.realvf-kube/kubeconfig" in script
    assert "/etc/hosts" not in vm.run_script(
        base=Path("/b"), venv=Path("/v"), repo=Path("/r"), pytest_args=[], kernel="k"
    )


def test_the_kubelet_proxy_tunnels_every_connect_to_the_forwarded_port() -> None:
    import socket
    import socketserver
    import threading

    from tests.realvf import kubelet_proxy

    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            while data := self.request.recv(4096):
                self.request.sendall(data.upper())

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo) as kubelet:
        kubelet.daemon_threads = True
        threading.Thread(target=kubelet.serve_forever, daemon=True).start()
        proxy = kubelet_proxy.KubeletProxy(kubelet.server_address[1])
        try:
            with socket.socket(socket.AF_UNIX) as apiserver:
                apiserver.settimeout(10)
                apiserver.connect(proxy.path)
                apiserver.sendall(b"CONNECT 10.0.2.15:10250 HTTP/1.1\r\nHost: 10.0.2.15:10250\r\n\r\nearly ")
                reply = b""
                while b"EARLY " not in reply:
                    reply += apiserver.recv(4096)
                assert reply.startswith(b"HTTP/1.1 200 "), reply
                apiserver.sendall(b"bytes")
                rest = b""
                while len(rest) < len(b"BYTES"):
                    rest += apiserver.recv(4096)
                assert rest == b"BYTES"
            with socket.socket(socket.AF_UNIX) as other:
                other.settimeout(10)
                other.connect(proxy.path)
                other.sendall(b"GET / HTTP/1.1\r\n\r\n")
                assert other.recv(4096).startswith(b"HTTP/1.1 405 ")
        finally:
            proxy.stop()
            kubelet.shutdown()
