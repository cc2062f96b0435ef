"""``sriov-dra`` turns ordinary mistakes into one actionable line and an exit status, not a traceback.

Against the session control plane: a Pod name that exists only in another namespace is reported
with the ``-n`` that would find it; a missing kubeconfig names the flag and variable to set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_dra.cli import main


def _pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )


def test_inspect_of_a_pod_in_another_namespace_names_the_namespace_that_has_it(
    control_plane: Any, api: client.ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client.CoreV1Api(api).create_namespaced_pod(namespace, _pod("only-here"))

    status = main.main(
        ["inspect", "only-here", "-n", "default", "--kubeconfig", str(control_plane.kubeconfig)]
    )

    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == f"sriov-dra inspect: pod default/only-here not found; it exists in: -n {namespace}"


def test_inspect_of_a_pod_that_exists_nowhere_is_one_line(
    control_plane: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main.main(
        ["inspect", "nowhere-pod", "-n", "default", "--kubeconfig", str(control_plane.kubeconfig)]
    )

    assert status == 2
    assert capsys.readouterr().err.strip() == "sriov-dra inspect: pod default/nowhere-pod not found"


def test_missing_kubeconfig_names_the_flag_and_variable_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main.main(["inspect", "p", "--kubeconfig", str(tmp_path / "absent")])

    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("sriov-dra: no usable kubeconfig (")
    assert err.rstrip().endswith("pass --kubeconfig FILE or set KUBECONFIG")
    assert "Traceback" not in err
