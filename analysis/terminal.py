"""Analysis frames as tables people read: on a terminal (rich), as Markdown, CSV or JSON.

A table fits the width it is given without cutting anything: numbers are short (three
significant figures, units in the header) and never wrap; names wrap inside their column; when
that would wrap a name, the detail columns (mean, p99.9, p90, ...) are left out first, in
DETAIL order.
Without a width (output piped to a file) a table is as wide as its content. Every string from a
capture goes through dissector.text_safety: escaped, and never read as markup.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd
from rich import box
from rich.table import Table
from rich.text import Text

from dissector.figures import sig3
from dissector.text_safety import escape

# the latency summaries' statistics (analysis.latency.summarize): milliseconds
LATENCY_STATS = ("mean", "p50", "p90", "p99", "p99.9", "max")
HEADERS = {
    "api_name": "api", "api_version": "version", "client_id": "client id",
    "request_packet": "req pkt", "response_packet": "resp pkt", "request_ts": "time",
    "latency_ms": "latency ms", "error_name": "error", "error_code": "code",
    "correlation_id": "corr id", "connection_id": "conn", "max_wait_ms": "max wait ms",
    "latency_p50": "p50 ms", "latency_max": "max ms", "throttle_ms_total": "throttled ms",
    "throttle_ms_max": "max throttle ms", "top_level": "top level", "group_id": "group",
    "member_id": "member id", "generation_id": "gen", "committed_offset": "offset",
    "last_lag": "last lag", "max_lag": "max lag", "records_per_s": "records/s",
    "bytes_per_s": "bytes/s", "records_per_batch": "records/batch",
    "bytes_per_batch": "bytes/batch", "max_bytes": "max bytes", "record_sets": "record sets",
    "compressed_bytes": "compressed", "uncompressed_bytes": "uncompressed",
    "producer_id": "producer id", "producer_epoch": "epoch", "transactional_id": "txn id",
    "top_error": "top error",
    # where the time goes (analysis.anatomy), the deliveries and the cluster map
    "exchanges": "count", "total_ms": "total ms", "request_transfer_ms": "req ms",
    "broker_rtt_ms": "net ms", "broker_ms": "broker ms", "response_transfer_ms": "resp ms",
    "throttle_time_ms": "thr ms", "rtt_ms": "rtt ms", "retransmits": "retx", "tcp_gaps": "gaps",
    "zero_windows": "zero win",
    "producer_client_id": "producer", "consumer_client_id": "consumer",
    "consumer_group": "group", "node_id": "node", "first_seen": "first", "last_seen": "last",
    "advertised": "ads", "connections": "conns", "from_leader": "from", "to_leader": "to",
    "error_names": "errors seen", "seen_ts": "time", "response_ts": "time",
    "topics_produced": "produces", "topics_consumed": "consumes", "stale_apis": "stale apis",
    "generation": "gen", "start_ts": "start", "sync_ms": "sync ms", "duration_ms": "stopped ms",
    "trigger_client": "by",
}
PERCENT = {"error_rate": "error %", "exchange_rate": "exchange %", "partition_rate": "partition %",
           "broker_share": "broker %"}
# left out first when a table does not fit (most tables have one or two of these)
DETAIL = ("mean", "p99.9", "p90", "request_ts", "response_packet", "correlation_id",
          "connection_id", "exchange_rate", "partition_rate", "top_level", "throttled", "member_id",
          "generation_id", "uncompressed_bytes", "compressed_bytes", "records_per_batch",
          "bytes_per", "producer_epoch", "latency_p50", "rtt_ms", "broker_share", "zero_windows",
          "tcp_gaps", "retransmits", "throttle_time_ms", "first_seen", "advertised", "from_epoch",
          "to_epoch", "rack", "client_ip")
GAP = 2             # spaces between columns


def cell(value, percent: bool = False) -> str:
    """One value as terminal text: numbers short, strings escaped, missing values empty."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%H:%M:%S.%f")[:-3]
    if isinstance(value, float):
        return sig3(value * 100 if percent else value)
    if isinstance(value, int):
        return sig3(value * 100.0) if percent else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(escape(str(v)) for v in value)
    try:   # numpy scalars
        return cell(value.item(), percent)
    except AttributeError:
        return escape(str(value))


def fmt(value) -> str:
    """cell() for the HTML report's tables."""
    return cell(value)


@dataclass
class Column:
    name: str
    header: str
    numeric: bool
    cells: list
    fixed: bool = False   # never wrapped: numbers, yes/no

    def __post_init__(self):
        self.fixed = self.fixed or self.numeric

    @property
    def natural(self) -> int:
        return max([len(self.header)] + [len(c) for c in self.cells])


def display_columns(df: pd.DataFrame) -> list[Column]:
    """The frame's columns as text, for people: api and version as one column, rates as
    percentages, latency statistics in ms."""
    latency = {"count", "p50", "p99"} <= set(df.columns)
    merge_version = "api_name" in df.columns and "api_version" in df.columns
    cols = []
    for name in df.columns:
        if merge_version and name == "api_version":
            continue
        values = df[name].tolist()
        boolean = pd.api.types.is_bool_dtype(df[name].dtype)
        numeric = pd.api.types.is_numeric_dtype(df[name].dtype) and not boolean
        header = PERCENT.get(name) or HEADERS.get(name) or name.replace("_", " ")
        if latency and name in LATENCY_STATS:
            header = f"{name} ms"
        cells = [cell(v, name in PERCENT) for v in values]
        if merge_version and name == "api_name":
            versions = df["api_version"].tolist()
            cells = [f"{c} v{cell(v)}" if cell(v) else c for c, v in zip(cells, versions)]
            numeric = False
        cols.append(Column(name, header, numeric, cells, fixed=boolean))
    return cols


def _droppable(col: Column) -> int | None:
    for rank, name in enumerate(DETAIL):
        if col.name == name or col.name.startswith(name):
            return rank
    return None


def fit(cols: list[Column], width: int | None) -> tuple[list[Column], list[int]]:
    """The columns to show and their widths, within `width` when it can be done."""
    cols = list(cols)
    if width is None:
        return cols, [c.natural for c in cols]
    while True:
        room = width - GAP * (len(cols) - 1) - sum(c.natural for c in cols if c.fixed)
        texts = sorted(c.natural for c in cols if not c.fixed)
        cap = _water_level(texts, room)
        droppable = [(r, i) for i, c in enumerate(cols) if (r := _droppable(c)) is not None]
        if cap >= (texts[-1] if texts else 0) or not droppable:
            break   # every name fits unwrapped, or nothing is left to drop
        del cols[min(droppable)[1]]
    cap = max(cap, 4)
    return cols, [c.natural if c.fixed else min(c.natural, cap) for c in cols]


def _water_level(widths: list[int], room: int) -> int:
    """The largest cap with sum(min(w, cap)) <= room (widths sorted ascending)."""
    if sum(widths) <= room:
        return widths[-1] if widths else room
    for i, w in enumerate(widths):
        cap = (room - sum(widths[:i])) // (len(widths) - i)
        if cap < w:
            return max(cap, 0)
    return room


def rich_table(df: pd.DataFrame, width: int | None = None) -> Table:
    """The frame as a rich Table that fits `width` columns (None: as wide as its content)."""
    cols, widths = fit(display_columns(df), width)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  header_style="bold")
    for col, w in zip(cols, widths):
        table.add_column(Text(col.header), width=w, justify="right" if col.numeric else "left",
                         no_wrap=col.fixed, overflow="fold")
    for row in zip(*(c.cells for c in cols)):
        table.add_row(*(Text(v if c.fixed else wrap_name(v, w))
                        for c, w, v in zip(cols, widths, row)))
    return table


_BREAK_AFTER = re.compile(r"[^-._/: ]*[-._/: ]|[^-._/: ]+")


def wrap_name(text: str, width: int) -> str:
    """`text` in lines of at most `width`, broken after - . _ / : or a space where it can be
    (client-id-7 wraps as "client-" "id-7", not "client-i" "d-7"), inside a part when a part
    is longer than a line."""
    if len(text) <= width:
        return text
    lines = [""]
    for part in _BREAK_AFTER.findall(text):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        while len(part) > width:
            room = width - len(lines[-1])
            lines[-1] += part[:room]
            part = part[room:]
            lines.append("")
        lines[-1] += part
    return "\n".join(line.rstrip() for line in lines if line.strip())


def table_width(table: Table) -> int:
    return sum(c.width for c in table.columns) + GAP * (len(table.columns) - 1)


def markdown(title: str, df: pd.DataFrame) -> str:
    """A section as a Markdown heading and pipe table (cells escaped for Markdown too)."""
    cols = display_columns(df)
    lines = [f"### {_md(title)}", "",
             "| " + " | ".join(_md(c.header) for c in cols) + " |",
             "|" + "|".join("---:" if c.numeric else "---" for c in cols) + "|"]
    for row in zip(*(c.cells for c in cols)):
        lines.append("| " + " | ".join(_md(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


_MD_SPECIAL = str.maketrans({ch: "\\" + ch for ch in "|*_`[]<>#!~"})


def _md(text: str) -> str:
    return text.translate(_MD_SPECIAL)


def plain_values(df: pd.DataFrame) -> list[dict]:
    """The frame's rows as JSON-ready dicts: full precision, timestamps as ISO 8601."""
    rows = []
    for rec in df.to_dict("records"):
        rows.append({str(k): _plain(v) for k, v in rec.items()})
    return rows


def _plain(v):
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)):
        return v
    try:
        return _plain(v.item())
    except AttributeError:
        return str(v)
