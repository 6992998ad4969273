"""Writing exchanges as text lines (tshark-style), JSON lines or CSV."""
from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from functools import lru_cache

from .tables import EXCHANGE_COLUMN_NAMES, TIMESTAMP_COLUMNS, exchange_api_name, exchange_row

FORMATS = ("text", "jsonl", "csv")


@lru_cache(maxsize=4096)
def _iso_seconds(secs: int) -> str:
    # four timestamps per exchange share a handful of seconds: strftime once per second
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _iso_prefix(secs: int) -> str | None:
    try:
        return _iso_seconds(secs)
    except (OverflowError, OSError, ValueError):
        return None


def iso_ns(ts_ns: int | None) -> str | None:
    """UTC ISO 8601 with nanoseconds: 2024-05-01T12:00:00.123456789Z; None when missing or
    outside the years 1-9999 (a damaged capture's timestamp can be anything)."""
    if ts_ns is None:
        return None
    secs, ns = divmod(ts_ns, 1_000_000_000)
    prefix = _iso_prefix(secs)
    return None if prefix is None else f"{prefix}.{ns:09d}Z"


def exchange_record(ex) -> dict:
    """The exchange as a JSON-ready dict in column order (timestamps as ISO strings)."""
    rec = dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(ex)))
    for name in TIMESTAMP_COLUMNS:
        rec[name] = iso_ns(rec[name])
    return rec


class TextWriter:
    """One line per exchange: number, time since the first exchange, endpoints, api, latency."""

    def __init__(self, out):
        self.out = out
        self.t0 = None

    def write(self, ex) -> None:
        frame = ex.request or ex.response
        if self.t0 is None:
            self.t0 = frame.first_ts
        c = ex.connection
        name = exchange_api_name(ex) or "?"
        api = name if ex.api_version is None else f"{name} v{ex.api_version}"
        latency = "" if ex.latency_ms is None else f"{ex.latency_ms:.3f} ms"
        parts = [f"{ex.index:6d}", f"{(frame.first_ts - self.t0) / 1e9:12.6f}",
                 f"{c.client_ip}:{c.client_port} \u2192 {c.broker_ip}:{c.broker_port}",
                 f"{api:<26}", f"corr={ex.correlation_id}" if ex.correlation_id is not None else "",
                 f"client={ex.client_id}" if ex.client_id else "", latency, ex.status]
        if ex.error_code:
            from .protocol.names import error_name
            parts.append(error_name(ex.error_code))
        if ex.issues:
            parts.append(f"[{len(ex.issues)} issue{'s' if len(ex.issues) > 1 else ''}: "
                         f"{ex.issues[0].code}]")
        self.out.write("  ".join(p for p in parts if p) + "\n")

    def close(self) -> None:
        pass


# json.dumps with options builds a new encoder per call: one made once writes the same text
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class JsonlWriter:
    def __init__(self, out, bodies=False):
        self.out = out
        self.bodies = bodies

    def write(self, ex) -> None:
        rec = exchange_record(ex)
        if self.bodies:
            from .protocol.jsonify import to_json
            rec["request"] = to_json(ex.request_msg)
            rec["response"] = to_json(ex.response_msg)
        self.out.write(_json(rec) + "\n")

    def close(self) -> None:
        pass


_TS_AT = tuple(i for i, name in enumerate(EXCHANGE_COLUMN_NAMES) if name in TIMESTAMP_COLUMNS)
_TOPICS_AT = EXCHANGE_COLUMN_NAMES.index("topics")
_COMMAS = len(EXCHANGE_COLUMN_NAMES) - 1
_LINE = ",".join(["%s"] * len(EXCHANGE_COLUMN_NAMES)) + "\n"


class CsvWriter:
    """exchange_record's values, None as empty and topics joined by ";" (straight from the row:
    no dict per exchange). A row whose text needs no CSV quoting (no comma, quote or line break
    inside a value: one comma per column boundary, one line break) is formatted directly, others
    go through the csv module."""

    def __init__(self, out):
        self.out = out
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow(EXCHANGE_COLUMN_NAMES)
        self._secs = None      # the second last formatted (an exchange's times share one)
        self._prefix = None
        self._ts = None        # the timestamp last formatted and its text (a one-packet
        self._ts_text = ""     # message starts and ends at the same time)

    def write(self, ex) -> None:
        row = ["" if v is None else v for v in exchange_row(ex)]
        last = self._ts
        for i in _TS_AT:
            ts = row[i]
            if ts == "":
                continue
            if ts != last:
                last = ts
                secs, ns = divmod(ts, 1_000_000_000)
                if secs != self._secs:
                    self._secs = secs
                    self._prefix = _iso_prefix(secs)
                self._ts_text = "" if self._prefix is None else f"{self._prefix}.{ns:09d}Z"
            row[i] = self._ts_text
        self._ts = last
        topics = row[_TOPICS_AT]
        if topics != "":
            row[_TOPICS_AT] = ";".join(topics)
        line = _LINE % tuple(row)
        if line.count(",") == _COMMAS and '"' not in line and "\r" not in line \
                and line.find("\n") == len(line) - 1:
            self.out.write(line)
        else:
            self.writer.writerow(row)

    def close(self) -> None:
        pass


def make_writer(fmt, out, bodies=False):
    if fmt == "text":
        return TextWriter(out)
    if fmt == "jsonl":
        return JsonlWriter(out, bodies=bodies)
    return CsvWriter(out)
