"""`kafka-dissect stats`: latency, errors, consumers and producers as tables (terminal text,
Markdown, CSV or JSON)."""
from __future__ import annotations

import errno
import sys

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import report_errors

from .options import add_analysis_options, load_from_args

FORMATS = ("text", "json", "csv", "markdown")


def add_parser(sub) -> None:
    p = sub.add_parser("stats", help=PLUGIN_HELP["stats"],
                       description="Dissect captures and print latency percentiles, the slowest "
                                   "exchanges, errors, consumer groups and lag, and producer "
                                   "throughput as tables: for the terminal (fitted to its width), "
                                   "as Markdown, as CSV blocks (a title row, a header row, the "
                                   "rows, an empty line) or as JSON (full precision).")
    add_analysis_options(p)
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text (default), json, csv or markdown")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rows in the top-N tables (default 10)")
    p.add_argument("--width", type=int, metavar="COLUMNS",
                   help="text table width (default: the terminal's; as wide as the content when "
                        "output is not a terminal)")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.width is not None and args.width < 20:
        from dissector.cli import UsageError
        raise UsageError("--width must be 20 columns or more")
    tables = load_from_args(args)
    from ..summary import sections   # pandas: with workers, imported while they run
    parts = sections(tables, top=args.top)
    {"text": _text, "json": _json, "csv": _csv, "markdown": _markdown}[args.format](args, parts)
    return report_errors(tables)


def _text(args, parts) -> None:
    from rich.console import Console
    from rich.text import Text

    from ..terminal import rich_table, table_width
    width = args.width
    if width is None and sys.stdout.isatty():
        width = Console().width
    for title, df in parts:
        if not len(df):
            continue
        table = rich_table(df, width)
        shown = max(table_width(table), width or len(title))
        console = Console(width=shown, highlight=False, soft_wrap=False)
        console.on_broken_pipe = _pipe_closed
        console.print(Text(title, style="bold"))
        console.print(table)
        console.print()


def _pipe_closed() -> None:
    """rich's own answer to a closed pipe is exit status 1: the command's (cli.main) is 0, as
    for `read | head`."""
    raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def _markdown(args, parts) -> None:
    from ..terminal import markdown
    sys.stdout.write("\n".join(markdown(title, df) for title, df in parts if len(df)))


def _json(args, parts) -> None:
    import json

    from ..terminal import plain_values
    doc = {"sections": [{"title": title, "columns": [str(c) for c in df.columns],
                         "rows": plain_values(df)} for title, df in parts]}
    # ASCII only: every control character and non-ASCII code point \u-escaped, safe to print
    json.dump(doc, sys.stdout, ensure_ascii=True, indent=1)
    sys.stdout.write("\n")


def _csv(args, parts) -> None:
    import csv

    from dissector.text_safety import escape

    from ..terminal import plain_values
    w = csv.writer(sys.stdout, lineterminator="\n")
    for title, df in parts:
        if not len(df):
            continue
        w.writerow([title])
        w.writerow([str(c) for c in df.columns])
        for row in plain_values(df):
            w.writerow([escape(v) if isinstance(v, str) else
                        ";".join(escape(str(x)) for x in v) if isinstance(v, list) else
                        "" if v is None else v for v in row.values()])
        w.writerow([])
