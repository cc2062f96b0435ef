"""The lab keeps every component log in one place: ``<workdir>/logs`` (what docs/lab.md and the hints list).

On real nodes the kubelet's and containerd's logs are there too; the roles' Pods log as Pods do (their
files under the node's ``/var/log/pods``, which is the node's own directory, not a lab log).
"""

from __future__ import annotations

from typing import Any


def _node_processes(lab: Any, node: Any) -> tuple[str, ...]:
    """The lab processes of ``node``: its own kubelet and containerd on a real node; the guard and the plugin
    where they are not their roles' DaemonSets (whose Pods log as Pods do, ``kubectl logs``)."""
    real = ("kubelet", "containerd") if node.real is not None else ()
    services = tuple(
        s
        for s, as_pod in (("guard", lab.guard_as_daemonset), ("plugin", lab.plugin_as_daemonset))
        if not as_pod
    )
    return ("apiproxy", "gpu-plugin-synthetic", *real, *services)


def test_every_component_log_is_under_the_workdir_logs(lab: Any) -> None:
    logs = lab.logs_dir
    assert logs == lab.workdir / "logs"
    expected = {
        *([] if lab.options.real_nodes else [logs / "operator.log"]),  # real nodes: the operator's Deployment
        *(
            logs / "controlplane" / f"{c}.log"
            for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "audit")
        ),
        *(logs / n.name / f"{s}.log" for n in lab.nodes for s in _node_processes(lab, n)),
    }
    assert {p for p in expected if not p.is_file()} == set()
    node_var_logs = [n.layout.host_dir("/var/log") for n in lab.nodes]  # the nodes' own /var/log (Pod logs)
    elsewhere = [
        p
        for p in lab.workdir.rglob("*.log")
        if logs not in p.parents
        and p.parent.name != "ansible"
        and not any(d in p.parents for d in node_var_logs)
    ]
    assert elsewhere == [], "component logs outside <workdir>/logs"
