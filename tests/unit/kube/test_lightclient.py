"""``kube.lightclient``: the guard's API client without the ``kubernetes`` package (issue 17 item 3).

Reading credentials (which kubeconfig fields are used, which are refused with the field named),
the token file read again after its refresh period, the in-cluster service account, the HTTP
status answer translated into the same :mod:`kube.errors` classes as the kubernetes client's,
and the guard daemon's modules importing no part of the ``kubernetes`` package. Requests against
a real API server are in ``tests/cluster/kube/test_lightclient.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import certifi
import pytest
import yaml

from sriov_dra.kube import errors, lightclient


def kubeconfig(tmp_path: Path, *, user: dict[str, object], cluster: dict[str, object] | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": cluster or {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "field",
    ["exec", "auth-provider", "username", "as"],
)
def test_a_credential_the_client_cannot_use_is_refused_naming_the_field(tmp_path: Path, field: str) -> None:
    path = kubeconfig(tmp_path, user={field: {"command": "x"} if field == "exec" else "x"})
    with pytest.raises(
        ValueError, match=rf"kubeconfig {path}: context 'x' uses '{field}'.*client certificate"
    ):
        lightclient.LightClient.from_kubeconfig(path)


def test_a_proxy_url_is_refused(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path, user={"token": "t"}, cluster={"server": "https://h:1", "proxy-url": "http://p"}
    )
    with pytest.raises(ValueError, match="'proxy-url'"):
        lightclient.LightClient.from_kubeconfig(path)


def test_a_missing_context_or_server_names_the_file(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, user={"token": "t"})
    with pytest.raises(ValueError, match=rf"kubeconfig {path}: contexts has no entry named 'other'"):
        lightclient.LightClient.from_kubeconfig(path, context="other")
    path = kubeconfig(tmp_path, user={"token": "t"}, cluster={"insecure-skip-tls-verify": True})
    with pytest.raises(ValueError, match="has no server"):
        lightclient.LightClient.from_kubeconfig(path)
    doc = yaml.safe_load(path.read_text())
    del doc["current-context"]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="no current-context"):
        lightclient.LightClient.from_kubeconfig(path)


def test_a_ca_file_is_relative_to_the_kubeconfig_directory(tmp_path: Path) -> None:
    shutil.copy(certifi.where(), tmp_path / "ca.pem")
    path = kubeconfig(
        tmp_path, user={}, cluster={"server": "https://h:6443/", "certificate-authority": "ca.pem"}
    )
    assert lightclient.LightClient.from_kubeconfig(path).server == "https://h:6443"
    (tmp_path / "ca.pem").unlink()
    with pytest.raises(OSError):
        lightclient.LightClient.from_kubeconfig(path)


def test_a_token_file_is_read_again_after_the_refresh_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(lightclient.time, "monotonic", lambda: now[0])
    (tmp_path / "token").write_text("first\n")
    token = lightclient._Token(file=tmp_path / "token")
    assert token.current() == "first"
    (tmp_path / "token").write_text("second\n")
    now[0] += lightclient.TOKEN_REFRESH_S - 1
    assert token.current() == "first"
    now[0] += 1
    assert token.current() == "second"


def test_in_cluster_needs_the_service_host_and_reads_the_account(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not running in a Pod.*--kubeconfig"):
        lightclient.LightClient.in_cluster(account=tmp_path, env={})
    shutil.copy(certifi.where(), tmp_path / "ca.crt")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(OSError):  # no token file: fails at start, not at the first ADD
        lightclient.LightClient.in_cluster(account=tmp_path, env=env)
    (tmp_path / "token").write_text("sa-token\n")
    assert lightclient.LightClient.in_cluster(account=tmp_path, env=env).server == "https://[fd00::1]:443"


def status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "code": code, "reason": reason, "message": message}).encode()


@pytest.mark.parametrize(
    ("status", "cls"),
    [(404, errors.NotFound), (403, errors.Forbidden), (401, errors.Unauthorized), (503, errors.ServerError)],
)
def test_a_status_answer_becomes_the_same_error_class_as_through_the_kubernetes_client(
    status: int, cls: type[errors.ApiError]
) -> None:
    raw = errors.HttpStatusError(status, "R", status_body(status, "Why", "pods p is bad"), {})
    expected = r"^get pods ns/p: HTTP \d+ Why: pods p is bad$"
    with pytest.raises(cls, match=expected) as caught, errors.translated("get pods ns/p"):
        raise raw
    assert caught.value.status == status and caught.value.__cause__ is raw


def test_a_throttled_answer_keeps_its_retry_after() -> None:
    raw = errors.HttpStatusError(429, "Too Many Requests", b"", {"Retry-After": "3"})
    with pytest.raises(errors.Throttled) as caught, errors.translated("get pods ns/p"):
        raise raw
    assert caught.value.retry_after_s == 3.0


def test_the_guard_daemon_imports_no_part_of_the_kubernetes_package() -> None:
    probe = "import sys, sriov_dra.guard.main; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
