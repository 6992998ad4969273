"""Writing exchanges as text lines (tshark-style), JSON lines or CSV."""
from __future__ import annotations

import csv
from functools import lru_cache

from .tables import EXCHANGE_COLUMN_NAMES, TIMESTAMP_COLUMNS, exchange_api_name, exchange_row
from .text_safety import escape

FORMATS = ("text", "jsonl", "csv")


@lru_cache(maxsize=4096)
def _iso_seconds(secs: int) -> str:
    # four timestamps per exchange share a handful of seconds: formatted once per second
    # (isoformat, not strftime: glibc's %Y does not pad years before 1000 to four digits)
    from datetime import datetime, timezone
    return datetime.fromtimestamp(secs, timezone.utc).isoformat()[:19]


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

    def origin(self, ex) -> None:
        """Times count from this exchange's (the capture's first: filtered out or not)."""
        if self.t0 is None:
            self.t0 = (ex.request or ex.response).first_ts

    def write(self, ex) -> None:
        self.out.write(self.line(ex.index, *self.tail(ex)))

    def write_all(self, exchanges) -> None:
        for ex in exchanges:
            self.write(ex)

    def line(self, index, first_ts, tail) -> str:
        """The line of exchange number `index`, which started at `first_ts`, from its tail."""
        if self.t0 is None:
            self.t0 = first_ts
        return f"{index:6d}  {(first_ts - self.t0) / 1e9:12.6f}  {tail}\n"

    @staticmethod
    def tail(ex) -> tuple:
        """(the exchange's first time, its line after the time): all but the number and the time
        since the first exchange, which depend on the exchanges before it."""
        frame = ex.request or ex.response
        c = ex.connection
        name = exchange_api_name(ex) or "?"
        api = name if ex.api_version is None else f"{name} v{ex.api_version}"
        latency = "" if ex.latency_ms is None else f"{ex.latency_ms:.3f} ms"
        parts = [f"{c.client_ip}:{c.client_port} \u2192 {c.broker_ip}:{c.broker_port}",
                 f"{api:<26}", f"corr={ex.correlation_id}" if ex.correlation_id is not None else "",
                 f"client={escape(ex.client_id)}" if ex.client_id else "", latency, ex.status]
        if ex.error_code:
            from .protocol.names import error_name
            parts.append(error_name(ex.error_code))
        if ex.issues:
            parts.append(f"[{len(ex.issues)} issue{'s' if len(ex.issues) > 1 else ''}: "
                         f"{ex.issues[0].code}]")
        return frame.first_ts, "  ".join(p for p in parts if p)

    def close(self) -> None:
        pass


class JsonlWriter:
    def __init__(self, out, bodies=False, show_secrets=False):
        import json   # here: the other formats need not load it
        self.out = out
        self.bodies = bodies
        self.show_secrets = show_secrets
        # json.dumps with options builds a new encoder per call: one made once writes the same
        self._json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def write(self, ex) -> None:
        self.out.write(self.line(ex))

    def write_all(self, exchanges) -> None:
        self.out.write("".join(self.lines(exchanges)))

    def lines(self, exchanges) -> list:
        return list(map(self.line, exchanges))

    def line(self, ex) -> str:
        rec = exchange_record(ex)
        if self.bodies:
            from .protocol.jsonify import to_json
            rec["request"] = to_json(ex.request_msg)
            rec["response"] = to_json(ex.response_msg)
            if not self.show_secrets:
                from .secrets import mask_json
                for key, is_request in (("request", True), ("response", False)):
                    if rec[key] is not None:
                        mask_json(ex.api_key, is_request, rec[key]["body"])
        return self._json(rec) + "\n"

    def close(self) -> None:
        pass


_TS_AT = tuple(i for i, name in enumerate(EXCHANGE_COLUMN_NAMES) if name in TIMESTAMP_COLUMNS)
_TOPICS_AT = EXCHANGE_COLUMN_NAMES.index("topics")
# the numbers a parallel run's parent gives (dissector.parallel), in column order
NUMBER_HOLES = tuple(map(EXCHANGE_COLUMN_NAMES.index, ("connection_id", "exchange")))


def csv_values(row, ts_at=_TS_AT, topics_at=_TOPICS_AT) -> list:
    """exchange_row's values as CSV text: None empty, the timestamps at `ts_at` as iso_ns (empty
    when out of range), the topics at `topics_at` joined by ";"."""
    values = ["" if v is None else v for v in row]
    for i in ts_at:
        if values[i] != "":
            values[i] = iso_ns(values[i]) or ""
    if values[topics_at] != "":
        values[topics_at] = ";".join(values[topics_at])
    return values


def plain_join(texts) -> str | None:
    """The strings `texts` joined by commas when none needs CSV quoting (no comma, quote or
    line break in one), else None."""
    line = ",".join(texts)
    if line.count(",") != len(texts) - 1 or '"' in line or "\r" in line or "\n" in line:
        return None
    return line


def plain_line(row, ts_at=_TS_AT, topics_at=_TOPICS_AT, holes=None):
    """The CSV line of exchange_row's values (csv_values) when none needs quoting (no comma,
    quote or line break in one), else None. With `holes` (ascending columns): the line's
    len(holes) + 1 pieces, cut where those columns' values, left out, go. _csvrow.csv_line is
    the same compiled."""
    if holes is not None:
        if len(holes) > 8 or any(not 0 <= h < len(row) for h in holes) or any(
                a >= b for a, b in zip(holes, holes[1:])):
            raise ValueError("csv_line: holes are ascending columns (at most 8)")
        row = tuple(None if i in holes else v for i, v in enumerate(row))
    values = list(map(str, csv_values(row, ts_at, topics_at)))
    line = plain_join(values)
    if line is None:
        return None
    line += "\n"
    if holes is None:
        return line
    cuts = [sum(len(v) + 1 for v in values[:h]) for h in holes]
    return tuple(line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)]))


try:
    from ._csvrow import csv_line
    COMPILED = True
except ImportError:   # no compiler where it was installed: the same in Python
    csv_line = plain_line
    COMPILED = False


class CsvWriter:
    """exchange_record's values (csv_values: straight from the row, no dict per exchange). A
    row whose text needs no CSV quoting is formatted directly (csv_line), others go through the
    csv module."""

    def __init__(self, out):
        self.out = out
        csv.writer(out, lineterminator="\n").writerow(EXCHANGE_COLUMN_NAMES)
        self._quoted = None   # a csv writer into a buffer, made at the first row that needs it

    def write(self, ex) -> None:
        self.out.write(self.line(ex))

    def write_all(self, exchanges) -> None:
        """The lines of `exchanges` in one write."""
        self.out.write("".join(self.lines(exchanges)))

    def lines(self, exchanges, row=exchange_row, ts_at=_TS_AT, topics_at=_TOPICS_AT) -> list:
        """`line` of each exchange, its common case inline (no Python call per exchange)."""
        line = self.line
        return [csv_line(row(ex), ts_at, topics_at) or line(ex) for ex in exchanges]

    def drafts(self, exchanges, row=exchange_row, ts_at=_TS_AT, topics_at=_TOPICS_AT,
               holes=NUMBER_HOLES) -> list:
        """Per exchange, its line but for its connection id and number: the three pieces around
        them (csv_line's), or None for a line that needs quoting (`line` writes it whole)."""
        return [csv_line(row(ex), ts_at, topics_at, holes) for ex in exchanges]

    def line(self, ex) -> str:
        row = exchange_row(ex)
        line = csv_line(row, _TS_AT, _TOPICS_AT)
        if line is None:
            if self._quoted is None:
                import io
                buf = io.StringIO()
                self._quoted = buf, csv.writer(buf, lineterminator="\n")
            buf, writer = self._quoted
            buf.seek(0)
            buf.truncate()
            writer.writerow(csv_values(row))
            line = buf.getvalue()
        return line

    def close(self) -> None:
        pass


def make_writer(fmt, out, bodies=False, show_secrets=False):
    if fmt == "text":
        return TextWriter(out)
    if fmt == "jsonl":
        return JsonlWriter(out, bodies=bodies, show_secrets=show_secrets)
    return CsvWriter(out)
