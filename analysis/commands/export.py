"""`kafka-dissect export`: the analysis tables of captures as Parquet files, streamed batch by
batch (analysis.load.export) so memory stays flat however large the captures."""
from __future__ import annotations

import os
import sys

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import (Progress, check_captures, keylog_from, parse_ports,
                                       report_errors, report_capture_hints, report_undecrypted)
from dissector.filters import compile_filter_option

from .. import parquet_codec
from ..load import DERIVED, EXCHANGE_NAMES, TABLES, export
from .options import add_analysis_options, jobs_of


def add_parser(sub) -> None:
    p = sub.add_parser("export", help=PLUGIN_HELP["export"],
                       description="Dissect captures and write exchanges, partitions, records, "
                                   "issues, connections, deliveries and clients as Parquet files "
                                   "in DIR "
                                   "(read them back with analysis.load_parquet).")
    add_analysis_options(p)
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the Parquet files")
    parquet_codec.add_option(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from dissector.cli import UsageError
    keep = compile_filter_option(args.filter, EXCHANGE_NAMES)
    ports, auto = parse_ports(args.port)
    check_captures(args.captures)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: a file, not a folder (export writes a Parquet file "
                         f"per table into it)")
    keylog = keylog_from(args)
    progress = Progress(args.captures)
    try:
        col, dissection = export(args.captures, args.out, list(ports) + (["auto"] if auto else []),
                                 level=args.level, keep=keep, progress=progress,
                                 max_frame=args.max_frame, keylog=keylog,
                                 jobs=jobs_of(args, auto), codec=args.parquet_codec)
    finally:
        progress.done()
    report_undecrypted(dissection.dissector.tls, args)
    report_capture_hints(dissection, args)
    print(f"{len(col.exchanges)} exchanges, {len(col.partitions)} partition rows, "
          f"{len(col.records)} records, {len(col.issues)} issues -> "
          f"{len(TABLES) + len(DERIVED)} files in {args.out}", file=sys.stderr)
    return report_errors(dissection)
