"""Matplotlib figures of the analyses. Each function takes Tables and returns a Figure, or None when
the capture has nothing to show; `png_data_uri` embeds a figure in HTML without any file or URL."""
from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")   # no display: figures are rendered to bytes only
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import consumers, errors, latency, producers  # noqa: E402

MAX_SERIES = 8   # lines per plot; the busiest ones are kept


def _top(series, n=MAX_SERIES):
    return list(series.value_counts().index[:n])


def _times(series):
    """UTC timestamps as naive datetime64 for matplotlib."""
    return series.dt.tz_localize(None).astype("datetime64[ns]")


def _time_axis(ax, times) -> None:
    """Concise clock labels (UTC), and a few seconds of range around a single instant so that
    one point does not get an axis of years."""
    lo, hi = times.min(), times.max()
    if pd.notna(lo) and (hi - lo) < pd.Timedelta(milliseconds=1):
        ax.set_xlim(lo - pd.Timedelta(seconds=2), hi + pd.Timedelta(seconds=2))
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def latency_distribution(t):
    """Histogram of latency_ms per api (log-spaced bins), Fetch long polls left out."""
    df = latency.answered(t.exchanges)
    df = df[df["latency_ms"] > 0]
    if df.empty:
        return None
    values = df["latency_ms"].astype("float64").to_numpy()
    bins = np.logspace(np.log10(values.min()), np.log10(values.max() * 1.01), 40)
    fig, ax = plt.subplots(figsize=(9, 4))
    for api in _top(df["api_name"].astype(str)):
        v = df.loc[df["api_name"].astype(str) == api, "latency_ms"].astype("float64")
        ax.hist(v, bins=bins, histtype="step", linewidth=1.5, label=f"{api} ({len(v)})")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("requests")
    ax.set_title("Latency distribution per api")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def latency_over_time(t):
    """p99 latency per second and api, with the request rate below."""
    ts = latency.time_series(t.exchanges)
    if ts.empty:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for api in _top(ts["api_name"].astype(str)):
        s = ts[ts["api_name"].astype(str) == api]
        x = _times(s["second"])
        top.plot(x, s["p99"].astype("float64"), marker=".", label=api)
        bottom.plot(x, s["requests"].astype("float64"), marker=".", label=api)
    _time_axis(bottom, _times(ts["second"]))
    top.set_yscale("log")   # one slow api must not flatten the others
    top.set_ylabel("p99 latency (ms, log)")
    top.set_title("Latency and requests per second (UTC)")
    bottom.set_ylabel("requests / s")
    top.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def error_counts(t):
    """Errors by name: failing exchanges and partition rows."""
    b = errors.by_error(t)
    if b.empty:
        return None
    b = b.head(15)
    fig, ax = plt.subplots(figsize=(9, max(2.5, 1.0 + 0.4 * len(b))))
    y = np.arange(len(b))
    ax.barh(y - 0.2, b["exchanges"], height=0.4, label="exchanges")
    ax.barh(y + 0.2, b["partitions"], height=0.4, label="partitions")
    ax.set_yticks(y, [f"{n}{'' if r else ' (fatal)'}" for n, r in zip(b["error_name"],
                                                                     b["retriable"])])
    ax.invert_yaxis()
    ax.set_xlabel("count")
    ax.set_title("Errors by name")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def consumer_lag(t):
    """Lag (high watermark - fetch offset) over time per client, topic and partition."""
    lag = consumers.lag(t)
    if lag.empty:
        return None
    lag = lag.assign(series=lag["client_id"].astype(str) + " " + lag["topic"].astype(str) + "-"
                     + lag["partition"].astype(str))
    fig, ax = plt.subplots(figsize=(9, 4))
    for name in _top(lag["series"]):
        s = lag[lag["series"] == name]
        ax.plot(_times(s["response_ts"]), s["lag"].astype("float64"), marker=".",
                drawstyle="steps-post", label=name)
    _time_axis(ax, _times(lag["response_ts"]))
    ax.set_ylabel("lag (records)")
    ax.set_title("Consumer lag per partition (UTC)")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def produce_rate(t):
    """Records produced per second and topic."""
    rs = producers.rate_series(t)
    if rs.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for topic in _top(rs["topic"].astype(str)):
        s = rs[rs["topic"].astype(str) == topic]
        ax.plot(_times(s["second"]), s["records"].astype("float64"), marker="o", label=topic)
    _time_axis(ax, _times(rs["second"]))
    ax.set_ylabel("records / s")
    ax.set_title("Records produced per second (UTC)")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


FIGURES = (
    ("Latency distribution", latency_distribution),
    ("Latency over time", latency_over_time),
    ("Errors", error_counts),
    ("Consumer lag", consumer_lag),
    ("Produce rate", produce_rate),
)


def png_data_uri(fig, dpi=96) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
