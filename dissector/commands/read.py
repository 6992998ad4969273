"""`kafka-dissect read`: one line (or row) per Kafka exchange."""
from __future__ import annotations

import sys
from types import SimpleNamespace

from ..output import FORMATS, make_writer
from ..session import LEVELS
from ..tables import EXCHANGE_COLUMN_NAMES, exchange_row
from .common import (add_capture_options, add_jobs_option, add_keylog_option, open_dissection,
                     open_output, parse_ports, report_errors, report_capture_hints,
                     report_undecrypted)


def add_parser(sub) -> None:
    p = sub.add_parser("read", help="list the Kafka exchanges (request + response) in captures",
                       description="List each Kafka request with its response: time, endpoints, "
                                   "api and version, correlation id, client id, latency, status.")
    add_capture_options(p)
    add_keylog_option(p)
    add_jobs_option(p)
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
        written = 0
        jobs = _jobs(args)
        if jobs > 1:
            from ..parallel import Diverged
            try:
                result = _parallel(args, jobs, writer, keep, progress, run.dissector.tls.keylog)
                writer.close()
                report_undecrypted(result.dissector.tls, args)
                report_capture_hints(result, args)
                return report_errors(result)
            except Diverged as exc:   # one process from the start, after what is written
                written = exc.written
        origin = getattr(writer, "origin", None) if keep is not None else None
        for exchanges in run.batches():
            if origin is not None:   # as tshark -Y: times stay relative to the first exchange
                origin(exchanges[0])
                origin = None
            if written or keep is not None:
                exchanges = [ex for ex in exchanges if ex.index > written and (keep is None or keep(
                    dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(ex)))))]
            writer.write_all(exchanges)
        writer.close()
    finally:
        progress.done()
        if args.out:
            out.close()
    report_undecrypted(run.dissector.tls, args)
    report_capture_hints(run, args)
    return report_errors(run)


def _jobs(args) -> int:
    from ..parallel import jobs_for
    return jobs_for(args.jobs, args.captures, parse_ports(args.port)[1])


def _parallel(args, jobs, writer, keep, progress, keylog):
    """The exchanges rendered by `jobs` workers (dissector.parallel), written by `writer`."""
    from ..parallel import Plan, run as run_parallel
    fmt, bodies, secrets = args.format, args.bodies, args.show_secrets

    def render():   # in each worker
        import io
        w = make_writer(fmt, io.StringIO(), bodies=bodies, show_secrets=secrets)
        piece = w.tail if fmt == "text" else w.line
        if fmt == "csv" and keep is None:   # drafted as they complete, numbered later
            return SimpleNamespace(draft=w.drafts, late=w.lines)
        if fmt != "text" and keep is None:   # every exchange a line: the writer's own loop
            return w.lines

        def rendered(exchanges):
            pieces = [piece(ex) if keep is None or keep(
                dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(ex)))) else None
                for ex in exchanges]
            if fmt == "text":   # a filtered one's time too: times count from the first exchange
                pieces = [p or ((ex.request or ex.response).first_ts, None)
                          for ex, p in zip(exchanges, pieces)]
            return pieces
        return rendered

    out = writer.out
    if fmt == "text":
        def write(pieces, first):
            if writer.t0 is None and pieces:
                writer.t0 = pieces[0][0]
            line = writer.line
            out.write("".join(line(first + i, ts, tail) for i, (ts, tail) in enumerate(pieces)
                              if tail is not None))
    else:
        def write(pieces, first):
            out.write("".join(filter(None, pieces)))
    ports, _auto = parse_ports(args.port)
    plan = Plan(args.captures, render, jobs, ports, level=args.level, max_frame=args.max_frame,
                keep_bodies=args.bodies, keylog=keylog, by=args.jobs_by)
    return run_parallel(plan, write, progress)
