"""The `gavel-ng` command: one subcommand a module, each with add_parser() and run()."""

from __future__ import annotations

import argparse
import logging
import sys

from ..errors import InputError
from ..logs import IsoFormatter
from . import (
    logs_cmd,
    plot_cmd,
    policies_cmd,
    profiles_cmd,
    report_cmd,
    scheduler_cmd,
    simulate_cmd,
    solve_cmd,
    status_cmd,
    submit_cmd,
    sweep_cmd,
    user_cmd,
    worker_cmd,
)

# top-level modules of optional dependencies -> the smallest extra of pyproject.toml that installs them (a
# command that declares its own extra, `set_defaults(extra=...)`, names that one instead)
EXTRAS = {"grpc": "scheduler", "grpc_tools": "scheduler", "grpc_health": "scheduler", "google": "scheduler",
          "prometheus_client": "scheduler", "torch": "worker", "pynvml": "worker", "ray": "sweep"}

SERVICES = ("scheduler", "worker")     # their log lines carry timestamps
COMMANDS = (solve_cmd, policies_cmd, profiles_cmd, simulate_cmd, scheduler_cmd, worker_cmd, submit_cmd, status_cmd,
            logs_cmd, report_cmd, user_cmd, sweep_cmd, plot_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gavel-ng",
        description="Heterogeneity-aware scheduling for mixed-GPU deep-learning clusters.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    _verbose_everywhere(sub, depth=1)
    return parser


def _verbose_everywhere(sub: argparse._SubParsersAction, depth: int) -> None:
    """-v after a subcommand too (`gavel-ng worker ... -v`). Each level counts into its own dest:
    a subparser's default would otherwise overwrite the count parsed before it; main() adds them."""
    for p in set(sub.choices.values()):
        p.add_argument("-v", "--verbose", action="count", default=0, dest=f"verbose_{depth}",
                       help="more logging (-vv for debug); counts with the -v before the command")
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                _verbose_everywhere(action, depth + 1)


def verbosity(args: argparse.Namespace) -> int:
    """-v given anywhere on the command line, counted together."""
    return sum(v for k, v in vars(args).items() if k == "verbose" or k.startswith("verbose_"))


def version() -> str:
    """The installed distribution's version, else (running from a source tree) the package's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("gavel-ng")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity(args), 2)]
    handler = logging.StreamHandler(sys.stderr)
    if args.command in SERVICES:     # long-running: every line says when (ISO 8601, local time with offset)
        handler.setFormatter(IsoFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    try:
        return int(args.run(args) or 0)
    except InputError as exc:
        print(f"gavel-ng {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        extra = getattr(args, "extra", None) or extra
        print(f"gavel-ng {args.command}: needs the '{extra}' extra (missing module {exc.name}): "
              f"pip install 'gavel-ng[{extra}]'", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `gavel-ng profiles list | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
