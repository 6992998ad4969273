"""`kafka-dissect stats`: latency, errors, consumers and producers as terminal tables."""
from __future__ import annotations

from rich.console import Console

from dissector.commands.common import report_errors

from ..summary import sections
from ..terminal import rich_table
from .options import add_analysis_options, load_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("stats", help="latency, error, consumer and producer statistics",
                       description="Dissect captures and print latency percentiles, the slowest "
                                   "exchanges, errors, consumer groups and lag, and producer "
                                   "throughput as tables.")
    add_analysis_options(p)
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rows in the top-N tables (default 10)")
    p.add_argument("--width", type=int, metavar="COLUMNS",
                   help="table width (default: the terminal's)")
    p.set_defaults(run=run)


def run(args) -> int:
    tables = load_from_args(args)
    console = Console(width=args.width, highlight=False)
    for title, df in sections(tables, top=args.top):
        if len(df):
            console.print(rich_table(title, df))
            console.print()
    return report_errors(tables)
