"""Options and loading shared by the stats, report and export commands."""
from __future__ import annotations

from dissector.commands.common import (Progress, add_capture_options, add_jobs_option,
                                       add_keylog_option, check_captures, keylog_from,
                                       parse_ports, report_capture_hints, report_undecrypted)
from dissector.filters import compile_filter_option
from dissector.session import LEVELS

from ..load import EXCHANGE_NAMES, Tables, collect


def add_analysis_options(p) -> None:
    add_capture_options(p)
    add_keylog_option(p)
    add_jobs_option(p)
    p.add_argument("--filter", metavar="EXPR",
                   help='keep exchanges matching EXPR over the exchange columns, e.g. '
                        '\'api_name == "Fetch" and latency_ms > 100\'')
    p.add_argument("--level", choices=LEVELS, default="bodies",
                   help="how deep to decode: headers (fastest: no errors, topics or partitions), "
                        "bodies (default), records (also fills the records table)")


def jobs_of(args, auto) -> int:
    """--jobs, or its default for these captures (dissector.parallel.jobs_for)."""
    from dissector.parallel import jobs_for
    return jobs_for(args.jobs, args.captures, auto)


def load_from_args(args) -> Tables:
    """Dissect the captures named in args into Tables, with a progress bar on a terminal."""
    keep = compile_filter_option(args.filter, EXCHANGE_NAMES)
    ports, auto = parse_ports(args.port)
    check_captures(args.captures)
    port = list(ports) + (["auto"] if auto else [])
    keylog = keylog_from(args)
    progress = Progress(args.captures)
    try:
        col, run = collect(args.captures, port, level=args.level, keep=keep, progress=progress,
                           max_frame=args.max_frame, keylog=keylog,
                           jobs=jobs_of(args, auto))
    finally:
        progress.done()
    report_undecrypted(run.dissector.tls, args)
    report_capture_hints(run, args)
    return Tables(col.arrow(), run.errors)
