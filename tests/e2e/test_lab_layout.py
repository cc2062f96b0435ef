"""The lab keeps every component log in one place: ``<workdir>/logs`` (what README and the hints list)."""

from __future__ import annotations

from typing import Any


def test_every_component_log_is_under_the_workdir_logs(lab: Any) -> None:
    logs = lab.logs_dir
    assert logs == lab.workdir / "logs"
    expected = {
        logs / "operator.log",
        *(
            logs / "controlplane" / f"{c}.log"
            for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "audit")
        ),
        *(
            logs / n.name / f"{s}.log"
            for n in lab.nodes
            for s in ("apiproxy", "guard", "plugin", "gpu-plugin-synthetic")
        ),
    }
    assert {p for p in expected if not p.is_file()} == set()
    elsewhere = [
        p for p in lab.workdir.rglob("*.log") if logs not in p.parents and p.parent.name != "ansible"
    ]
    assert elsewhere == [], "component logs outside <workdir>/logs"
