"""Tests for sriov_dra.guard.cni_hooks: the ADD decision with every dependency faked."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import guard_fakes as gf
from tests.fakes import managed_pods as mp

from sriov_dra.core import metadata_document as md
from sriov_dra.guard import cni_hooks, decisions, metrics, multus, settings, shim
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import names

R = decisions.Reason
NS, POD = "ai-workloads", "trainer"
NETNS = "/var/run/netns/sandbox-1"
UIDS = ("d0d0d0d0-0000-4000-8000-00000000000a", "d0d0d0d0-0000-4000-8000-00000000000b")
IPS = ("192.0.2.5", "198.51.100.7")
ARGS = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME={POD};K8S_POD_INFRA_CONTAINER_ID=c1"


class World:
    """A managed Pod with two shadows, the fakes around the hooks, and the request to send."""

    def __init__(self, tmp_path: Path, metadata: gf.FakeMetadataFiles | None = None, **setting: Any) -> None:
        self.clock = gf.FakeClock()
        self.api = gf.FakeApi(self.clock)
        self.runner = gf.FakeRunner(self.clock, effect=self._multus_effect)
        self.netns = gf.FakeNetns({NETNS: [gf.FakeLink("lo")]})
        self.metrics = metrics.GuardMetrics()
        self.settings = settings.GuardSettings(**setting)
        self.hooks = cni_hooks.CniHooks(
            settings=self.settings,
            get_pod=self.api.get_pod,
            get_nad=self.api.get_nad,
            runner=self.runner,
            netns_links=self.netns,
            clock=self.clock,
            recorder=self.metrics,
            metadata=metadata,
        )
        primary = tmp_path / "10-primary.conflist"
        primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "p", "plugins": [{"type": "macvlan"}]}))
        self.stdin = json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "multus-cni-network",
                "type": "multus-guard",
                "multus": {"mode": "thin", "primaryConfig": str(primary), "kubeconfig": "/k"},
            }
        ).encode()
        self.plans = [
            mp.plan_shadow(
                pod_namespace=NS,
                pod_name=POD,
                pod_uid=mp.POD_UID,
                source=mp.source_nad(NS, f"rail-{c}-net", mp.host_local_template(f"rail-{c}", subnet)),
                pci=pci,
                interface=f"dra{i}",
                device=f"vf-{i}",
            )
            for i, (c, subnet, pci) in enumerate(
                (("a", "192.0.2.0/24", "0000:03:00.1"), ("b", "198.51.100.0/24", "0000:80:00.1"))
            )
        ]
        self.entries = [mp.registry_entry(p, u) for p, u in zip(self.plans, UIDS, strict=True)]
        for plan, uid in zip(self.plans, UIDS, strict=True):
            self.api.put("network-attachment-definitions", mp.with_uid(plan.nad, uid))
        self.annotations = mp.managed_annotations(mp.POD_UID, self.entries)
        self.api.put("pods", mp.pod(NS, POD, annotations=self.annotations))
        self.attach = True  # whether the fake Multus creates the managed interfaces
        self.ordinary: list[tuple[str, str]] = []  # (network, interface) it creates for ordinary NADs

    def _multus_effect(self, command: str) -> None:
        if command == "ADD":
            self.netns.links[NETNS].append(gf.FakeLink("eth0"))
            status = [{"name": "p", "interface": "eth0", "default": True}]
            if self.attach:
                self.netns.links[NETNS] += [
                    gf.FakeLink(f"dra{i}", mac=f"02:00:00:00:00:0{i}", addresses=(f"{ip}/24", "fe80::1/64"))
                    for i, ip in enumerate(IPS)
                ]
                status += [
                    {"name": f"{NS}/{p.name}", "interface": p.interface, "ips": [ip]}
                    for p, ip in zip(self.plans, IPS, strict=True)
                ]
            self.netns.links[NETNS] += [gf.FakeLink(ifname) for _, ifname in self.ordinary]
            status += [{"name": network, "interface": ifname} for network, ifname in self.ordinary]
            pod = self.api.objects[("pods", NS, POD)]
            pod["metadata"].setdefault("annotations", {})[names.NETWORK_STATUS_ANNOTATION] = json.dumps(
                status
            )
        if command == "DEL":
            self.netns.links[NETNS] = [gf.FakeLink("lo")]

    def env(self, **overrides: str) -> dict[str, str]:
        env = {
            "CNI_COMMAND": "ADD",
            "CNI_CONTAINERID": "c1",
            "CNI_NETNS": NETNS,
            "CNI_IFNAME": "eth0",
            "CNI_ARGS": ARGS + f";K8S_POD_UID={mp.POD_UID}",
            "CNI_PATH": "/opt/cni/bin",
        }
        env.update(overrides)
        return env

    def verify_ordinary(self) -> World:
        """Turn on ``guard.verifyOrdinarySelections`` in the guard's config (the per-node option)."""
        doc = json.loads(self.stdin)
        doc["guard"] = {"verifyOrdinarySelections": True}
        self.stdin = json.dumps(doc).encode()
        return self

    def add(self, **overrides: str) -> cni_hooks.Outcome:
        return self.hooks.handle(self.env(**overrides), self.stdin)

    def commands(self) -> list[str]:
        return [c.command for c in self.runner.calls]

    def set_pod_annotation(self, key: str, value: str) -> None:
        self.api.objects[("pods", NS, POD)]["metadata"]["annotations"][key] = value


def _error(outcome: cni_hooks.Outcome) -> dict[str, Any]:
    doc = json.loads(outcome.stdout)
    assert isinstance(doc, dict)
    return doc


def test_managed_add_is_verified_and_multus_output_relayed_unchanged(tmp_path: Path) -> None:
    w = World(tmp_path)
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and out.exit_code == 0
    assert out.stdout == '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}'
    assert w.commands() == ["ADD"] and w.netns.reads == [NETNS]
    pod_reads = [r for r in w.api.reads if r[0] == "pods"]
    nad_reads = [r for r in w.api.reads if r[0] != "pods"]
    assert len(pod_reads) == 2 and sorted(r[2] for r in nad_reads) == sorted(p.name for p in w.plans)


def test_the_shadows_of_a_managed_add_are_read_at_once(tmp_path: Path) -> None:
    """Each shadow read waits until every other has started: read one after the other, the first
    would wait forever (here: until the barrier's timeout breaks it and the ADD fails)."""
    w = World(tmp_path)
    started = threading.Barrier(len(w.plans), timeout=5)

    def wait_for_the_others(kind: str, namespace: str, name: str) -> None:
        if kind == "network-attachment-definitions":
            started.wait()

    w.api.on_read = wait_for_the_others
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and not started.broken


def test_a_pod_selecting_many_shadows_has_at_most_the_daemons_bound_of_them_read_at_once(
    tmp_path: Path,
) -> None:
    """A Pod selecting three times the bound of shadows beside its own: every shadow is read, never
    more than ``READS_IN_FLIGHT`` at once (one thread per shadow would read them all at once), and
    the first failed shadow in the Pod's order decides."""
    w = World(tmp_path)
    extra = [f"dra-sriov-{i:02d}-unknown" for i in range(3 * cni_hooks.READS_IN_FLIGHT)]
    selections = json.loads(w.annotations[names.NETWORKS_ANNOTATION])
    selections += [{"name": name, "interface": f"x{i}"} for i, name in enumerate(extra)]
    w.set_pod_annotation(names.NETWORKS_ANNOTATION, json.dumps(selections))
    lock, reading, most = threading.Lock(), [0], [0]
    released = threading.Event()

    def count_at_once(kind: str, namespace: str, name: str) -> None:
        if kind != "network-attachment-definitions":
            return
        with lock:
            reading[0] += 1
            most[0] = max(most[0], reading[0])
        released.wait(0.05)  # long enough for unbounded reads to overlap
        with lock:
            reading[0] -= 1

    w.api.on_read = count_at_once
    out = w.add()
    shadow_reads = [r[2] for r in w.api.reads if r[0] == "network-attachment-definitions"]
    assert sorted(shadow_reads) == sorted([p.name for p in w.plans] + extra)
    assert most[0] <= cni_hooks.READS_IN_FLIGHT and reading[0] == 0
    assert out.reason is R.SHADOW_NOT_FOUND and extra[0] in _error(out)["msg"]


def test_verified_managed_add_logs_one_line_per_claim_uid_with_its_interfaces(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One log filter on the claim UID finds the guard's verification as it finds the plugin's prepare."""
    caplog.set_level("INFO", logger="sriov_dra.guard")
    out = World(tmp_path).add()
    assert out.reason is R.PASSED_VERIFIED
    (line,) = [r for r in caplog.records if r.getMessage() == "claim interfaces verified"]
    assert line.__dict__["claim_uid"] == mp.CLAIM_UID
    assert line.__dict__["ifname"] == "dra0,dra1" and line.__dict__["pod"] == f"{NS}/{POD}"


def metadata_doc(namespace: str, claim_uid: str, pcis: tuple[str, ...]) -> dict[str, Any]:
    devices = [
        {"driver": "d", "pool": "p", "name": f"vf-{i}", "attributes": {PCI_ATTRIBUTE: {"string": pci}}}
        for i, pci in enumerate(pcis)
    ]
    return {
        "apiVersion": md.API_VERSION,
        "kind": md.KIND,
        "metadata": {"name": "c", "namespace": namespace, "uid": claim_uid, "generation": 1},
        "requests": [{"name": "nic", "devices": devices}],
    }


PCI_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
MINE = Path(f"/data/dra-device-metadata/{NS}_c/nic/metadata.json")


def test_verified_add_writes_each_vfs_network_data_into_its_claims_metadata_file(tmp_path: Path) -> None:
    files = gf.FakeMetadataFiles(
        {
            MINE: metadata_doc(NS, mp.CLAIM_UID, ("0000:03:00.1", "0000:80:00.1")),
            Path("/data/dra-device-metadata/other_c/nic/metadata.json"): metadata_doc(
                "other", mp.CLAIM_UID, ("0000:03:00.1",)
            ),
        }
    )
    other = copy.deepcopy(files.docs)
    w = World(tmp_path, metadata=files)
    assert w.add().reason is R.PASSED_VERIFIED
    listed = files.docs[MINE]["requests"][0]["devices"]
    assert [d["networkData"] for d in listed] == [
        {"interfaceName": "dra0", "ips": ["192.0.2.5/24"], "hardwareAddress": "02:00:00:00:00:00"},
        {"interfaceName": "dra1", "ips": ["198.51.100.7/24"], "hardwareAddress": "02:00:00:00:00:01"},
    ]
    assert files.docs[MINE]["metadata"]["generation"] == 2
    assert {p: d for p, d in files.docs.items() if p != MINE} == {p: d for p, d in other.items() if p != MINE}
    assert w.metrics.device_metadata.labels(outcome="written")._value.get() == 1


def test_a_metadata_write_failure_is_logged_and_counted_and_the_add_still_passes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = gf.FakeMetadataFiles({MINE: metadata_doc(NS, mp.CLAIM_UID, ("0000:03:00.1",))})
    files.fail = PermissionError(13, "Permission denied")
    w = World(tmp_path, metadata=files)
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and out.exit_code == 0
    assert w.commands() == ["ADD"], "no Multus DEL: the ADD stands"
    (line,) = [r for r in caplog.records if r.getMessage() == "device metadata network data not written"]
    assert "Permission denied" in line.__dict__["reason"]
    assert w.metrics.device_metadata.labels(outcome="error")._value.get() == 1


def test_a_failed_verification_writes_no_metadata(tmp_path: Path) -> None:
    files = gf.FakeMetadataFiles({MINE: metadata_doc(NS, mp.CLAIM_UID, ("0000:03:00.1",))})
    before = copy.deepcopy(files.docs)
    w = World(tmp_path, metadata=files)
    w.attach = False
    assert w.add().exit_code != 0
    assert files.docs == before


def test_pod_without_selections_reads_only_the_pod_and_is_not_verified(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.api.put("pods", mp.pod(NS, POD, annotations={}))
    out = w.add()
    assert out.reason is R.PASSED_UNMANAGED and out.exit_code == 0
    assert [r[0] for r in w.api.reads] == ["pods"] and w.netns.reads == []


MANUAL_ETH1 = '[{"name":"net-a","namespace":"ns-a","interface":"eth1"}]'


def test_ordinary_pod_is_multus_alone_its_environment_unchanged_nothing_verified(tmp_path: Path) -> None:
    """multus-cni #492 stays Multus's own outcome unless the node asks for the check."""
    w = World(tmp_path)
    w.api.put("pods", mp.pod(NS, POD, annotations={names.NETWORKS_ANNOTATION: MANUAL_ETH1}))
    out = w.add(CNI_ARGS=ARGS)  # no K8S_POD_UID from the runtime: none is added for an ordinary Pod
    assert out.reason is R.PASSED_UNMANAGED and out.exit_code == 0
    assert out.stdout == '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}'
    assert w.commands() == ["ADD"] and w.runner.calls[0].env["CNI_ARGS"] == ARGS
    assert [r[0] for r in w.api.reads] == ["pods"] and w.netns.reads == []


@pytest.mark.parametrize(
    "value",
    ['[{"name":"net-a"},{"name":"net-b","interface":"net1"}]', "a/b/c", '[{"name":7}]'],
    ids=["c15-collision", "two-slashes", "name-not-a-string"],
)
def test_ordinary_pod_annotation_multus_judges_goes_to_multus(tmp_path: Path, value: str) -> None:
    w = World(tmp_path)
    w.api.put("pods", mp.pod(NS, POD, annotations={names.NETWORKS_ANNOTATION: value}))
    verdict = '{"cniVersion":"1.0.0","code":7,"msg":"Multus: its own verdict"}'
    w.runner.answers["ADD"] = [multus.MultusRun("ADD", 1, verdict, "", 0.1)]
    out = w.add()
    assert out.reason is R.MULTUS_FAILED and out.stdout == verdict
    assert w.commands() == ["ADD"] and w.netns.reads == []


def test_manual_only_pod_is_verified_without_nad_reads_and_passes_unmanaged(tmp_path: Path) -> None:
    w = World(tmp_path).verify_ordinary()
    w.api.put("pods", mp.pod(NS, POD, annotations={names.NETWORKS_ANNOTATION: MANUAL_ETH1}))
    w.ordinary = [("ns-a/net-a", "eth1")]
    out = w.add()
    assert out.reason is R.PASSED_UNMANAGED and out.exit_code == 0 and out.message == "verified eth1"
    assert [r[0] for r in w.api.reads] == ["pods", "pods"] and w.netns.reads == [NETNS]
    assert w.commands() == ["ADD"]


def test_manual_only_pod_with_primary_only_success_fails_interfaces_missing_after_multus_del(
    tmp_path: Path,
) -> None:
    """multus-cni #492: Multus answered success with the primary alone; eth1 never existed."""
    w = World(tmp_path).verify_ordinary()
    w.api.put("pods", mp.pod(NS, POD, annotations={names.NETWORKS_ANNOTATION: MANUAL_ETH1}))
    out = w.add()
    assert out.reason is R.INTERFACES_MISSING and out.exit_code == 1
    assert w.commands() == ["ADD", "DEL"] and w.runner.calls[1].env["CNI_CONTAINERID"] == "c1"
    err = _error(out)
    assert err["code"] == shim.CniErrorCode.VERIFICATION_FAILED
    assert f"Pod {NS}/{POD}" in err["msg"] and "eth1 (NAD ns-a/net-a)" in err["msg"]
    assert "NetworkStatusMissing" in err["details"] and "ns-a/net-a on eth1" in err["details"]
    assert "Multus DEL succeeded" in err["details"]


def test_selection_without_interface_is_verified_under_the_net_name_multus_derives(tmp_path: Path) -> None:
    w = World(tmp_path).verify_ordinary()
    w.api.put("pods", mp.pod(NS, POD, annotations={names.NETWORKS_ANNOTATION: "net-a,other/net-b@foo"}))
    w.ordinary = [(f"{NS}/net-a", "net1")]
    out = w.add()
    assert out.reason is R.INTERFACES_MISSING and w.commands() == ["ADD", "DEL"]
    msg = _error(out)["msg"]
    assert "foo (NAD other/net-b)" in msg and "net1" not in msg

    w.ordinary.append(("other/net-b", "foo"))
    assert w.add().reason is R.PASSED_UNMANAGED


def test_managed_pod_verifies_its_manual_selections_only_when_the_node_asks(tmp_path: Path) -> None:
    w = World(tmp_path)
    manual = '{"name":"net-a","namespace":"ns-a","interface":"eth1"}'
    w.api.put(
        "pods", mp.pod(NS, POD, annotations=mp.managed_annotations(mp.POD_UID, w.entries, manual=[manual]))
    )
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and out.message == "verified dra0, dra1"


def test_managed_pod_whose_manual_selection_is_missing_fails_naming_only_it(tmp_path: Path) -> None:
    w = World(tmp_path).verify_ordinary()
    manual = '{"name":"net-a","namespace":"ns-a","interface":"eth1"}'
    w.api.put(
        "pods", mp.pod(NS, POD, annotations=mp.managed_annotations(mp.POD_UID, w.entries, manual=[manual]))
    )
    out = w.add()
    assert out.reason is R.INTERFACES_MISSING and w.commands() == ["ADD", "DEL"]
    msg = _error(out)["msg"]
    assert "eth1 (NAD ns-a/net-a)" in msg and "dra0" not in msg and "dra1" not in msg
    assert [r[0] for r in w.api.reads].count("network-attachment-definitions") == 2  # only the shadows

    w.ordinary = [("ns-a/net-a", "eth1")]
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and out.message == "verified eth1, dra0, dra1"


def test_primary_only_success_is_turned_into_failure_after_multus_del(tmp_path: Path) -> None:
    """The decisive regression: Multus succeeded without the managed interfaces."""
    w = World(tmp_path)
    w.attach = False
    out = w.add()
    assert out.reason is R.INTERFACES_MISSING and out.exit_code == 1
    assert w.commands() == ["ADD", "DEL"]
    assert w.runner.calls[1].env["CNI_CONTAINERID"] == "c1" and w.runner.calls[1].env["CNI_NETNS"] == NETNS
    err = _error(out)
    assert err["code"] == shim.CniErrorCode.VERIFICATION_FAILED
    assert "dra0" in err["msg"] and "dra1" in err["msg"]
    assert R.NETWORK_STATUS_MISSING.value in err["details"] and "Multus DEL succeeded" in err["details"]


def test_network_status_without_entries_fails_even_when_interfaces_exist(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.attach = False
    w.netns.links[NETNS] += [gf.FakeLink("dra0"), gf.FakeLink("dra1")]
    out = w.add()
    assert out.reason is R.NETWORK_STATUS_MISSING and w.commands() == ["ADD", "DEL"]


def test_pod_authors_own_malformed_network_status_still_gets_multus_del(tmp_path: Path) -> None:
    """Thin Multus that cannot write network-status leaves the Pod author's value in place."""
    w = World(tmp_path)
    w.attach = False
    w.netns.links[NETNS] += [gf.FakeLink("dra0"), gf.FakeLink("dra1")]
    w.set_pod_annotation(names.NETWORK_STATUS_ANNOTATION, '[{"name":["x"],"interface":{"y":1}}]')
    out = w.add()
    assert out.reason is R.NETWORK_STATUS_MISSING and w.commands() == ["ADD", "DEL"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda w: w.set_pod_annotation(names.NETWORKS_ANNOTATION, "a/b/c"), R.INVALID_NETWORKS_ANNOTATION),
        (
            lambda w: w.set_pod_annotation(names.NETWORKS_ANNOTATION, '[{"name":"a"}]'),
            R.REGISTRY_ENTRY_NOT_SELECTED,
        ),
        (
            lambda w: w.api.objects.pop(("network-attachment-definitions", NS, w.plans[0].name)),
            R.SHADOW_NOT_FOUND,
        ),
        (
            lambda w: w.api.objects[("network-attachment-definitions", NS, w.plans[1].name)][
                "metadata"
            ].update(deletionTimestamp="2026-01-01T00:00:00Z"),
            R.SHADOW_TERMINATING,
        ),
        (
            lambda w: w.set_pod_annotation(names.MANAGED_NETWORKS_ANNOTATION, '{"version":2}'),
            R.UNSUPPORTED_REGISTRY_VERSION,
        ),
    ],
    ids=[
        "annotation-two-slashes",
        "registry-entries-dropped",
        "shadow-deleted",
        "shadow-terminating",
        "registry-v2",
    ],
)
def test_rejection_runs_no_multus_at_all(tmp_path: Path, change: Any, reason: R) -> None:
    w = World(tmp_path)
    change(w)
    out = w.add()
    assert out.reason is reason and out.exit_code == 1 and w.runner.calls == []
    err = _error(out)
    assert err["code"] == shim.CniErrorCode.REJECTED and "no delegate ran" in err["details"]


def test_c15_collision_between_manual_selections_of_a_managed_pod_is_rejected_before_multus(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    manual = ['{"name":"net-a"}', '{"name":"net-b","interface":"net1"}']
    w.api.put(
        "pods", mp.pod(NS, POD, annotations=mp.managed_annotations(mp.POD_UID, w.entries, manual=manual))
    )
    out = w.add()
    assert out.reason is R.DUPLICATE_INTERFACE_NAME and w.runner.calls == []


def test_missing_runtime_pod_uid_is_taken_from_the_live_pod(tmp_path: Path) -> None:
    w = World(tmp_path)
    out = w.add(CNI_ARGS=ARGS)
    assert out.reason is R.PASSED_VERIFIED
    assert w.runner.calls[0].env["CNI_ARGS"] == ARGS + f";K8S_POD_UID={mp.POD_UID}"


def test_runtime_args_are_passed_unchanged_when_uid_present(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.add()
    assert w.runner.calls[0].env["CNI_ARGS"] == ARGS + f";K8S_POD_UID={mp.POD_UID}"


def test_pod_uid_mismatch_is_rejected(tmp_path: Path) -> None:
    w = World(tmp_path)
    out = w.add(CNI_ARGS=ARGS + ";K8S_POD_UID=22222222-3333-4444-5555-666666666666")
    assert out.reason is R.POD_UID_MISMATCH and w.runner.calls == []


def test_pod_not_found_is_rejected_without_multus(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.api.objects.pop(("pods", NS, POD))
    out = w.add()
    assert out.reason is R.POD_NOT_FOUND and w.runner.calls == []


def test_forbidden_is_a_hard_failure_naming_verb_resource_namespace(tmp_path: Path) -> None:
    w = World(tmp_path)
    key = ("network-attachment-definitions", NS, w.plans[0].name)
    w.api.failures[key] = [
        kube_errors.Forbidden(
            f"get network-attachment-definitions.k8s.cni.cncf.io {NS}/{w.plans[0].name}: HTTP 403 Forbidden",
            status=403,
        )
    ]
    out = w.add()
    assert out.reason is R.API_FORBIDDEN and w.runner.calls == []
    msg = _error(out)["msg"]
    assert "get network-attachment-definitions" in msg and NS in msg and "sriov-dra-guard" in msg
    assert sum(1 for r in w.api.reads if r[:3] == key) == 1  # not retried


def test_server_errors_are_retried_within_the_window(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.api.failures[("pods", NS, POD)] = [
        kube_errors.ServerError("HTTP 503"),
        kube_errors.ServerError("HTTP 503"),
    ]
    out = w.add()
    assert out.reason is R.PASSED_VERIFIED and w.clock.sleeps == [0.1, 0.2]


def test_persistent_server_errors_fail_without_a_stale_fallback(tmp_path: Path) -> None:
    w = World(tmp_path, api_retry_window_s=1.0)
    w.api.failures[("pods", NS, POD)] = [kube_errors.ServerError("HTTP 500 boom")] * 50
    out = w.add()
    assert out.reason is R.API_READ_FAILED and w.runner.calls == []
    assert "no stale copy" in _error(out)["msg"] and _error(out)["code"] == shim.CniErrorCode.TRY_AGAIN


def test_reads_are_bounded_by_the_remaining_budget(tmp_path: Path) -> None:
    w = World(tmp_path, add_budget_s=3.0, api_timeout_s=5.0)
    w.api.read_s = 1.0
    out = w.add()
    pod, *shadows = [round(r[3], 3) for r in w.api.reads]
    assert pod == 3.0 and len(shadows) == 2 and set(shadows) <= {2.0, 1.0}  # the shadows are read at once
    assert out.reason is R.API_READ_FAILED and "budget" in _error(out)["msg"] and w.runner.calls == []


def test_multus_gets_the_remaining_budget(tmp_path: Path) -> None:
    w = World(tmp_path, add_budget_s=10.0)
    w.api.read_s = 0.5
    w.add()
    assert w.runner.calls[0].timeout_s == pytest.approx(8.5)


def test_multus_error_is_relayed_unchanged(tmp_path: Path) -> None:
    w = World(tmp_path)
    failure = '{"cniVersion":"1.0.0","code":999,"msg":"[ai-workloads/trainer/x:net]: error adding"}'
    w.runner.answers["ADD"] = [multus.MultusRun("ADD", 1, failure, "log", 0.1)]
    out = w.add()
    assert out.reason is R.MULTUS_FAILED and out.exit_code == 1 and out.stdout == failure
    assert w.commands() == ["ADD"]


def test_multus_crash_without_output_becomes_a_cni_error(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.runner.answers["ADD"] = [multus.MultusRun("ADD", 2, "", "panic: boom", 0.1)]
    out = w.add()
    assert (
        out.reason is R.MULTUS_FAILED
        and "exited 2" in _error(out)["msg"]
        and "panic" in _error(out)["details"]
    )


def test_multus_unavailable(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.runner.unavailable = True
    out = w.add()
    assert out.reason is R.MULTUS_UNAVAILABLE and _error(out)["code"] == shim.CniErrorCode.TRY_AGAIN


def test_del_is_passed_through_without_any_read(tmp_path: Path) -> None:
    w = World(tmp_path)
    out = w.hooks.handle(w.env(CNI_COMMAND="DEL", CNI_ARGS="broken;"), w.stdin)
    assert out.reason is R.PASSED_THROUGH and out.exit_code == 0
    assert w.api.reads == [] and w.commands() == ["DEL"]
    assert w.runner.calls[0].env["CNI_ARGS"] == "broken;"


def test_bad_guard_config_is_an_invalid_request(tmp_path: Path) -> None:
    w = World(tmp_path)
    out = w.hooks.handle(w.env(), b"{}")
    assert out.reason is R.INVALID_CNI_REQUEST and w.api.reads == []


def test_unexpected_exception_still_answers(tmp_path: Path) -> None:
    w = World(tmp_path)

    def boom(kind: str, namespace: str, name: str) -> None:
        raise RuntimeError("bug")

    w.api.on_read = boom
    out = w.add()
    assert out.reason is R.INTERNAL_ERROR and _error(out)["code"] == shim.CniErrorCode.TRY_AGAIN


def test_metrics_count_decisions_and_split_latency(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.api.read_s = 0.01
    w.add()
    text = w.metrics.render().decode()
    assert 'sriov_dra_guard_decisions_total{kind="passed",reason="PassedVerified"} 1.0' in text
    assert 'sriov_dra_guard_add_duration_seconds_count{part="guard"} 1.0' in text
    assert 'sriov_dra_guard_add_duration_seconds_sum{part="multus"} 0.2' in text
    assert 'sriov_dra_guard_api_reads_total{outcome="ok",resource="pods"} 2.0' in text
    assert 'sriov_dra_guard_multus_runs_total{command="ADD",outcome="ok"} 1.0' in text
