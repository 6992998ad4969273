"""The `kafka-dissect` command (also `python -m dissector`).

Subcommands live in dissector/commands/ (the core ones) and in other packages that register a
`kafka_dissector.commands` entry point (the analysis layer's records, stats, report, export and
spark), so the core never imports them. Each command module has `add_parser(sub)` and
`run(args) -> int`.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
from importlib import import_module

# numpy (under pyarrow) starts OpenBLAS's thread pool at import, whose threads spin for a while:
# 0.1 s of CPU a process (each worker too) for linear algebra no command does. A user's own
# setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import __version__, framebuf   # noqa: E402
from .gc_pace import pace_process
from .text_safety import escape, fit_stdout

CORE_COMMANDS = ("read", "apis", "tree", "browse", "live")
ENTRY_POINT_GROUP = "kafka_dissector.commands"
# The plug-ins' one-line help, for the listing of `kafka-dissect --help` without importing them
# (they load pandas: a second or more); the plug-ins give their own parsers the same text.
PLUGIN_HELP = {
    "export": "write the analysis tables of captures as Parquet",
    "records": "list every record produced or fetched in captures",
    "report": "write an HTML report with latency, error and lag plots",
    "spark": "dissect many captures on Spark into Parquet tables",
    "stats": "latency, error, consumer and producer statistics as tables",
}


class UsageError(Exception):
    """A problem with what the user asked for or gave us: one line, exit status 2."""


def _requested(argv) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_commands(sub, wanted) -> None:
    """A command is imported only when it is the one asked for, or when none is (for the help
    listing): plug-ins pull in pandas and pyarrow, too slow to load for every `read`, and the
    other core commands cost ~10 ms of a run. The others are listed by name (plug-ins not even
    that when a core command is asked for)."""
    for name in CORE_COMMANDS:
        if wanted in (name, None) or wanted not in CORE_COMMANDS:
            import_module(f"dissector.commands.{name}").add_parser(sub)
        else:
            sub.add_parser(name, add_help=False)
    if wanted in CORE_COMMANDS:
        return   # reading the installed entry points costs 30-70 ms a run: only when needed
    if wanted in PLUGIN_HELP:   # ours (in the same distribution): imported by name, as above
        _plugin(wanted, lambda: import_module(f"analysis.commands.{wanted}"), sub)
        return
    from importlib.metadata import entry_points
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in CORE_COMMANDS:
            continue
        if ep.name == wanted:
            _plugin(ep.name, ep.load, sub)
            continue
        summary = PLUGIN_HELP.get(ep.name, f"(see kafka-dissect {ep.name} --help)")
        sub.add_parser(ep.name, help=summary, add_help=False)


def _plugin(name, load, sub) -> None:
    """The parser of plug-in command `name`, whose module load() imports."""
    try:
        module = load()
    except ImportError as exc:
        raise UsageError(f"the {name!r} command needs a package that is not installed "
                         f"({exc.name}); install kafka-dissector with its extras") from None
    module.add_parser(sub)


def _formatter(prog):
    """argparse's help formatter for the terminal's width, found as shutil would find it:
    argparse's own asks shutil, which (with bz2 and lzma) every run would then load, 2 ms."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return argparse.HelpFormatter(prog, width=columns - 2)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser with _formatter; the subcommands' parsers are made of the same class."""

    def __init__(self, *args, formatter_class=_formatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def build_parser(argv=()) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kafka-dissect",
        description="Dissect and analyse Apache Kafka wire-protocol traffic.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_commands(sub, _requested(argv))
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    fit_stdout()
    pace_process()
    framebuf.keep_freed_memory()
    try:
        parser = build_parser(argv)
    except UsageError as exc:
        print(f"kafka-dissect: error: {escape(str(exc))}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"kafka-dissect: error: {escape(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kafka-dissect: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # output piped into `head`: not an error
        # what is still buffered for stdout would fail again at exit (status 1): it goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno not in _MACHINE or args.debug:
            return _internal(args, exc)
        # the machine's, not a bug: a full disk, no permission, a directory that is not there
        where = f": {exc.filename}" if exc.filename else ""
        print(f"kafka-dissect: error: {escape(exc.strerror or str(exc))}{escape(where)}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # an escaped exception is a bug: one line, not a traceback
        return _internal(args, exc)


_MACHINE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EACCES, errno.EPERM,
            errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
            errno.ENAMETOOLONG, errno.EMFILE, errno.ENFILE}


def _internal(args, exc) -> int:
    if args.debug:
        raise exc
    print(f"kafka-dissect: internal error: {type(exc).__name__}: {escape(str(exc))} "
          "(run with --debug for details, and please report it)", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
