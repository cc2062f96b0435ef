"""Cluster tier: ``sriov-dra orphans`` against a real apiserver (dry run by default, --apply narrow)."""

from __future__ import annotations

import io
import json

from kubernetes import client

from sriov_dra.cli import main as cli
from sriov_dra.cli import orphans as orphans_cli
from sriov_dra_rules import names

from .conftest import eventually, nads_in
from .test_auto_attach import start_pair_workload


def run(control_plane, plugin, *extra: str) -> tuple[int, str]:
    args = cli.build_parser().parse_args(
        [
            "orphans",
            "--node",
            plugin.node.name,
            "--checkpoint",
            str(plugin.store.path),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            *extra,
        ]
    )
    out = io.StringIO()
    return orphans_cli.run(args, out), out.getvalue()


def test_orphans_dry_run_classifies_and_apply_finalizes_only_release_complete(
    api, control_plane, plugin, namespace
):
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    lost = dict(nads_in(api, namespace)[0])
    lost["metadata"] = {
        "name": "dra-sriov-" + "d" * 32,
        "namespace": namespace,
        "labels": lost["metadata"]["labels"],
        "annotations": lost["metadata"]["annotations"],
        "finalizers": [names.FINALIZER_ATTACHMENT_PROTECTION, "example.com/audit"],
    }
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", lost
    )

    status, text = run(control_plane, plugin, "-o", "json")
    assert status == 0
    rows = {r["name"]: r for r in json.loads(text)}
    assert sorted(r["status"] for r in rows.values()) == ["Active", "Active", "Orphaned"]
    orphan = rows["dra-sriov-" + "d" * 32]
    assert orphan["foreign_finalizers"] == ["example.com/audit"] and orphan["action"].startswith("none")
    assert all(
        r["claim"].endswith("present") and r["pod"].endswith("present")
        for r in rows.values()
        if r["status"] == "Active"
    )

    # The kubelet released the host; only API work is left (e.g. the plugin is gone): ReleaseComplete.
    plugin.store.mark_managed_deleting(ref.uid)
    plugin.store.mark_managed_release_complete(ref.uid)
    status, text = run(control_plane, plugin)
    assert status == 0 and "ReleaseComplete" in text and "dry run" in text
    assert len(nads_in(api, namespace)) == 3  # the dry run wrote nothing
    status, text = run(control_plane, plugin, "--apply")
    assert status == 0 and text.count("applied:") == 2
    left = eventually("released shadows gone", lambda: (s := nads_in(api, namespace)) and len(s) == 1 and s)
    assert left[0]["metadata"]["name"] == "dra-sriov-" + "d" * 32
    assert left[0]["metadata"]["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION, "example.com/audit"]
    custom.patch_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        namespace,
        "network-attachment-definitions",
        "dra-sriov-" + "d" * 32,
        {"metadata": {"finalizers": None}},
    )


def test_an_unreadable_checkpoint_is_reported_without_a_traceback(control_plane, plugin, tmp_path, capsys):
    bad = tmp_path / "checkpoint.json"
    bad.write_text("{not json")
    args = cli.build_parser().parse_args(
        [
            "orphans",
            "--node",
            plugin.node.name,
            "--checkpoint",
            str(bad),
            "--kubeconfig",
            str(control_plane.kubeconfig),
        ]
    )
    assert orphans_cli.run(args, io.StringIO()) == 1
    assert "sriov-dra orphans:" in capsys.readouterr().err
