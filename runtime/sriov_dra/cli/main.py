"""The sriov-dra command: admin subcommands, and those other installed distributions register.

Owns argument parsing and the mapping of subcommands to their modules; failures exit non-zero
with a one-line actionable message, no traceback for expected errors. A distribution registers a
subcommand as an entry point in :data:`COMMANDS_GROUP`, called ``run(argv, inspector=...,
log_level=...)`` and returning the exit status (the lab registers ``lab``). The group is listed
without loading anything, so ``--help`` and the admin commands import nothing of the lab;
without the lab, ``sriov-dra lab`` says how to install it (exit 2).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Final

from kubernetes.config import ConfigException

from sriov_dra.kube import errors as kube_errors

COMMANDS_GROUP: Final = "sriov_dra.cli_commands"
"""The entry-point group of subcommands other distributions register (the lab's ``lab``)."""

LAB_NOT_INSTALLED: Final = (
    "the lab is not installed: it is the separate distribution sriov-dra-lab (lab/ in the "
    "repository, never in the image); install it next to sriov-dra with `pip install -e ./lab` "
    "(make setup does)"
)


DESCRIPTION: Final = (
    "The sriov-dra command: admin subcommands, and those other installed distributions register."
)
"""The ``--help`` summary (not ``__doc__``: the image runs Python with ``PYTHONOPTIMIZE=2``, no docstrings)."""


def _registered() -> dict[str, metadata.EntryPoint]:
    """The subcommands other installed distributions register, by name (nothing is imported)."""
    return {ep.name: ep for ep in metadata.entry_points(group=COMMANDS_GROUP)}


def _registered_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    found = _registered()
    for name, ep in sorted(found.items()):
        dist = ep.dist.name if ep.dist is not None else "an installed distribution"
        parser = sub.add_parser(
            name,
            add_help=False,  # the registered command parses (and helps with) its own arguments
            help=f"registered by {dist}; `sriov-dra {name} --help` for its commands",
        )
        parser.set_defaults(registered=ep)
    if "lab" not in found:
        lab = sub.add_parser("lab", add_help=False, help="the local lab (not installed: sriov-dra-lab)")
        lab.set_defaults(registered=None, func=_lab_missing)


def _lab_missing(_args: argparse.Namespace) -> int:
    print(f"sriov-dra lab: {LAB_NOT_INSTALLED}", file=sys.stderr)
    return 2


def _run_registered(ep: metadata.EntryPoint, argv: list[str], args: argparse.Namespace) -> int:
    """Load ``ep`` and run it on the arguments after its name (the module docstring's contract)."""
    from sriov_dra.cli import inspect

    tail = argv[argv.index(args.command) + 1 :]
    status: int = ep.load()(tail, inspector=inspect.Inspector, log_level=args.log_level)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (also used by the tests)."""
    parser = argparse.ArgumentParser(prog="sriov-dra", description=DESCRIPTION)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True)

    from sriov_dra.cli import inspect, orphans, preflight, recover_node

    inspect.add_parser(sub)
    orphans.add_parser(sub)
    preflight.add_parser(sub)
    recover_node.add_parser(sub)
    _registered_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sriov-dra``; returns the process exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(words)
    registered: metadata.EntryPoint | None = getattr(args, "registered", None)
    if unknown and not hasattr(args, "registered"):  # a registered command parses its own
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if registered is not None:
            return _run_registered(registered, words, args)
        status: int = args.func(args)
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
