"""`kafka-dissect records`: one row per record in Produce requests and Fetch/ShareFetch responses.

Rows stream out exchange by exchange; Parquet is written in row groups of at most ROW_GROUP rows
or about ROW_GROUP_BYTES of values in memory (analysis.columns), so memory stays bounded on large
captures.
"""
from __future__ import annotations

import base64
import csv
import json
import sys

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import add_capture_options, open_dissection, report_errors
from dissector.output import iso_ns
from dissector.text_safety import escape
from dissector.records.rows import RECORD_COLUMN_NAMES, RECORD_COLUMNS, record_rows

FORMATS = ("text", "jsonl", "csv", "parquet")
ROW_GROUP = 65536
ROW_GROUP_BYTES = 16 << 20
_TS = RECORD_COLUMN_NAMES.index("timestamp")
_HEADERS = RECORD_COLUMN_NAMES.index("headers")


def add_parser(sub) -> None:
    p = sub.add_parser("records", help=PLUGIN_HELP["records"],
                       description="Decode every record of Produce requests and Fetch/ShareFetch "
                                   "responses: topic, partition, offset, timestamp, key, value, "
                                   "headers, producer and batch fields.")
    add_capture_options(p)
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument("--out", metavar="FILE", help="write to FILE (required for parquet)")
    p.set_defaults(run=run)


def run(args) -> int:
    from dissector.cli import UsageError
    if args.format == "parquet" and not args.out:
        raise UsageError("--format parquet needs --out FILE")
    dissection, progress = open_dissection(args, "records")
    rows = (row for ex in dissection for row in record_rows(ex))
    try:
        if args.format == "parquet":
            from ..records_table import write_parquet
            count = write_parquet(dissection, args.out, ROW_GROUP, ROW_GROUP_BYTES)
        else:
            out = open(args.out, "w", encoding="utf-8", newline="") if args.out else sys.stdout
            try:
                count = _WRITERS[args.format](rows, out)
            finally:
                if args.out:
                    out.close()
    finally:
        progress.done()
    if args.out:
        print(f"{count} records -> {args.out}", file=sys.stderr)
    return report_errors(dissection)


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


def _json_value(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, list):
        return [{k: _json_value(x) for k, x in h.items()} for h in v]
    return v


def _jsonl(rows, out) -> int:
    n = 0
    for r in rows:
        n += 1
        rec = {name: _json_value(v) for name, v in zip(RECORD_COLUMN_NAMES, r)}
        rec["timestamp"] = iso_ns(rec["timestamp"])
        out.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return n


def _csv(rows, out) -> int:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(RECORD_COLUMN_NAMES)
    n = 0
    for r in rows:
        n += 1
        rec = [_json_value(v) for v in r]
        rec[_TS] = iso_ns(rec[_TS])
        rec[_HEADERS] = json.dumps(rec[_HEADERS])
        w.writerow(["" if v is None else v for v in rec])
    return n




_WRITERS = {"text": _text, "jsonl": _jsonl, "csv": _csv}
