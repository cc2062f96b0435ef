"""What the lab shows a person at the keyboard: the start with progress, the hints, the hold.

Owns ``sriov-dra lab up`` (the whole :class:`~sriov_dra_lab.stack.LabStack` the demo runs, with
no example applied; ``--bare``: only the control plane, the Node objects and the synthetic GPU
slices), the start sequence ``lab demo`` shares with it (work directory reset, one line per role,
ready line), the hint blocks (``KUBECONFIG``, kubectl from the build cache, example commands,
where the logs are) and the hold until Enter. Never applies a workload and never decides a
verdict (that is :mod:`~sriov_dra_lab.demo`).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sriov_dra.kube import apply
from sriov_dra_lab import (
    binaries,
    control_plane,
    images,
    iproute,
    lab_dir,
    paths,
    processes,
    real_node,
    real_stack,
    roles,
    session,
    stack,
    stack_base,
    topology,
)
from sriov_dra_lab.nodes import SimulatedNode

REPO = paths.REPO
PAIRS_EXAMPLE = Path("examples") / "gpu-nic-pairs" / "multus-auto-gpu-nic-pairs.yaml"
ONE_NETWORK_EXAMPLE = Path("examples") / "one-network-deviceclass"
OPERATOR_EXAMPLE = Path("examples") / "operator-two-rails"
PAIRS_POD = ("ai-workloads", "gpu-sriov-pairs-demo")
NO_HOLD = "--no-hold: the lab started and stops now (no commands to try; drop --no-hold to keep it running)"


def say(text: str) -> None:
    """Print one progress line at once."""
    print(text, flush=True)


def sriov_dra_command() -> str:
    """The ``sriov-dra`` of this interpreter's environment (``<venv>/bin/sriov-dra``)."""
    return str(Path(sys.executable).parent / "sriov-dra")


def log_places(workdir: Path) -> str:
    """One line naming where every log of a lab in ``workdir`` is."""
    logs = workdir / stack_base.LOGS_DIR
    return (
        f"Component logs: {logs}/ (controlplane/<component>.log and audit.log, <node>/<service>.log, "
        f"operator.log); roles: {workdir}/ansible/ansible-*.log; on real nodes the roles' Pods (plugin, "
        f"guard, Multus, operator): kubectl logs, or {workdir}/nodes/<node>/fs/var/log/pods/"
    )


def netns_command(lab: stack.LabStack, namespace: str, name: str) -> str:
    """A shell expression printing the network namespace path of Pod ``namespace/name`` on ``lab``.

    Shapes: on real nodes, ``/proc/<pause pid>/ns/net`` of the Pod's ready sandbox, found as
    :func:`~sriov_dra_lab.real_stack.sandbox_netns` finds it (``crictl pods`` by Pod UID, then
    ``crictl inspectp``) inside the mount namespace of the node ``kubectl`` reports
    (``<workdir>/nodes/<node>/ns/mnt``). The kubelet simulator names a sandbox
    ``sdl<lab id>-<first 8 of the Pod UID>-<hex>`` under :data:`~sriov_dra_lab.iproute.NETNS_DIR`.
    """
    if lab.nodes and isinstance(lab.nodes[0].layout, real_stack.RealNodeLayout):
        return _real_netns_command(lab.workdir, namespace, name)
    uid = f"kubectl -n {namespace} get pod {name} -o jsonpath='{{.metadata.uid}}' | cut -c1-8"
    return f'"$(ls -d {iproute.NETNS_DIR}/sdl{lab.lab_id}-$({uid})-*)"'


def _real_netns_command(workdir: Path, namespace: str, name: str) -> str:
    where = f"kubectl -n {namespace} get pod {name} -o jsonpath='{{.spec.nodeName}} {{.metadata.uid}}'"
    crictl = (
        f"nsenter --mount={workdir.resolve()}/nodes/$1/ns/mnt {binaries.find('crictl')} "
        f"--runtime-endpoint={real_node.RUNTIME_ENDPOINT}"
    )
    # 2>/dev/null: crictl warns on stderr that it has no /etc/crictl.yaml
    sandbox = f"$({crictl} pods -q --state=ready --label=io.kubernetes.pod.uid=$2 2>/dev/null)"
    template = "'/proc/{{.info.pid}}/ns/net'"
    return f'"$(set -- $({where}); {crictl} inspectp -o go-template --template {template} {sandbox} 2>/dev/null)"'


def orphans_command(lab: stack.LabStack, node: str) -> str:
    """``sriov-dra orphans`` for the plugin checkpoint of ``node`` (a name, or ``<node>``)."""
    # The node's own layout (a real node's checkpoint is the DaemonSet's, under the kubelet's plugins dir).
    kind = type(lab.nodes[0].layout) if lab.nodes else topology.NodeLayout
    layout = next((n.layout for n in lab.nodes if n.name == node), None) or kind.for_node(
        lab.workdir, lab.lab_id, node, 0
    )
    checkpoint = layout.plugin_state_dir / "checkpoint.json"
    return f"{sriov_dra_command()} orphans --node {node} --checkpoint {checkpoint}"


def _environment(kubeconfig: Path) -> list[str]:
    kubectl = binaries.find("kubectl")
    return [
        f"export KUBECONFIG={kubeconfig}",
        f"export PATH={kubectl.parent}:$PATH    # kubectl {kubectl} (the build cache)",
    ]


def removal_commands(files: Sequence[Path]) -> list[str]:
    """The kubectl command that removes an example applied from ``files``: ``kubectl delete -f`` on them.

    No example lists a namespace the roles create (the plugin's, the operator's), so deleting an
    example's files removes only the example. Shapes: ``files`` relative to the repository.
    """
    return ["kubectl delete " + " ".join(f"-f {f}" for f in files)]


def preflight_commands(lab: stack.LabStack) -> list[str]:
    """The preflight against the lab: the CLI inside a node's namespaces, from the host, and the playbook.

    With the plugins on the operator's namespace the CLI checks policies there (``--policy-namespace``);
    the node checks are told the lab's Multus mode (``--multus-mode``; the playbook reads the
    inventory's ``multus_mode``) and, for plugin processes, where they write their checkpoint
    (``--plugin-checkpoint``; the inventory's ``preflight_plugin_checkpoint``).

    The CLI's node checks read the machine it runs on (``/opt/cni/bin``, ``/etc/cni/net.d``): on
    the lab that is a node's mount and network namespaces, entered with ``nsenter``.
    """
    sriov = sriov_dra_command()
    kubeconfig = lab.cp.kubeconfig
    target = f"--kubeconfig {kubeconfig}"
    if lab.nodes and lab.nodes[0].policy_namespace != stack_base.POLICY_NAMESPACE:
        target += f" --policy-namespace {lab.nodes[0].policy_namespace}"
    lines: list[str] = []
    if lab.nodes:
        layout = lab.nodes[0].layout
        # a plugin process writes its checkpoint in the lab's state directory, which the guard reads
        node = (
            ""
            if lab.plugin_as_daemonset
            else f" --plugin-checkpoint {layout.plugin_state_dir / 'checkpoint.json'}"
        )
        lines.append(
            f"nsenter --mount={layout.mountns_file} --net={layout.netns_path} "
            f"{sriov} preflight {target} --multus-mode {lab.options.multus_mode}{node}    # on node {layout.name} (root)"
        )
    lines.append(f"{sriov} preflight {target} --no-node-checks    # cluster checks only, from the host")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    ansible = lab.workdir / "ansible"  # the roles' work directory (roles.collections_path, inventory)
    lines.append(
        f"K8S_AUTH_KUBECONFIG={kubeconfig} ANSIBLE_COLLECTIONS_PATH={ansible / 'collections'} "
        f"{playbook} sriovnet.dra.preflight -i {ansible / 'inventory.yml'}"
    )
    return lines


def lab_hints(lab: stack.LabStack) -> str:
    """What ``lab up`` prints once the lab runs: the environment, example commands, the logs.

    With the plugins on the operator's namespace (``--operator-managed``) the example is
    ``examples/operator-two-rails`` (never combined with ``examples/gpu-nic-pairs``).
    """
    namespace, pod = PAIRS_POD
    sriov = sriov_dra_command()
    operator_managed = bool(lab.nodes) and lab.nodes[0].policy_namespace == stack_base.OPERATOR_NAMESPACE
    if operator_managed:
        files = [OPERATOR_EXAMPLE / "workload.yaml", OPERATOR_EXAMPLE / "sriov-networks-and-policies.yaml"]
        apply = [f"kubectl apply -f {f}" for f in files]
        after = "then lab up without --operator-managed for the other examples"
    else:
        files = [PAIRS_EXAMPLE]
        apply = [f"kubectl apply -f {PAIRS_EXAMPLE}"]
        after = f"then another example, e.g. {ONE_NETWORK_EXAMPLE}/"
    node = lab.nodes[0].name if lab.nodes else "lab-node-1"
    lines = [
        f"lab up: running, nothing applied yet (control plane {lab.cp.server}, "
        f"nodes {', '.join(n.name for n in lab.nodes)}). In another shell, from {REPO}:",
        *_environment(lab.cp.kubeconfig),
        *apply,
        f"kubectl -n {namespace} get pod {pod} -o wide    # Running after ~10 s",
        f"kubectl -n {namespace} exec {pod} -- ip -o -f inet addr show    # dra0/dra1 with the rails' addresses",
        f"{sriov} inspect {pod} -n {namespace} --netns {netns_command(lab, namespace, pod)}",
        f"{orphans_command(lab, '<node>')}    # <node>: the Pod's, e.g. {node}",
        f"# to remove the example (it leaves the plugin and the guard running), {after}:",
        *removal_commands(files),
        "# the preflight against the lab (node checks inside a node's namespaces; or the playbook):",
        *preflight_commands(lab),
    ]
    if not operator_managed:
        lines.append(
            "(examples/operator-two-rails/ needs the plugins on the operator's namespace: "
            "lab up --operator-managed)"
        )
    return "\n".join([lines[0], *(f"  {line}" for line in lines[1:]), log_places(lab.workdir)])


def pod_hints(lab: stack.LabStack, namespace: str, name: str, *, node: str, netns: str | None) -> str:
    """What ``demo --hold`` prints at its pause: the Pod's netns and the commands to look at it."""
    sriov = sriov_dra_command()
    where = netns or netns_command(lab, namespace, name)
    lines = [
        f"The lab keeps running with Pod {namespace}/{name} on {node}, network namespace:",
        f"{netns or 'unknown'}",
        "In another shell:",
        *_environment(lab.cp.kubeconfig),
        f"{sriov} inspect {name} -n {namespace} --netns {where}    # the table above (IPs from netns, with prefix)",
        f"kubectl -n {namespace} get pod {name} -o yaml",
        f"kubectl -n {namespace} get network-attachment-definitions,resourceclaims",
        f"kubectl -n {namespace} get resourceclaims -o yaml    # status.devices[].networkData: each VF's interface, IPs, MAC",
        "kubectl get resourceslices",
        orphans_command(lab, node),
    ]
    return "\n".join([*lines[:3], *(f"  {line}" for line in lines[3:]), log_places(lab.workdir)])


def hold(prompt: str) -> float:
    """Print ``prompt`` and wait for Enter; return the seconds waited.

    With stdin closed (EOF at once) it waits for SIGINT/SIGTERM instead of returning at once.
    Units: seconds. Raises: ``KeyboardInterrupt`` on Ctrl-C (and SIGTERM where the CLI maps it).
    """
    start = time.monotonic()
    say(prompt)
    if not sys.stdin.readline():
        say("(stdin is closed: holding until Ctrl-C or SIGTERM)")
        while True:
            signal.pause()
    return time.monotonic() - start


def start(
    workdir: Path,
    *,
    multus_mode: str = "thin",
    nodes: int = 2,
    operator_managed: bool = False,
    real_nodes: bool = False,
) -> stack.LabStack | None:
    """Start the whole lab in ``workdir`` (reset first) with progress lines; ``None`` when it cannot.

    ``operator_managed`` restarts the plugins on the operator's namespace afterwards (the
    operator-two-rails example);
    ``real_nodes`` runs real kubelets and containerd (each node's versions are printed).
    Returns: the running lab (the caller stops it), or ``None`` after printing one ``FAIL`` line
    (roles failed, machine cannot host the lab; everything started is stopped already).
    Raises: ``binaries.BinaryMissing`` / ``processes.ProcessFailed`` when a component cannot start.
    """
    began = time.monotonic()
    lab_dir.hold(workdir)  # before the reset; the lab keeps it until its stop (a failed start: until exit)
    for line in lab_dir.reset_workdir(workdir):
        say(f"    cleaned up a previous run: {line}")
    kind = "real nodes (kubelet + containerd)" if real_nodes else "nodes"
    say(
        f"== starting the lab in {workdir} (control plane, {nodes} {kind} x 2 rails, plugins, guards, "
        f"Multus {multus_mode}, whereabouts, operator)"
    )
    lab = stack.LabStack(
        stack_base.LabOptions(workdir=workdir, nodes=nodes, multus_mode=multus_mode, real_nodes=real_nodes)
    )
    try:
        lab.start()
    except roles.PlaybookFailed as exc:
        say(f"FAIL: the collection's roles failed on the lab: {exc}")
        return None
    except (topology.TopologyError, iproute.IpError, images.ImageError) as exc:
        say(f"FAIL: the lab cannot start on this machine: {exc}")
        return None
    try:
        say(
            f"    installed through the collection's roles (playbooks/lab.yml, logs {lab.workdir / 'ansible'}/ansible-*.log):"
        )
        for summary in lab.role_summaries:
            say(f"      {summary.line()}")
        for node in lab.nodes:
            if node.real is not None:
                kubelet, runtime = node.real_versions()
                say(
                    f"    {node.name}: kubelet {kubelet}, {runtime}, Ready {node.real.ready_after_s:.1f} s "
                    "after launch"
                )
        if real_nodes:
            say(
                f"    the roles' workloads (plugin, guard, operator) run image {lab.workload_image().reference}, "
                "Multus the Multus image of its mode; each Pod and the image it runs:"
            )
            for line in real_stack.workload_images(lab.api):
                say(f"      {line}")
        if operator_managed:
            say(f"    plugins on the operator's namespace {stack_base.OPERATOR_NAMESPACE} (operator-managed)")
            lab.switch_plugin_policy_namespace(stack_base.OPERATOR_NAMESPACE)
        say(f"    ready in {time.monotonic() - began:.0f} s; KUBECONFIG={lab.cp.kubeconfig}")
    except BaseException:
        lab.stop()
        raise
    return lab


def up(
    *,
    workdir: Path,
    multus_mode: str = "thin",
    nodes: int = 2,
    operator_managed: bool = False,
    wait: bool = True,
    real_nodes: bool = False,
) -> int:
    """``sriov-dra lab up``: start the whole lab, print :func:`lab_hints`, hold until Enter or Ctrl-C, stop.

    ``real_nodes`` (``--node-kind real``): the nodes are real kubelets with containerd.

    Returns: 0 after a clean stop, 2 when the lab cannot start (the reason printed).
    Raises: as :func:`start`.
    """
    lab = start(
        workdir,
        multus_mode=multus_mode,
        nodes=nodes,
        operator_managed=operator_managed,
        real_nodes=real_nodes,
    )
    if lab is None:
        return 2
    try:
        if wait:
            say(lab_hints(lab))
            _hold_until_stop()
        else:
            say(NO_HOLD)
    finally:
        say(f"== stopping the lab (logs stay in {lab.logs_dir})")
        lab.stop()
    say("lab stopped")
    return 0


def up_bare(*, workdir: Path, nodes: int = 2, wait: bool = True) -> int:
    """``sriov-dra lab up --bare``: the control plane, ``nodes`` Node objects and synthetic GPU slices only.

    Same work directory layout as the whole lab (``controlplane/``, ``logs/controlplane/``); no
    plugin, no CRD of the collection, so the examples cannot be applied. Needs no root.
    Returns: 0 after a clean stop. Raises: ``binaries.BinaryMissing`` / ``ProcessFailed``.
    """
    path = workdir.resolve()
    lab_dir.hold(path)  # before the reset, until the stop: lab down and another lab up refuse the directory
    for line in lab_dir.reset_workdir(path):
        say(f"    cleaned up a previous run: {line}")
    cp = control_plane.ControlPlane(
        control_plane.ControlPlaneSettings(
            workdir=path / "controlplane",
            keep_workdir=True,
            logs_dir=path / stack_base.LOGS_DIR / "controlplane",
        )
    )
    sims: list[SimulatedNode] = []
    api = None
    try:
        cp.start()
        api = cp.api()
        labels = session.NODE_LABELS
        for name in session.node_names(nodes):
            sims.append(SimulatedNode(api, name, labels={**labels, "kubernetes.io/hostname": name}).start())
        apply.apply_objects(api, [session.gpu_device_class(), *(session.gpu_slice(n.name) for n in sims)])
        say(
            f"lab up --bare: control plane {cp.server}, Node objects {', '.join(n.name for n in sims)} "
            "(no plugin, no CRDs: for the examples run lab up without --bare)"
        )
        if wait:
            say("\n".join(f"  {line}" for line in _environment(cp.kubeconfig)))
            say(f"Component logs: {path / stack_base.LOGS_DIR / 'controlplane'}/")
            _hold_until_stop()
        else:
            say(NO_HOLD)
    finally:
        with processes.signals_deferred():
            for sim in sims:
                sim.stop()
            if api is not None:
                api.close()
            cp.stop()
            lab_dir.release(path)
    say("lab stopped")
    return 0


def _hold_until_stop() -> None:
    """:func:`hold` where Ctrl-C means "stop now" (a clean stop, not an interruption)."""
    try:
        hold("Press Enter (or Ctrl-C) to stop the lab.")
    except KeyboardInterrupt:
        say("")
