"""A SIGTERM during a hand-over: ``Plugin.stop`` waits for the hand-over's drain (driver/main.py).

The hand-over runs on the watcher thread and ``stop`` on the main thread once a signal arrived.
Here a real kubelet plugin server on unix sockets holds a NodePrepare in flight while the
hand-over drains it; ``stop`` called meanwhile must neither fail nor close the API client (nor
let the checkpoint close) before that call ended (docs/plugin.md#rolling-update).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from tests import waiting
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.driver import main, settings
from sriov_dra.host import checkpoint, checkpoint_files
from sriov_dra.kubeletapi import endpoints, messages, plugin_server
from sriov_dra_lab import kubelet_plugins

CLAIM = messages.ClaimRef("ns", "claim-a", "uid-a")


class ClosingApi:
    """FAKE API client: records whether the in-flight kubelet call had ended when it was closed."""

    def __init__(self, call_done: threading.Event) -> None:
        self.call_done = call_done
        self.closed_after_call: list[bool] = []

    def close(self) -> None:
        self.closed_after_call.append(self.call_done.is_set())


def test_stop_during_a_hand_over_waits_for_its_drain_and_closes_the_api_client_after_it(
    short_dir: Path,
) -> None:
    cfg = settings.parse(
        [
            f"--kubelet-plugins-directory-path={short_dir / 'plugins'}",
            f"--kubelet-registrar-directory-path={short_dir / 'registry'}",
            f"--state-dir={short_dir / 'state'}",
            f"--cdi-root={short_dir / 'cdi'}",
            "--pod-uid=0123456789abcdef",
        ],
        {"NODE_NAME": "node-a"},
    )
    plugin = main.Plugin(cfg)
    (short_dir / "state").mkdir()
    store = checkpoint.CheckpointStore(short_dir / "state" / "checkpoint.json")
    store.load()
    for instance in ("0123456789abcdef", "successor"):
        checkpoint_files.record_instance(short_dir / "state", instance)
    successor = subprocess.Popen(  # the newer instance: asks for the node, serves it once it has it
        [
            sys.executable,
            "-c",
            "from tests.host.driver.test_rolling_update import instance_process;"
            f" instance_process({str(short_dir / 'state')!r}, 'successor', True)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    waiting.eventually(
        "the successor to ask for the node", store.successor_waiting, timeout_s=30, interval_s=0.02
    )
    handler = FakeClaimHandler(hold=True)
    server = plugin_server.KubeletPluginServer(
        driver_name=cfg.driver_name, handler=handler, sockets=cfg.sockets
    )
    server.start()
    call_done = threading.Event()
    api = ClosingApi(call_done)
    plugin.store, plugin.server, plugin._api = store, server, api  # type: ignore[assignment]
    client = kubelet_plugins.DraPluginClient(
        kubelet_plugins.RegisteredPlugin(
            driver_name=cfg.driver_name,
            endpoint=cfg.sockets.dra,
            service=endpoints.DraService.V1,
            supported_versions=server.supported_versions,
            registration_socket=cfg.sockets.registration,
        ),
        call_timeout_s=30,
    )
    results: list[object] = []

    def prepare() -> None:
        results.append(client.node_prepare_resources([CLAIM]))
        call_done.set()

    failures: list[BaseException] = []

    def guarded(fn: object) -> threading.Thread:
        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            except BaseException as exc:
                failures.append(exc)

        return threading.Thread(target=run, daemon=True)

    call = threading.Thread(target=prepare, daemon=True)
    try:
        call.start()
        assert handler.entered.wait(5)
        handing_over = guarded(plugin.hand_over)
        handing_over.start()
        waiting.eventually(
            "the hand-over draining (registration socket removed)",
            lambda: not cfg.sockets.registration.exists(),
            timeout_s=5,
            interval_s=0.01,
        )
        stopping = guarded(plugin.stop)  # the main thread after SIGTERM
        stopping.start()
        stopping.join(0.5)
        assert stopping.is_alive(), "stop returned while the hand-over still drained a kubelet call"
        assert api.closed_after_call == []
        handler.release.set()
        for thread in (call, handing_over, stopping):
            thread.join(10)
            assert not thread.is_alive()
    finally:
        handler.release.set()
        client.close()
        server.stop(grace_s=0)
        successor.kill()
        successor.communicate()
    assert failures == []
    assert results == [{"uid-a": messages.Prepared((messages.Device("pool-a", "dev-claim-a"),))}]
    assert api.closed_after_call == [True]
    assert plugin.handed_over.is_set()
    assert "0123456789abcdef" in (short_dir / "state" / "checkpoint.retired").read_text()
