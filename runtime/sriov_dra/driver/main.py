"""``sriov-dra-plugin`` / ``python -m sriov_dra.driver``: the DRA kubelet plugin process.

Wires one plugin process on one node and owns its lifecycle: :meth:`Plugin.start` runs the
startup steps in order, each only after the previous one succeeded (docs/plugin.md, "Startup
order"); nothing is served to the kubelet before the checkpoint is loaded and, in auto-attach
mode, the repair worker finished a pass (docs/design.md#repair). Shutdown removes the
registration socket first. With a Pod UID the sockets are per instance and a running instance
hands the checkpoint's writer lock, the ResourceSlices and the workers over to a newer one
(docs/plugin.md#rolling-update). Only this module ends the process (after a hand-over through
``rolling_update.ProcessEnd``). :class:`PluginSeams` names what a launcher other than the shipped
entrypoint may replace (the lab's fakes; the product ships none).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

from sriov_dra.driver import (
    checkpoint_startup,
    claim_context,
    device_health_monitor,
    faults,
    health_taints,
    managed_wiring,
    mapping_report,
    metrics,
    prepare,
    publisher,
    rolling_update,
    settings,
)
from sriov_dra.driver.managed import multus_layout, service
from sriov_dra.driver.managed import repair as managed_repair
from sriov_dra.host import (
    cdi,
    checkpoint,
    device_metadata_files,
    devlink,
    discovery,
    vf_driver_binding,
    vf_health_reader,
)
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import objects as kube_objects
from sriov_dra.kube import plugin_events
from sriov_dra.kube import watches as kube_watches
from sriov_dra.kubeletapi import dra_service, plugin_server
from sriov_dra.servicekit import logs, probes, threads

LOG = logging.getLogger("sriov_dra.driver")

EXIT_OK = 0
EXIT_STARTUP_FAILED = 1
EXIT_BAD_SETTINGS = 2


class StartupError(Exception):
    """A startup step failed; the message says which and how to fix it."""


@dataclass(frozen=True)
class PluginSeams:
    """What a launcher other than the shipped entrypoint replaces.

    The lab, which runs the plugin on fake sysfs trees and kills it at step boundaries in the
    crash tests, starts it through ``python -m sriov_dra_lab.launch_plugin`` (the same flags),
    which calls :func:`main` with its fakes.

    ``kernel`` builds the PCI writer for ``--sysfs-root`` (None: the kernel's own sysfs files,
    ``vf_driver_binding.SysfsKernelPci``); ``eswitch_modes`` builds the eswitch-mode source for it (None:
    devlink when the root is ``/``, else every PF ``legacy``); ``fault`` is called with each
    ``driver.faults`` point name after the step it names. A builder may raise
    :class:`StartupError` to refuse a root (exit 1 with its message).
    """

    kernel: Callable[[Path], vf_driver_binding.KernelPci] | None = None
    eswitch_modes: Callable[[Path], discovery.EswitchModeSource] | None = None
    fault: faults.FaultHook = faults.NO_FAULTS


PRODUCTION: Final = PluginSeams()
"""The shipped entrypoint's seams: nothing replaced."""


class Plugin:
    """One plugin process: :meth:`start` in the documented order, :meth:`stop` in reverse.

    ``stop_event`` ends :meth:`run` (signals set it).
    """

    def __init__(
        self,
        config: settings.PluginSettings,
        *,
        seams: PluginSeams = PRODUCTION,
        stop_event: threading.Event | None = None,
        fresh_after_hand_over: bool = False,
    ) -> None:
        self.settings = config
        self.seams = seams
        self.stop_event = stop_event if stop_event is not None else threading.Event()
        # The node's owner's workers (publisher, repair) end with it; the process with stop_event.
        self.owner_stop = threading.Event()
        self.handed_over = threading.Event()
        self.instance = rolling_update.instance_id(config.pod_uid)
        self.ending = rolling_update.ProcessEnd(fresh_after_hand_over)
        self._lifecycle = threading.Lock()  # hand_over (watcher thread) and stop (main thread) in turn
        self._gate: rolling_update.Gate | None = None
        self._registration_seen = threading.Event()
        self.metrics = metrics.PluginMetrics()
        self.store: checkpoint.CheckpointStore | None = None
        self.publisher: publisher.Publisher | None = None
        self.taints: health_taints.HealthTaints | None = None
        self.eswitch_modes: devlink.EswitchModes | None = None
        self.server: plugin_server.KubeletPluginServer | None = None
        self.http: probes.HttpServer | None = None
        # /readyz: registered with the kubelet (step 7); /healthz: no essential worker crashed.
        self.health_state = probes.Health(pod_uid=config.pod_uid)
        self.health_state.check("registered", self.readiness)
        self._api: kube_watches.ApiClient | None = None
        self.repair: managed_repair.RepairWorker | None = None

    # ------------------------------------------------------------------ health
    def readiness(self) -> tuple[bool, str]:
        """``(ready, reason)``: the ``/readyz`` condition (registered with the kubelet, not stopping)."""
        if self.stop_event.is_set():
            return False, "shutting down"
        if self.handed_over.is_set():
            return False, "handed the node over to a newer plugin instance"
        if self._gate is not None and not self._gate.is_open():
            return False, "waiting for the previous plugin instance to hand the checkpoint over"
        if self.server is None:
            if self.repair is not None:
                return False, "starting: waiting for the auto-attach repair worker's first pass"
            return False, "starting: the DRA and registration sockets are not serving yet"
        state = self.server.registration
        if state is None:
            return False, "waiting for the kubelet to register the plugin"
        if not state.registered:
            return False, f"the kubelet rejected the registration: {state.error}"
        return True, "ok"

    def _refresh_prepared(self) -> None:
        if self.store is not None:
            self.metrics.prepared_claims.set(len(self.store.all_claims()))

    def _on_registration(self, state: plugin_server.RegistrationState) -> None:
        self.metrics.registered.set(1 if state.registered else 0)
        self._registration_seen.set()

    # ------------------------------------------------------------------ lifecycle
    def _load_checkpoint(self) -> checkpoint.CheckpointStore:
        try:
            store, claims = checkpoint_startup.load(self.settings)
        except checkpoint_startup.Refused as exc:
            raise StartupError(str(exc)) from exc
        self.metrics.prepared_claims.set(claims)
        return store

    def _api_client(self) -> kube_watches.ApiClient:
        cfg = self.settings
        try:
            if cfg.kubeconfig is not None:
                return kube_client.from_kubeconfig(cfg.kubeconfig)
            return kube_client.in_cluster()
        except Exception as exc:
            where = f"kubeconfig {cfg.kubeconfig}" if cfg.kubeconfig else "the in-cluster service account"
            raise StartupError(f"cannot build an API client from {where}: {exc}; fix --kubeconfig") from exc

    def start(self) -> None:
        """Run startup steps 2-7 of docs/plugin.md#startup-order, each only after the previous one succeeded.

        2. The checkpoint (a corrupt file or unknown version stops startup, left untouched). 3. API
        client; the metrics/health server. 4. Discovery and the publisher; the policies' first
        evaluation awaited, at most :data:`publisher.POLICY_SYNC_TIMEOUT_S`. 5. *Auto-attach only*:
        the repair worker's first complete pass, at most ``--repair-first-pass-timeout-s``. 6-7. The
        DRA socket, then the registration socket. With ``--pod-uid`` the instance first takes its
        place in the node's order; the newest serves first and calls wait at the gate until it owns
        the node (docs/plugin.md#rolling-update).
        Raises: StartupError naming the failed step and its fix.
        """
        cfg = self.settings
        if not self._before_owning():
            return
        self.store = self._load_checkpoint()
        if self._gate is not None:
            self.seams.fault("handover:taken")
        self._api = self._api if self._api is not None else self._api_client()
        try:  # 3a: a Node label may keep this node manual (--multus-auto-attach-node-label)
            self.settings = cfg = managed_wiring.gated_settings(self._api, cfg, self.store)
        except Exception as exc:
            raise StartupError(f"cannot read Node {cfg.node_name} for its auto-attach label: {exc}") from exc
        if cfg.metrics_bind_address:
            self.http = probes.HttpServer(cfg.metrics_bind_address, self.health_state, self.metrics.render)
            try:
                self.http.start()
            except OSError as exc:
                raise StartupError(
                    f"cannot serve metrics on {cfg.metrics_bind_address}: {exc}; choose a free address"
                ) from exc
        sysfs = sysfs_mod.Sysfs(cfg.sysfs_root)
        # The kernel answers eswitch modes through devlink only for its own devices: under another
        # sysfs root (a test tree) its answers would be about other hardware, so such a tree comes
        # with its own source (PluginSeams.eswitch_modes) or every PF is legacy.
        eswitch_modes: discovery.EswitchModeSource | None = None
        if self.seams.eswitch_modes is not None:
            eswitch_modes = self.seams.eswitch_modes(cfg.sysfs_root)
        elif cfg.sysfs_root == Path("/"):
            self.eswitch_modes = eswitch_modes = devlink.EswitchModes()
        self.taints = health_taints.HealthTaints(
            driver=cfg.driver_name,
            effect=cfg.unhealthy_taint_effect,
            clear_after_s=cfg.taint_clear_after_s,
            on_change=self._taints_changed,
        )
        policy_objects = kube_objects.Objects(
            self._api, field_manager=mapping_report.field_manager(cfg.node_name), timeout_s=cfg.api_timeout_s
        )
        pub = publisher.Publisher(
            api=self._api,
            node_name=cfg.node_name,
            sysfs=sysfs,
            eswitch_modes=eswitch_modes,
            health=self.health_state,
            policy_namespace=cfg.policy_namespace,
            driver_name=cfg.driver_name,
            stop=self.owner_stop,
            managed=cfg.multus_auto_attach,
            mapping=mapping_report.MappingReporter(
                node_name=cfg.node_name,
                namespace=cfg.policy_namespace,
                gauges=self.metrics.mapping,
                events=plugin_events.EventRecorder(
                    self._api, controller=managed_wiring.CONTROLLER, instance=cfg.node_name
                ),
                status=policy_objects,
                policies=policy_objects,
            ),
            taints=self.taints.current,
        )
        try:
            self.publisher = pub.start()
        except Exception as exc:
            raise StartupError(f"cannot start discovery and publication: {exc}") from exc
        pub.wait_evaluated()  # no claim is prepared or repaired from a controller's empty first snapshot
        self.metrics.discovered_vfs.set(len(pub.snapshot().inventory))
        specs = cdi.CdiSpecs(cfg.cdi_root)
        try:
            specs.ensure_root()
        except OSError as exc:
            raise StartupError(f"cannot use the CDI root {cfg.cdi_root}: {exc}") from exc
        kernel: vf_driver_binding.KernelPci = (
            self.seams.kernel(cfg.sysfs_root)
            if self.seams.kernel is not None
            else vf_driver_binding.SysfsKernelPci(sysfs)
        )
        attach = None
        if cfg.multus_auto_attach:
            try:
                attach = managed_wiring.build_attach(
                    api=self._api,
                    node_name=cfg.node_name,
                    devices=pub,
                    store=self.store,
                    registry=self.metrics.registry,
                    api_timeout_s=cfg.api_timeout_s,
                    multus=multus_layout.LayoutSource(cfg.multus_layout, cfg.multus_config_file),
                    watched_node_uid=pub.watched_node_uid,
                    max_in_flight=cfg.api_max_in_flight,
                )
            except Exception as exc:
                raise StartupError(f"cannot start auto-attach (reading Node {cfg.node_name}): {exc}") from exc
        context = claim_context.ClaimContext(
            driver_name=cfg.driver_name,
            node_name=cfg.node_name,
            claims=kube_claims.ClaimClient(self._api, timeout_s=cfg.api_timeout_s),
            inventory=publisher.SnapshotInventory(pub),
            store=self.store,
            binder=vf_driver_binding.DriverBinder(sysfs, kernel=kernel),
            cdi=specs,
            sysfs=sysfs,
            fault=self.seams.fault,
            metrics=self.metrics,
            metadata=device_metadata_files.DeviceMetadataFiles(
                cfg.plugins_dir / cfg.driver_name, cfg.cdi_root, cfg.driver_name
            ),
            published=publisher.SnapshotInventory(pub).published,
            **managed_wiring.claim_fields(attach, cfg),
        )
        if attach is not None:
            self.repair = self._start_repair(attach, context)
            if self.stop_event.is_set():  # a signal arrived while waiting: do not register
                return
        monitor = self._device_health(pub, sysfs)
        handler = metrics.CountingHandler(prepare.DraHandler(context), self._refresh_prepared)
        if self._gate is not None:
            self._gate.open(handler, monitor.reports)
            self.notify_health()
        else:
            self.server = self._kubelet_server(handler, monitor.reports)
        try:
            older, sweep = rolling_update.serving(cfg, self.instance)
        except OSError as exc:
            raise StartupError(f"cannot record this instance as the node's owner: {exc}") from exc
        self.health_state.vouch_for(older)
        threads.start("device-health", monitor.run, self.owner_stop, health=self.health_state)
        threads.start(
            "hand-over", rolling_update.watch_successor, self.store, self.stop_event, self.hand_over,
            cfg.state_dir, cfg.pod_uid, sweep, health=self.health_state,
        )  # fmt: skip
        LOG.info(
            "plugin started", extra={"op": "startup", "node": cfg.node_name, "socket": str(cfg.sockets.dra)}
        )

    def _kubelet_server(
        self, handler: dra_service.ClaimHandler, reports: dra_service.HealthSource
    ) -> plugin_server.KubeletPluginServer:
        """Steps 6-7: serve the DRA socket, then the registration socket. Raises: StartupError."""
        cfg = self.settings
        server = plugin_server.KubeletPluginServer(
            driver_name=cfg.driver_name,
            handler=handler,
            sockets=cfg.sockets,
            health_source=reports,
            serialize_calls=False,
            on_registration=self._on_registration,
        )
        try:
            server.start()
        except (OSError, RuntimeError) as exc:
            raise StartupError(f"cannot serve the kubelet sockets {cfg.sockets}: {exc}") from exc
        return server

    def _before_owning(self) -> bool:
        """This instance's place in the node's order: the newest serves and registers before owning.
        ``False``: idle (a newer one holds the node, or it handed it over). Raises: StartupError."""
        cfg = self.settings
        try:
            how = rolling_update.how_to_start(cfg.state_dir, cfg.pod_uid, self.ending.fresh_after_hand_over)
        except OSError as exc:
            raise StartupError(f"cannot record this instance in {cfg.state_dir}: {exc}") from exc
        if how is rolling_update.Start.IDLE:
            self.handed_over.set()
        if how is not rolling_update.Start.ASK:
            return how is rolling_update.Start.TAKE
        self._gate = rolling_update.Gate()
        self.server = self._kubelet_server(
            metrics.CountingHandler(self._gate, self._refresh_prepared), self._gate.reports
        )
        rejected = rolling_update.await_registration(
            self._registration_seen, self.server, self.settings.sockets.registration
        )
        if rejected is not None:
            raise StartupError(rejected)
        return True

    def notify_health(self) -> None:
        if self.server is not None:
            self.server.notify_health()

    def hand_over(self) -> None:
        """Hand the node to the waiting instance (docs/plugin.md#rolling-update); then :meth:`run` stops
        and replaces the process, which idles, or takes the node back when the successor went away."""
        self.handed_over.set()
        self.owner_stop.set()
        server, repair, pub, http = self.server, self.repair, self.publisher, self.http
        outcome = functools.partial(
            rolling_update.hand_over,
            stop_serving=(lambda: server.stop(grace_s=self.settings.shutdown_grace_s)) if server else None,
            stop_workers=[w.stop for w in (repair, http) if w is not None] + ([pub.close] if pub else []),
            store=self.store,
            state_dir=self.settings.state_dir,
            instance=self.instance,
            lock=self._lifecycle,
            fault=self.seams.fault,
        )
        self.ending.hand_over(outcome, then=self.stop_event.set)

    def _device_health(
        self, pub: publisher.Publisher, sysfs: sysfs_mod.Sysfs
    ) -> device_health_monitor.DeviceHealthMonitor:
        """Step 6: the device health monitor; its changes wake the health streams."""
        store = self.store
        if store is None:  # step 2 runs first
            raise StartupError("the checkpoint must be loaded before device health is watched")
        return device_health_monitor.for_node(
            self.settings.node_name,
            snapshot=lambda: rolling_update.inventory_and_published(pub.snapshot()),
            claims=lambda: store.all_claims().values(),
            reader=vf_health_reader.VfHealthReader(sysfs),
            on_change=self.notify_health,
            on_poll=self.taints.observe if self.taints is not None else None,
        )

    def _taints_changed(self) -> None:
        if self.publisher is not None:
            self.publisher.request_sync()

    def _start_repair(
        self, attach: service.ManagedAttach, context: claim_context.ClaimContext
    ) -> managed_repair.RepairWorker:
        """Step 5: the repair worker after its first complete pass. Raises: StartupError past the timeout."""
        try:
            return managed_wiring.start_worker(
                attach, context, first_pass_timeout_s=self.settings.repair_first_pass_timeout_s,
                stop=self.owner_stop, watch_api=self._api, health=self.health_state,
            )  # fmt: skip
        except managed_wiring.FirstPassTimeout as exc:
            raise StartupError(str(exc)) from exc

    def stop(self) -> None:
        """Stop everything started, in reverse order; idempotent.

        In-flight kubelet calls get ``shutdown_grace_s`` to finish (a hand-over's drain ends first);
        calls arriving meanwhile are refused by gRPC (UNAVAILABLE), which the kubelet retries.
        """
        self.stop_event.set()
        self.owner_stop.set()
        with self._lifecycle:
            if self.server is not None:
                self.server.stop(grace_s=self.settings.shutdown_grace_s)
            if self.repair is not None:
                self.repair.stop()
            if self.publisher is not None:
                self.publisher.close()
            if self.eswitch_modes is not None:
                self.eswitch_modes.close()
            if self.http is not None:
                self.http.stop()
            if self._api is not None:
                self._api.close()
                self._api = None

    def run(self) -> int:
        """Start, serve until a signal or a hand-over, stop; return the exit status, or never after a
        hand-over (``rolling_update.ProcessEnd``). A stop signal pending across its exec is taken first."""
        rolling_update.catch_stop_signals(self._signalled)
        try:
            if not self.stop_event.is_set():
                self.start()
        except StartupError as exc:
            LOG.error("startup failed", extra={"op": "startup", "reason": str(exc)})
            self.stop()
            return EXIT_STARTUP_FAILED
        while not self.stop_event.wait(1.0):
            pass
        LOG.info("stopping", extra={"op": "shutdown"})
        self.stop()
        return self.ending.finish()  # after a hand-over: never returns

    def _signalled(self, signum: int, frame: FrameType | None) -> None:
        LOG.info("signal received", extra={"op": "shutdown", "signal": signal.Signals(signum).name})
        self.ending.signalled.set()
        self.stop_event.set()
        self.owner_stop.set()


def main(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    seams: PluginSeams = PRODUCTION,
) -> int:
    """Parse settings, configure logs and run the plugin; return the process exit status.

    ``seams``: :data:`PRODUCTION` for the shipped entrypoint; a launcher passes its own
    (:class:`PluginSeams`), and every replaced seam is logged as a warning at startup.
    """
    environ = dict(os.environ if env is None else env)
    try:
        config = settings.parse(list(sys.argv[1:] if argv is None else argv), environ)
    except settings.SettingsError as exc:
        print(f"sriov-dra-plugin: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    logs.configure(config.log_format, config.log_level)
    LOG.info("settings", extra={"op": "startup", **config.as_log_fields()})
    replaced = [
        name
        for name, value in (("kernel", seams.kernel), ("eswitch_modes", seams.eswitch_modes))
        if value is not None
    ] + (["fault"] if seams.fault is not faults.NO_FAULTS else [])
    if replaced:
        LOG.warning(
            "seams replaced by the launcher (not the shipped entrypoint)",
            extra={"op": "startup", "reason": ", ".join(replaced)},
        )
    fresh = rolling_update.fresh_after_hand_over(os.environ)  # the process's own, whatever ``env``
    return Plugin(config, seams=seams, fresh_after_hand_over=fresh).run()
