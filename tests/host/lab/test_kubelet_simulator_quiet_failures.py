"""The kubelet simulator's own logging on the way down: an API server gone first logs one line.

A unit test of the simulator itself, which stays for ``--node-kind simulated`` and ``bench/scale.py``
(31 simulated nodes: 32 real kubelets do not fit on 2 cores); no kubelet behaviour is judged by it.
"""

from __future__ import annotations

from sriov_dra.kube import errors
from sriov_dra_lab import kubelet_sim


def test_api_server_unreachable_is_a_quiet_sync_failure() -> None:
    gone = errors.ServerError("GET /api/v1/pods: connection refused", status=0)
    assert kubelet_sim.quiet_failure(gone, stopping=False)


def test_any_failure_while_the_simulator_stops_is_quiet() -> None:
    assert kubelet_sim.quiet_failure(RuntimeError("plugin socket closed"), stopping=True)


def test_unexpected_failure_of_a_running_simulator_keeps_its_traceback() -> None:
    assert not kubelet_sim.quiet_failure(RuntimeError("bug"), stopping=False)
    assert not kubelet_sim.quiet_failure(
        errors.ServerError("500 from the apiserver", status=500), stopping=False
    )
