"""`kafka-dissect report`: one self-contained HTML file with plots and tables."""
from __future__ import annotations

import os
import sys

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import report_errors

from .options import add_analysis_options, load_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("report", help=PLUGIN_HELP["report"],
                       description="Dissect captures and write one self-contained HTML file "
                                   "(plots embedded, no external resources) with latency "
                                   "distributions and time series per api, errors and consumer "
                                   "lag.")
    add_analysis_options(p)
    p.add_argument("--html", metavar="FILE", required=True, help="the HTML file to write")
    p.add_argument("--title", default="Kafka traffic report", help="report title")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rows in the top-N tables (default 10)")
    p.set_defaults(run=run)


def run(args) -> int:
    tables = load_from_args(args)
    from ..html_report import write   # pandas: with workers, imported while they run
    write(tables, args.html, title=args.title,
          sources=[os.path.basename(p) for p in args.captures], top=args.top)
    print(f"{len(tables.exchanges)} exchanges -> {args.html}", file=sys.stderr)
    return report_errors(tables)
