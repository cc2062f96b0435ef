"""``sriov-dra lab``: the lab's subcommand, registered by this distribution with the product's CLI.

``lab/pyproject.toml`` declares the entry point ``lab = "sriov_dra_lab.cli:run"`` in the group
``sriov_dra.cli_commands``; ``sriov_dra.cli.main`` lists that group without importing it (so
``sriov-dra --help`` and ``sriov-dra inspect`` import nothing from the lab) and calls :func:`run`
only for ``sriov-dra lab ...``. Where the lab is not installed (the image), ``sriov-dra lab`` says
how to install it.

Owns the ``up``/``demo``/``down`` arguments (``--node-kind real|simulated`` on ``up`` and
``demo``, real by default, the simulator by flag; ``down`` removes what a killed lab left) and the
lab's expected failures (a missing pinned binary exits 2, a component that did not start exits 1,
each with a one-line message and no traceback).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sriov_dra_lab import binaries, demo, lab_dir, processes


def _quiet_lab(args: argparse.Namespace) -> None:
    """Keep a lab command's terminal to its own progress lines; component logs are in the work dir.

    Silences the readiness polls' connection-refused retries (urllib3 WARNINGs): the client
    library resets urllib3's level per configuration, a filter survives that. SIGTERM stops the
    lab like Ctrl-C (its cleanup runs). SIGINT gets the same handler explicitly: a shell starts an
    ``&`` job of a non-interactive script with SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler of its own, so ``kill -INT`` would not stop such a lab.
    """
    import os
    import signal

    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC's fork notices would interleave with the output
    if args.log_level != "DEBUG":
        for name in ("sriov_dra", "sriov_dra_lab"):  # the product's and the lab's own progress logs
            logging.getLogger(name).setLevel(logging.WARNING)
        logging.getLogger("urllib3.connectionpool").addFilter(lambda record: record.levelno >= logging.ERROR)

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def _lab_up(args: argparse.Namespace) -> int:
    from sriov_dra_lab import console

    if args.bare and args.node_kind == "real":
        print(
            "sriov-dra: lab up --bare makes Node objects only; drop --bare or --node-kind real",
            file=sys.stderr,
        )
        return 2
    _quiet_lab(args)
    workdir = Path(args.workdir).resolve()
    if args.bare:  # Node objects only: no kubelet of either kind
        return console.up_bare(workdir=workdir, nodes=args.nodes, wait=not args.no_hold)
    return console.up(
        workdir=workdir,
        multus_mode=args.multus,
        nodes=args.nodes,
        operator_managed=args.operator_managed,
        wait=not args.no_hold,
        real_nodes=args.node_kind in ("real", None),
    )


def _lab_demo(args: argparse.Namespace) -> int:
    _quiet_lab(args)
    return demo.run(
        workdir=Path(args.workdir).resolve(),
        inspector=args.inspector(),
        multus_mode=args.multus,
        hold=args.hold,
        real_nodes=args.node_kind == "real",
    )


def _lab_down(args: argparse.Namespace) -> int:
    from sriov_dra_lab import lab_dir

    workdir = Path(args.workdir).resolve()
    removed = lab_dir.down(workdir)
    for line in removed:
        print(f"    {line}", flush=True)
    print(f"lab down: {'removed what a stopped lab left' if removed else 'nothing left'} in {workdir}")
    return 0


def build_parser(prog: str = "sriov-dra lab") -> argparse.ArgumentParser:
    """The parser of ``sriov-dra lab`` (``up``, ``demo``; also used by the tests)."""
    lab = argparse.ArgumentParser(
        prog=prog,
        description=(
            "The local lab on this machine (needs root). Every lab command uses one work directory (default "
            ".lab): controlplane/, nodes/<node>/, ansible/, and every component log under logs/."
        ),
    )
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, metavar="{up,demo,down}")
    up = lab_sub.add_parser(
        "up",
        help="start the whole lab (control plane, nodes, roles, plugins, guards, Multus, operator) "
        "without the examples, print KUBECONFIG, kubectl and commands to try, stop on Enter "
        "(--bare: control plane and Node objects only)",
        description=(
            "Start the same lab `lab demo` runs (control plane, real nodes unless --node-kind simulated, playbooks/lab.yml "
            "through the roles, plugins, guards, Multus, operator) without applying any example; print "
            "KUBECONFIG, the kubectl of the build cache and commands to try (kubectl apply -f examples/..., "
            "sriov-dra inspect, sriov-dra orphans); stop everything on Enter or Ctrl-C."
        ),
    )
    _workdir(up)
    _multus(up)
    up.add_argument("--nodes", type=int, default=2, help="number of nodes (default: 2)")
    _node_kind(up, None, "real (simulated with --bare)")
    up.add_argument(
        "--operator-managed",
        action="store_true",
        help="plugins watch the operator's namespace (for examples/operator-two-rails)",
    )
    up.add_argument(
        "--bare",
        action="store_true",
        help="only the control plane, Node objects and synthetic GPU slices (no roles, plugins or CRDs)",
    )
    up.add_argument("--no-hold", action="store_true", help="stop again right after a successful start")
    up.set_defaults(func=_lab_up)
    demo = lab_sub.add_parser(
        "demo",
        help="the main job (make lab): the same lab, then the three examples end to end with their "
        "correlation tables, stop, one PASS/FAIL line (--hold: pause with a Pod running)",
        description=(
            "Start the lab, apply the three examples of examples/ (gpu-nic-pairs, one-network-deviceclass, "
            "operator-two-rails) one after the other, print each Pod's correlation table and checks, verify "
            "nothing is left after each deletion, stop the lab and print one PASS/FAIL line with the demo's time."
        ),
    )
    _workdir(demo)
    _multus(demo)
    demo.add_argument(
        "--hold",
        action="store_true",
        help="pause with the gpu-nic-pairs Pod running (and commands to inspect it) until Enter",
    )
    _node_kind(demo, "real", "real")
    demo.set_defaults(func=_lab_demo)
    down = lab_sub.add_parser(
        "down",
        help="remove what a lab killed without its stop left (processes, namespaces, mounts, links, cgroups)",
        description=(
            "Remove what a lab in the work directory left when it was killed before its stop: the "
            "processes in its real nodes' cgroups, the mounts under the work directory, its network "
            "namespaces, bridge and veths, its cgroups and its socket directory; only names carrying "
            "the lab id of <workdir>/lab.json. Logs and files stay. `lab up` and `lab demo` do the same first."
        ),
    )
    _workdir(down)
    down.set_defaults(func=_lab_down)
    lab.set_defaults(log_level="INFO")  # run() passes the CLI's --log-level
    return lab


def _workdir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", default=".lab", help="the lab's files and logs (default: .lab; replaced at start)"
    )


def _node_kind(parser: argparse.ArgumentParser, default: str | None, default_text: str) -> None:
    parser.add_argument(
        "--node-kind",
        choices=["real", "simulated"],
        default=default,
        help="real nodes (kubelet v1.36 + containerd per node) or simulated ones (a kubelet simulator); "
        f"default: {default_text}",
    )


def _multus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--multus", choices=["thin", "thick"], default="thin", help="Multus mode (default: thin)"
    )


def run(argv: Sequence[str], *, inspector: Callable[[], demo.Inspector], log_level: str = "INFO") -> int:
    """Run ``sriov-dra lab <argv>``; return the exit status.

    ``inspector`` builds ``sriov-dra inspect``'s correlator for the demo's tables (the CLI passes
    it: the lab does not import its sibling); ``log_level`` is the CLI's ``--log-level``.
    """
    args = build_parser().parse_args(list(argv))
    args.inspector, args.log_level = inspector, log_level
    try:
        status: int = args.func(args)
    except binaries.BinaryMissing as exc:
        print(f"sriov-dra: {exc}", file=sys.stderr)
        return 2
    except (processes.ProcessFailed, lab_dir.LabRunning) as exc:
        print(f"sriov-dra: {exc}", file=sys.stderr)
        return 1
    return status
