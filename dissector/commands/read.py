"""`kafka-dissect read`: one line (or row) per Kafka exchange."""
from __future__ import annotations

import sys

from ..output import FORMATS, make_writer
from ..session import LEVELS
from ..tables import EXCHANGE_COLUMN_NAMES, exchange_row
from .common import (add_capture_options, add_keylog_option, open_dissection, open_output,
                     report_errors, report_undecrypted)


def add_parser(sub) -> None:
    p = sub.add_parser("read", help="list the Kafka exchanges (request + response) in captures",
                       description="List each Kafka request with its response: time, endpoints, "
                                   "api and version, correlation id, client id, latency, status.")
    add_capture_options(p)
    add_keylog_option(p)
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--level", choices=LEVELS, default="bodies",
                   help="how deep to decode: headers (fastest), bodies (default: fills the error, "
                        "topic and partition columns), records (every record decoded)")
    p.add_argument("--bodies", action="store_true",
                   help="with --format jsonl: add the decoded request and response objects")
    p.add_argument("--show-secrets", action="store_true",
                   help="with --bodies: show SASL credentials, delegation-token HMACs and "
                        "sensitive config values (masked by default)")
    p.add_argument("--filter", metavar="EXPR",
                   help='keep exchanges matching EXPR over the columns, e.g. '
                        '\'api_name == "Fetch" and latency_ms > 100\'')
    p.set_defaults(run=run)


def run(args) -> int:
    level = args.level
    keep = None
    if args.filter is not None:   # the filter compiler loads ast: 3 ms of every start
        from ..filters import compile_filter_option
        keep = compile_filter_option(args.filter, EXCHANGE_COLUMN_NAMES)
    # the table needs the bodies' summaries only; --bodies prints the bodies themselves
    run, progress = open_dissection(args, level, keep_bodies=args.bodies)
    out = open_output(args.out) if args.out else sys.stdout
    try:
        writer = make_writer(args.format, out, bodies=args.bodies,
                             show_secrets=args.show_secrets)
        origin = getattr(writer, "origin", None) if keep is not None else None
        for ex in run:
            if origin is not None:   # as tshark -Y: times stay relative to the first exchange
                origin(ex)
                origin = None
            if keep is None or keep(dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(ex)))):
                writer.write(ex)
        writer.close()
    finally:
        progress.done()
        if args.out:
            out.close()
    report_undecrypted(run.dissector.tls)
    return report_errors(run)
