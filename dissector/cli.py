"""The `kafka-dissect` command (also `python -m dissector`).

Subcommands live in dissector/commands/ (the core ones) and in other distributions or packages
that register a `kafka_dissector.commands` entry point (the analysis layer's stats, report,
export and spark), so the core never imports them. Each command module has `add_parser(sub)`
and `run(args) -> int`.
"""
from __future__ import annotations

import argparse
import sys
from importlib import import_module
from importlib.metadata import entry_points

from . import __version__

CORE_COMMANDS = ("read", "apis", "tree", "live")
ENTRY_POINT_GROUP = "kafka_dissector.commands"


class UsageError(Exception):
    """A problem with what the user asked for or gave us: one line, exit status 2."""


def _command_modules():
    modules = []
    for name in CORE_COMMANDS:
        try:
            modules.append(import_module(f"dissector.commands.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"dissector.commands.{name}":
                raise
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            modules.append(ep.load())
        except ImportError:
            continue   # its optional dependencies are not installed: the command is not offered
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-dissect",
        description="Dissect and analyse Apache Kafka wire-protocol traffic.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _command_modules():
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"kafka-dissect: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kafka-dissect: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        sys.stderr.close()   # output piped into `head`: not an error
        return 0
    except Exception as exc:  # an escaped exception is a bug: one line, not a traceback
        if args.debug:
            raise
        print(f"kafka-dissect: internal error: {type(exc).__name__}: {exc} "
              "(run with --debug for details, and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
