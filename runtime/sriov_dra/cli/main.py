"""The sriov-dra command: admin and lab subcommands.

Owns argument parsing and the mapping of subcommands to the modules that implement them. Exits
non-zero with a one-line actionable message on failure; never prints a traceback for expected
errors (missing binaries, a component that did not start).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kubernetes.config import ConfigException

from sriov_dra.kube import errors as kube_errors
from sriov_dra.lab import binaries, processes


def _lab_up(args: argparse.Namespace) -> int:
    from sriov_dra.lab import session

    return session.up(workdir=args.workdir, nodes=args.nodes, hold=not args.no_hold)


def _lab_demo(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC's fork notices would interleave with the table
    if args.log_level != "DEBUG":  # the demo prints its own progress; component logs are in the work dir
        logging.getLogger("sriov_dra").setLevel(logging.WARNING)
        # The client library resets urllib3's level per configuration; a filter survives that.
        logging.getLogger("urllib3.connectionpool").addFilter(lambda record: record.levelno >= logging.ERROR)
    from sriov_dra.cli import inspect
    from sriov_dra.lab import demo

    return demo.run(
        workdir=Path(args.workdir).resolve(),
        inspector=inspect.Inspector(),
        multus_mode=args.multus,
        hold=args.hold,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (also used by the tests)."""
    parser = argparse.ArgumentParser(prog="sriov-dra", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True)

    lab = sub.add_parser("lab", help="the local lab: a real control plane and simulated SR-IOV nodes")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True)
    up = lab_sub.add_parser(
        "up", help="start the control plane and the simulated nodes, print how to reach them"
    )
    up.add_argument("--workdir", default=".lab", help="where PKI, logs and kubeconfig go (default: .lab)")
    up.add_argument("--nodes", type=int, default=2, help="number of simulated nodes (default: 2)")
    up.add_argument("--no-hold", action="store_true", help="stop again right after a successful start")
    up.set_defaults(func=_lab_up)
    demo = lab_sub.add_parser(
        "demo",
        help="the main job: the spec §14 examples end to end, the correlation table, a PASS/FAIL verdict",
    )
    demo.add_argument("--workdir", default=".lab", help="where PKI, logs and node files go (default: .lab)")
    demo.add_argument(
        "--multus", choices=["thin", "thick"], default="thin", help="Multus mode (default: thin)"
    )
    demo.add_argument(
        "--hold",
        action="store_true",
        help="pause with the §14.2 Pod running (and commands to inspect it) until Enter",
    )
    demo.set_defaults(func=_lab_demo)
    from sriov_dra.cli import inspect, orphans, preflight

    inspect.add_parser(sub)
    orphans.add_parser(sub)
    preflight.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sriov-dra``; returns the process exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        status: int = args.func(args)
    except binaries.BinaryMissing as exc:
        print(f"sriov-dra: {exc}", file=sys.stderr)
        return 2
    except processes.ProcessFailed as exc:
        print(f"sriov-dra: {exc}", file=sys.stderr)
        return 1
    except ConfigException as exc:
        print(
            f"sriov-dra: no usable kubeconfig ({exc}); pass --kubeconfig FILE or set KUBECONFIG",
            file=sys.stderr,
        )
        return 2
    except kube_errors.ApiError as exc:
        print(f"sriov-dra: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # cleanup ran in the subcommand's finally blocks
        print("sriov-dra: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
