"""`kafka-dissect export`: the analysis tables of captures as Parquet files."""
from __future__ import annotations

import sys

from dissector.commands.common import report_errors

from .options import add_analysis_options, load_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write the analysis tables of captures as Parquet",
                       description="Dissect captures and write exchanges, partitions, records, "
                                   "issues and connections as Parquet files in DIR (read them "
                                   "back with analysis.load_parquet).")
    add_analysis_options(p)
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the Parquet files")
    p.set_defaults(run=run)


def run(args) -> int:
    tables = load_from_args(args)
    paths = tables.write_parquet(args.out)
    print(f"{len(tables.exchanges)} exchanges, {len(tables.partitions)} partition rows, "
          f"{len(tables.records)} records, {len(tables.issues)} issues -> "
          f"{len(paths)} files in {args.out}", file=sys.stderr)
    return report_errors(tables)
