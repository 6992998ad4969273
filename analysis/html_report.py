"""One self-contained HTML report: plots as inline base64 PNG, tables as HTML, inline CSS, no
scripts and no external URL, so it opens offline in any browser."""
from __future__ import annotations

import html
from datetime import datetime, timezone

from .plots import FIGURES, png_data_uri
from .summary import sections
from .terminal import fmt

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; } th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
img.plot { display: block; max-width: 100%; margin: 0.5em 0; }
p.meta { color: #666; }
"""


def _table(df) -> str:
    numeric = [df[c].dtype.kind in "iuf" if hasattr(df[c].dtype, "kind") else False
               for c in df.columns]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for values in df.itertuples(index=False):
        cells = "".join(f'<td{" class=n" if n else ""}>{html.escape(fmt(v))}</td>'
                        for v, n in zip(values, numeric))
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render(t, title="Kafka traffic report", sources=(), top=10) -> str:
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class=meta>{html.escape(', '.join(map(str, sources)))} &middot; generated "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC by kafka-dissect</p>"]
    for name, make in FIGURES:
        fig = make(t)
        if fig is not None:
            parts.append(f"<h2>{html.escape(name)}</h2>"
                         f'<img class=plot alt="{html.escape(name)}" src="{png_data_uri(fig)}">')
    for name, df in sections(t, top=top):
        if len(df):
            parts.append(f"<h2>{html.escape(name)}</h2>{_table(df)}")
    parts.append("</body></html>")
    return "\n".join(parts)


def write(t, path, **kwargs) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(t, **kwargs))
