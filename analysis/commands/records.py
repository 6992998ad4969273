"""`kafka-dissect records`: one row per record in Produce requests and Fetch/ShareFetch responses.

The records are built in columns (dissector.records.columns) and written a chunk at a time: at
most ROW_GROUP rows or about ROW_GROUP_BYTES of keys, values and headers, one Parquet row group
each (pyarrow's writer), or TEXT_CHUNK_BYTES written as CSV / JSON lines from the buffers
(dissector.records.text), so memory stays bounded on large captures. Small chunks cost less than
large ones: their memory is reused rather than mapped afresh (measured: 4 MiB instead of 16 saved
a fifth of the CPU time of Parquet, 1 MiB a third of CSV's). Nothing here imports pandas.
"""
from __future__ import annotations

import os
import stat
import sys
from types import SimpleNamespace

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import (add_capture_options, add_jobs_option, add_keylog_option,
                                       open_dissection, open_output, parse_ports, report_errors,
                                       report_capture_hints, report_undecrypted)
from dissector.output import iso_ns
from dissector.records.columns import record_chunks, sourced_chunks
from dissector.records.rows import RECORD_COLUMN_NAMES, record_rows
from dissector.text_safety import escape

from .. import parquet_codec

FORMATS = ("text", "jsonl", "csv", "parquet")
ROW_GROUP = 65536
ROW_GROUP_BYTES = 4 << 20
TEXT_CHUNK_BYTES = 1 << 20   # smaller than a row group: buffers reused, not mapped afresh
# --jobs N: the file chunks a worker reads between its reports (dissector.parallel's default
# 16). The exchanges it cannot render before their step is numbered (the records text, of
# connections opened in that step; Parquet's columns, all) wait for less, in warmer caches:
# dense 400 MB benchmark capture, 4 rounds alternating, CSV 1.62-1.75 -> 1.53-1.66 s, Parquet
# 2.17-2.32 -> 2.04-2.15 s; bulk traffic the same either way
STEP_CHUNKS = 4
_TS = RECORD_COLUMN_NAMES.index("timestamp")


def add_parser(sub) -> None:
    p = sub.add_parser("records", help=PLUGIN_HELP["records"],
                       description="Decode every record of Produce requests and Fetch/ShareFetch "
                                   "responses: topic, partition, offset, timestamp, key, value, "
                                   "headers, producer and batch fields.")
    add_capture_options(p)
    add_keylog_option(p)
    add_jobs_option(p)
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument("--out", metavar="FILE", help="write to FILE (required for parquet)")
    parquet_codec.add_option(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from dissector.cli import UsageError
    if args.format == "parquet":
        if not args.out:
            raise UsageError("--format parquet needs --out FILE")
        open_output(args.out).close()   # a path that cannot be written: said now, not at the end
    # no body is built: the walk over their bytes hands the record sets of Produce, Fetch and
    # ShareFetch over with their topics and partitions (Summary.record_sets); the other sides
    # of these (Produce's response, the fetch requests) are not read at all
    dissection, progress = open_dissection(args, "records", keep_bodies=False,
                                           records_only=True)
    result = dissection
    try:
        if args.format == "parquet":
            result, count = _parquet(args, dissection, progress)
        elif args.format == "text":
            out = open(args.out, "w", encoding="utf-8", newline="") if args.out else sys.stdout
            try:
                result, count, written = _parallel(args, dissection, progress, out.write)
                if result is None:
                    result = dissection
                    count += _text((row for ex in dissection if ex.index > written
                                    for row in record_rows(ex)), out)
            finally:
                if args.out:
                    out.close()
        else:
            out = open(args.out, "wb") if args.out else None
            try:
                write = out.write if out else _stdout()
                if args.format == "csv":
                    write((",".join(RECORD_COLUMN_NAMES) + "\n").encode())
                placed = None
                if out and stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                    out.flush()   # the workers write from here on (dissector.parallel.placing)
                    placed = out.fileno()
                result, count, written = _parallel(args, dissection, progress, write, placed)
                if placed is not None:
                    out.seek(0, os.SEEK_END)   # after what they wrote
                if result is None:
                    result = dissection
                    count += _write_text((ex for ex in dissection if ex.index > written),
                                         args.format, write)
            finally:
                if out:
                    out.close()
    finally:
        progress.done()
    if args.out:
        print(f"{count} records -> {args.out}", file=sys.stderr)
    report_undecrypted(result.dissector.tls, args)
    report_capture_hints(result, args)
    return report_errors(result)


def _parquet(args, dissection, progress):
    """The records into a Parquet file: (the run, records written). By --jobs N workers
    (analysis.parallel_records), else, or from the start when dissector.parallel's checks
    stop them, by one process (a row group would straddle where they stopped)."""
    from dissector.parallel import jobs_for

    from ..records_table import write_parquet
    ports, auto = parse_ports(args.port)
    jobs = jobs_for(args.jobs, args.captures, auto)
    if jobs > 1:
        from dissector.parallel import Diverged, Plan, run

        from ..parallel_records import Writer, render
        from ..parquet_sink import ParquetSink
        from ..records_table import SCHEMA
        plan = Plan(args.captures, lambda: render, jobs, ports, level="records",
                    max_frame=args.max_frame, keep_bodies=False, records_only=True,
                    keylog=dissection.dissector.tls.keylog, by=args.jobs_by, step=STEP_CHUNKS)
        try:
            with ParquetSink(args.out, SCHEMA, args.parquet_codec) as parquet:
                writer = Writer(parquet, ROW_GROUP, ROW_GROUP_BYTES)
                result = run(plan, writer.write, progress)
                writer.finish()
            return result, writer.count
        except Diverged:
            pass
    return dissection, write_parquet(dissection, args.out, ROW_GROUP, ROW_GROUP_BYTES,
                                     args.parquet_codec)


def _parallel(args, dissection, progress, write, placed=None):
    """The records of --jobs N worker processes (dissector.parallel), each exchange's rendered
    by a worker and written here in order, or with `placed` (the output's file descriptor) by
    the workers into the file: (the run, records written, exchanges written), the run None
    when one process is to write the rest (one job, or after dissector.parallel's checks
    stopped the workers)."""
    from dissector.parallel import jobs_for
    ports, auto = parse_ports(args.port)
    jobs = jobs_for(args.jobs, args.captures, auto)
    if jobs == 1:
        return None, 0, 0
    from dissector.parallel import Diverged, Plan, run
    fmt = args.format
    count = [0]

    def render():   # in each worker: (records, their text) per exchange, rendered as they
        # complete (the text holds connection ids, not exchange numbers): held until numbered,
        # the exchanges took the workers 15% more CPU on dense traffic (out of the caches by
        # then)
        return SimpleNamespace(late=_render(), early=True)

    def _render():
        import io
        if fmt == "text":
            def rendered(ex):
                buf = io.StringIO()
                return _text(record_rows(ex), buf), buf.getvalue()
            return lambda exchanges: [rendered(ex) for ex in exchanges]
        from dissector.records.text import csv_chunk, jsonl_chunk
        chunk = csv_chunk if fmt == "csv" else jsonl_chunk

        def pieces(exchanges):   # a chunk's exchanges together, cut apart where each ends
            counts, texts = [0] * len(exchanges), [[] for _ in exchanges]
            for cols, sources in sourced_chunks(exchanges, ROW_GROUP, TEXT_CHUNK_BYTES):
                ends = []
                data = memoryview(chunk(cols, ends))
                # an exchange's batches are one run of the text: cut where the exchange changes
                start = end = 0
                was = None
                for (i, n), batch_end in zip(sources, ends):
                    counts[i] += n
                    if i != was:
                        if was is not None:
                            texts[was].append(data[start:end])
                            start = end
                        was = i
                    end = batch_end
                if was is not None:
                    texts[was].append(data[start:end])
            # views of the text where the workers write it themselves (no copy), else bytes
            return [(n, t[0] if placed is not None and len(t) == 1 else b"".join(t))
                    for n, t in zip(counts, texts)]
        return pieces

    def written(pieces, _first):
        if placed is not None:   # the records counted here, written by the workers
            count[0] += sum(n for n in pieces if n is not None)
            return
        count[0] += sum(n for n, _ in pieces)
        write(("" if fmt == "text" else b"").join(text for _, text in pieces))
    plan = Plan(args.captures, render, jobs, ports, level="records", max_frame=args.max_frame,
                keep_bodies=False, records_only=True, keylog=dissection.dissector.tls.keylog,
                by=args.jobs_by, out=placed, step=STEP_CHUNKS)
    try:
        return run(plan, written, progress), count[0], 0
    except Diverged as exc:
        return None, count[0], exc.written


def shown(value: bytes | None) -> str:
    """Text when printable UTF-8, else hex (the text view only)."""
    if value is None:
        return "null"
    try:
        text = value.decode("utf-8")
        if text.isprintable():
            return repr(text)
    except UnicodeDecodeError:
        pass
    return "0x" + value.hex() if len(value) <= 32 else f"0x{value[:32].hex()}... ({len(value)} B)"


def _text(rows, out) -> int:
    n = 0
    idx = {name: i for i, name in enumerate(RECORD_COLUMN_NAMES)}
    for r in rows:
        n += 1
        direction = "produce" if r[idx["direction"]] == 0 else "fetch"
        headers = ", ".join(f"{escape(h['key'])}={shown(h['value'])}" for h in r[idx["headers"]])
        value = shown(r[idx["value"]])
        if len(value) > 80:
            value = value[:77] + "..."
        out.write(f"{direction:<7} {escape(r[idx['topic']])}[{r[idx['partition']]}]@{r[idx['offset']]}  "
                  f"{iso_ns(r[_TS]) or '-'}  {r[idx['compression']]}  "
                  f"key={shown(r[idx['key']])}  value={value}"
                  + (f"  headers[{headers}]" if headers else "") + "\n")
    return n


def _stdout():
    """A writer of bytes to stdout (through its text layer when it has no binary one)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        return lambda data: sys.stdout.write(data.decode("utf-8"))
    sys.stdout.flush()
    return buffer.write


def _write_text(dissection, fmt, write) -> int:
    """CSV (without its header line) or JSON lines, a chunk of records at a time."""
    from dissector.records.text import csv_chunk, jsonl_chunk
    chunk = csv_chunk if fmt == "csv" else jsonl_chunk
    n = 0
    for cols in record_chunks(dissection, ROW_GROUP, TEXT_CHUNK_BYTES):
        write(chunk(cols))
        n += cols.rows
    return n
