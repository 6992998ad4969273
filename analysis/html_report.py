"""One self-contained interactive HTML report: Plotly's JavaScript, the figures (as JSON) and the
page script are inlined, so the file opens offline; sortable and filterable tables as HTML.

Capture strings only ever reach the page HTML-escaped (tables, headings) or inside JSON whose
`<`, `>` and `&` are \\u-escaped (figures), so none can close a script or open a tag. A Content
Security Policy allows only the page's own scripts (by hash) and no network at all, in case.
"""
from __future__ import annotations

import base64
import hashlib
import html
from datetime import datetime, timezone
from importlib import resources

import numpy as np
import pandas as pd
from plotly.io import to_json
from plotly.offline import get_plotlyjs

from . import report_figures as rf
from .report_data import POINTS_RULE, bucket_width, epoch_ms, width_label
from .report_tables import report_tables
from .terminal import fmt

MAX_TABLE_ROWS = 500
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 0.95em; margin: 1em 0 0; }
nav a { margin-right: 1em; white-space: nowrap; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.3em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; }
th { background: #f3f3f3; cursor: pointer; user-select: none; position: sticky; top: 0; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
div.tbl { max-height: 30em; overflow: auto; margin-bottom: 1em; }
input.filter { margin: 0.3em 0; width: 20em; } span.count, p.meta, p.note { color: #666; }
div.plot { width: 100%; }
"""
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data: blob:; "
       "script-src {hashes}")


def script_json(obj_text: str) -> str:
    """JSON text that is safe inside a <script> element: no `<`, `>`, `&` or line separators
    left (each becomes its \\u escape, which JSON.parse reads back)."""
    return (obj_text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _numeric(series) -> bool:
    return pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
        series.dtype)


def _sort_key(v) -> str:
    if isinstance(v, pd.Timestamp):
        return str(v.value)
    return "" if v is None or v is pd.NA or v != v else repr(float(v))


def table_html(df: pd.DataFrame, title: str) -> str:
    """A sortable, filterable table (the page script wires it); at most MAX_TABLE_ROWS rows."""
    kinds = [("n" if _numeric(df[c]) or pd.api.types.is_datetime64_any_dtype(df[c].dtype)
              else "") for c in df.columns]
    head = "".join(f'<th class="{k}">{html.escape(str(c))}</th>' for c, k in zip(df.columns, kinds))
    rows = []
    for values in df.head(MAX_TABLE_ROWS).itertuples(index=False):
        rows.append("<tr>" + "".join(
            f'<td class=n data-v="{_sort_key(v)}">{html.escape(fmt(v))}</td>' if k else
            f"<td>{html.escape(fmt(v))}</td>" for v, k in zip(values, kinds)) + "</tr>")
    more = (f" (the first {MAX_TABLE_ROWS:,} of {len(df):,})" if len(df) > MAX_TABLE_ROWS
            else "")
    shown = min(len(df), MAX_TABLE_ROWS)
    return (f'<div class=table><input class=filter type=search placeholder="filter rows" '
            f'aria-label="filter {html.escape(title)}"> <span class=count>{shown} rows</span>'
            f'{more}<div class=tbl><table class=data><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></div>')


class _Page:
    """Sections of HTML, the table of contents and the figures to embed."""

    def section(self, title: str, body: str = "") -> None:
        anchor = f"s{len(self.toc) + 1}"
        self.toc.append(f'<a href="#{anchor}">{html.escape(title)}</a>')
        self.parts.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>{body}')

    def __init__(self, time_range):
        self.parts, self.toc, self.figures = [], [], []
        self.time_range = time_range

    def figure(self, fig, time: bool = False) -> str:
        fid = f"fig{len(self.figures) + 1}"
        if time:   # every time plot starts on the whole capture, so small multiples line up
            fig.update_layout(xaxis_range=self.time_range)
        self.figures.append((fid, fig))
        return f'<div class=plot id="{fid}"{" data-time=1" if time else ""}></div>'


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _time_range(ms, width_ms) -> list | None:
    """The capture's span with a margin of a bucket, or 2% of the span if wider."""
    ms = ms[~np.isnan(ms)]
    if len(ms) == 0:
        return None
    lo, hi = ms.min(), ms.max()
    pad = max(width_ms, (hi - lo) * 0.02)
    return [lo - pad, hi + width_ms + pad]


# the plot sections, each with the tables that belong with it (by the start of their titles);
# the tables no section claims follow, in the summary's order
SECTIONS = (
    ("Overview", None, ("Overview",)),
    ("Latency and requests per api", "api", ("Latency by api (ms)", "Slowest")),
    ("Where the time goes", "anatomy", ("Where the time goes",)),
    ("Errors", "errors", ("Errors by", "Retriable", "Unanswered", "Throttling")),
    ("Consumer groups and rebalances", "rebalances", ("Consumer groups", "Rebalances",
                                                       "Group timeline", "Committed offsets")),
    ("Consumer lag", "lag", ("Consumer lag",)),
    ("Records produced", "produce", ("Producer throughput",)),
    ("End-to-end record latency (Produce request to first Fetch delivery)", "deliveries",
     ("End-to-end",)),
    ("Clients", "clients", ("Clients", "Client software")),
    ("Cluster", "cluster", ("Brokers", "Cluster misconfiguration", "Partition leader changes",
                            "Coordinators")),
    ("Connections and TLS", None, ("TLS connections", "Connections")),
)


def _figures(t, page, width) -> dict:
    """Section key -> the HTML of its plots ("" when the capture has nothing to show)."""
    rows = rf.api_figures(t.exchanges, width)
    out = {"api": "".join(f"<h3>{html.escape(api)}</h3>{page.figure(fig, time=True)}"
                          for api, fig in rows)}
    for key, fig, time, heading in (
            ("anatomy", rf.anatomy_figure(t), False, ""),
            ("errors", rf.error_figure(t), False, ""),
            ("rebalances", rf.rebalance_figure(t), True, ""),
            ("lag", rf.lag_figure(t, width), True, ""),
            ("produce", rf.produce_figure(t, width), True, ""),
            ("deliveries", rf.delivery_figure(t, width), True, ""),
            ("clients", rf.clients_graph(t), False, ""),
            ("clients", rf.topics_graph(t), False,
             "Producers → topics → consumer groups → consumers (records)"),
            ("cluster", rf.leaders_figure(t, width), True, "")):
        if fig is not None:
            out[key] = out.get(key, "") + (f"<h3>{html.escape(heading)}</h3>" if heading else
                                           "") + page.figure(fig, time)
    return out


def render(t, title="Kafka traffic report", sources=(), top=10) -> str:
    ms = epoch_ms(t.exchanges["request_ts"])
    width = bucket_width(ms, pd.factorize(t.exchanges["api_name"], use_na_sentinel=False)[0])
    page = _Page(_time_range(ms, width))
    plots = _figures(t, page, width)
    tables = [(name, df) for name, df in report_tables(t, top) if len(df)]
    for section, key, claims in SECTIONS:
        mine = [(name, df) for name, df in tables if name.startswith(claims)]
        tables = [(name, df) for name, df in tables if not name.startswith(claims)]
        body = plots.get(key, "") + "".join(
            ("" if name == section else f"<h3>{html.escape(name)}</h3>") + table_html(df, name)
            for name, df in mine)
        if body:
            page.section(section, body)
    for name, df in tables:
        page.section(name, table_html(df, name))

    figures = "{" + ",".join(f'"{fid}":{script_json(to_json(fig, validate=False))}'
                             for fid, fig in page.figures) + "}"
    plotly_js = get_plotlyjs()
    page_js = resources.files(__package__).joinpath("report.js").read_text(encoding="utf-8")
    hashes = " ".join(_sha256(s) for s in (plotly_js, page_js))
    generated = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}"
    return "\n".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP.format(hashes=hashes)}">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class=meta>{html.escape(', '.join(map(str, sources)))} &middot; generated "
        f"{generated} UTC by kafka-dissect</p>",
        f"<nav>{''.join(page.toc)}</nav>",
        f"<p class=note>Times are UTC, in buckets of {width_label(width)}. "
        f"{html.escape(POINTS_RULE)} Drag to zoom (every time axis follows), double-click to "
        f"reset; hover a point for its exchange and packet numbers. Click a table header to "
        f"sort, type in the box above a table to filter it.</p>",
        *page.parts,
        f'<script type="application/json" id="report-figures">{figures}</script>',
        f"<script>{plotly_js}</script>",
        f"<script>{page_js}</script>",
        "</body></html>"])


def write(t, path, **kwargs) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(t, **kwargs))
