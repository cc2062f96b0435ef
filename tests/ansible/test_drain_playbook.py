"""``ansible-playbook sriovnet.dra.drain`` against the real test control plane and a plugin checkpoint written by the plugin's store.

The drain waits for the plugin's checkpoint on the node to hold no managed binding. It reads the
durable ``checkpoint.slots`` through ``sriovnet.dra.checkpoint_info``, so a ``checkpoint.json``
deleted by hand while a claim is prepared (a fresh-user walkthrough did that; the role then read
"no file" as "no binding" and passed at once) still holds the drain, which ends naming the shadow
NAD. Once the plugin has released the claim (its store deletes the record), the drain passes and
the Node stays cordoned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from tests.ansible.conftest import node_inventory, run
from tests.fakes import checkpoint_records as fx

from sriov_dra.host import checkpoint as store_mod
from sriov_dra_rules import checkpoint_doc

NODE = "sriov-drain-playbook-node"


def test_drain_holds_while_the_durable_checkpoint_has_a_binding_even_without_checkpoint_json(
    control_plane: Any, api: Any, ansible_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
    core = k8s.CoreV1Api(api)
    core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=NODE)))
    try:
        path = tmp_path / "plugin" / checkpoint_doc.CHECKPOINT_FILE_NAME
        path.parent.mkdir()
        store = store_mod.CheckpointStore(path)
        store.load()
        record = store.set_claim(fx.record())
        binding = record.devices[0].managed
        assert binding is not None
        path.unlink()  # removed by hand; checkpoint.slots still holds the prepared claim
        extra = tmp_path / "vars.json"
        extra.write_text(
            json.dumps(
                {
                    "sriov_dra_node_name": NODE,
                    "drain_checkpoint": str(path),
                    "drain_release_retries": 1,
                    "drain_release_delay": 0,
                }
            )
        )
        inventory = str(node_inventory(tmp_path / "inventory.yml"))
        unlimited = run(
            ["ansible-playbook", "-i", inventory, "-e", f"@{extra}", "sriovnet.dra.drain"], env, check=False
        )
        assert unlimited.returncode != 0
        assert "pass the node(s) to drain with --limit" in unlimited.stdout
        assert core.read_node(NODE).spec.unschedulable is not True  # refused before anything was done
        drain = [
            "ansible-playbook",
            "-i",
            inventory,
            "--limit",
            "localhost",
            "-e",
            f"@{extra}",
            "sriovnet.dra.drain",
        ]
        held = run(drain, env, check=False)
        assert held.returncode != 0
        assert (
            f"{NODE} still has 1 managed binding(s) in {path.with_name(checkpoint_doc.SLOTS_FILE_NAME)} "
            f"after 2 checks 0 s apart (shadow NADs {binding.shadow_namespace}/{binding.shadow_name})"
        ) in held.stdout
        assert core.read_node(NODE).spec.unschedulable is True  # cordoned before the wait

        store.mark_managed_deleting(fx.CLAIM_1)  # the plugin's release of the claim (docs/design.md#release)
        store.mark_managed_release_complete(fx.CLAIM_1)
        store.delete_claim(fx.CLAIM_1)
        store.close()
        passed = run(drain, env)
        assert "failed=0" in passed.stdout
        assert (
            f"{NODE} is drained: no managed binding in {path.with_name(checkpoint_doc.SLOTS_FILE_NAME)}"
            in (passed.stdout)
        )

        typo = tmp_path / "typo" / "checkpoint.json"
        missing = run([*drain[:-1], "-e", f"drain_checkpoint={typo}", drain[-1]], env, check=False)
        assert missing.returncode != 0  # a wrong path never reads as "nothing prepared"
        assert (
            f"no plugin checkpoint at {typo} (neither checkpoint.slots nor checkpoint.json exists there)"
            in (missing.stdout)
        )
        assert "drain_checkpoint_missing_ok) The node stays cordoned." not in missing.stdout
        assert "cleanup_checkpoint_missing_ok). The node stays cordoned." in missing.stdout

        checked = run([*drain[:-1], "--check", drain[-1]], env, check=False)
        assert checked.returncode != 0
        assert "the drain has no check mode" in checked.stdout
    finally:
        core.delete_node(NODE)
