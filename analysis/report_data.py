"""What the HTML report plots, reduced so that a capture of millions of exchanges stays a page of a
few megabytes: per-api time buckets (count, p50, p99, max), latency histograms, and only some
exchanges as individual points (`POINTS_RULE` says which; the report prints it).

Times are milliseconds since the epoch (what Plotly's date axes take, shown in UTC). A series has a
NaN after every bucket that is not followed by the next one, so a line stops where traffic stopped
instead of drawing a diagonal across the idle time.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from . import latency
from .cluster import clustered, label

MAX_BUCKETS = 600          # non-empty time buckets in the whole capture, at most
MAX_API_BUCKETS = 6_000    # and non-empty (api, bucket) pairs: all the small multiples' points
ALL_POINTS = 5_000         # at most this many answered exchanges: every one is a point
SLOWEST_POINTS = 100       # otherwise, per api: the slowest ones ...
ERROR_POINTS = 100         # ... and errored ones spread over the capture
HISTOGRAM_BINS = 40
POINTS_RULE = (f"Lines are per-bucket p50, p99 and max latency; a line stops where a bucket had "
               f"no request. Up to {ALL_POINTS:,} answered exchanges, each is also a point; beyond "
               f"that, per api, the {SLOWEST_POINTS} slowest and {ERROR_POINTS} errored exchanges "
               f"(spread over the capture) are points. Fetch long polls (waited out max_wait_ms, "
               f"no records) are left out of latency.")

_MS = 1_000_000   # ns per ms
# bucket widths to choose from, in ms
_WIDTHS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000,
           60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000,
           10_800_000, 21_600_000, 43_200_000, 86_400_000]


def epoch_ms(ts: pd.Series) -> np.ndarray:
    """UTC timestamps as float milliseconds since the epoch (NaN for missing)."""
    ns = ts.astype("int64[pyarrow]").astype("float64").to_numpy(na_value=np.nan)
    return ns / _MS


def _distinct_buckets(ms_sorted, width, new_group=None) -> int:
    """Non-empty buckets of sorted times (of (group, bucket) pairs if `new_group` marks where
    the group changes in an order sorted by group, then time)."""
    step = np.diff(np.floor(ms_sorted / width)) != 0
    return 1 + np.count_nonzero(step if new_group is None else step | new_group)


def bucket_width(ms: np.ndarray, api=None, max_buckets: int = MAX_BUCKETS,
                 max_api_buckets: int = MAX_API_BUCKETS) -> int:
    """The narrowest width in _WIDTHS (ms) giving at most `max_buckets` non-empty buckets, and
    at most `max_api_buckets` non-empty (api, bucket) pairs when `api` (codes) is given."""
    ok = ~np.isnan(ms)
    if not ok.any():
        return _WIDTHS[-1]
    times = np.sort(ms[ok])
    if api is not None:
        order = np.lexsort((ms[ok], np.asarray(api)[ok]))
        by_api, new_api = ms[ok][order], np.diff(np.asarray(api)[ok][order]) != 0
    lo, hi = 0, len(_WIDTHS) - 1
    while lo < hi:   # non-empty buckets only fall as the width grows
        mid = (lo + hi) // 2
        if _distinct_buckets(times, _WIDTHS[mid]) <= max_buckets and (
                api is None or _distinct_buckets(by_api, _WIDTHS[mid], new_api)
                <= max_api_buckets):
            hi = mid
        else:
            lo = mid + 1
    return _WIDTHS[lo]


def width_label(width_ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if width_ms >= size and width_ms % size == 0:
            return f"{width_ms // size} {unit}"
    return f"{width_ms} ms"


def with_gaps(buckets: np.ndarray, width_ms: int, *columns):
    """x (bucket start, ms) and each column with a NaN row inserted after every bucket whose next
    bucket is not adjacent, so Plotly breaks the line there."""
    buckets = np.asarray(buckets, dtype="int64")
    breaks = np.flatnonzero(np.diff(buckets) > 1) + 1
    x = np.insert((buckets * width_ms).astype("float64"), breaks,
                  (buckets[breaks - 1] + 1) * width_ms if len(breaks) else [])
    cols = [np.insert(np.asarray(c, dtype="float64"), breaks, np.nan) for c in columns]
    return (x, *cols)


def bucket_stats(ms: np.ndarray, values: np.ndarray, width_ms: int) -> pd.DataFrame:
    """Per non-empty bucket: bucket number, count, p50, p99, max of `values`."""
    df = pd.DataFrame({"b": np.floor(ms / width_ms).astype("int64"), "v": values})
    g = df.groupby("b", sort=True)["v"]
    out = g.agg(count="count", max="max")
    out["p50"] = g.quantile(0.5)
    out["p99"] = g.quantile(0.99)
    return out.reset_index()


def log_bins(values: np.ndarray, n: int = HISTOGRAM_BINS) -> np.ndarray:
    """Log-spaced bin edges covering the positive values (one bin around a single value)."""
    v = values[values > 0]
    lo, hi = (v.min(), v.max()) if len(v) else (1.0, 1.0)
    if hi <= lo * 1.01:
        lo, hi = lo / 1.5, hi * 1.5
    return np.logspace(np.log10(lo), np.log10(hi * 1.001), n + 1)


def _text(v) -> str:
    """A capture string for Plotly's hover text: `<`, `>` and `&` escaped, since Plotly reads a few
    tags and entities in it (it leaves quotes alone)."""
    return "" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) \
        else html.escape(str(v), quote=False)


def _int(v) -> str:
    return "" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(int(v))


def points(api: np.ndarray, lat: np.ndarray, ms: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Positions of the exchanges drawn one by one (see POINTS_RULE), given per answered
    exchange its api code, latency, time and whether it failed."""
    if len(lat) <= ALL_POINTS:
        return np.arange(len(lat))
    slowest_first = np.argsort(-lat, kind="stable")
    by_time = np.argsort(ms, kind="stable")
    keep = []
    for code in np.unique(api):
        keep.append(slowest_first[api[slowest_first] == code][:SLOWEST_POINTS])
        failed = by_time[(api[by_time] == code) & err[by_time]]
        if len(failed):
            keep.append(failed[np.linspace(0, len(failed) - 1,
                                           min(ERROR_POINTS, len(failed))).astype(int)])
    return np.unique(np.concatenate(keep))


HOVER_COLUMNS = ["api_name", "api_version", "client_id", "client_ip", "client_port",
                 "request_packet", "response_packet", "exchange", "error_name"]


def hover_rows(df: pd.DataFrame) -> list:
    """[api and version, client id, client address, request packet, response packet, exchange,
    error line] per exchange, capture strings escaped."""
    rows = []
    for api, ver, cid, ip, port, rp, sp, ex, err in zip(*(df[c] for c in HOVER_COLUMNS)):
        rows.append([f"{_text(api)} v{_int(ver)}", _text(cid), f"{_text(ip)}:{_int(port)}",
                     _int(rp), _int(sp), _int(ex),
                     f"<br>error {_text(err)}" if _text(err) else ""])
    return rows


def api_rows(ex: pd.DataFrame, width_ms: int) -> list[dict]:
    """Per api, busiest first: name, buckets (x with gaps, count, p50, p99, max), histogram
    (edges, counts), and the point exchanges (x, latency, hover rows)."""
    df = latency.answered(ex, columns=[*HOVER_COLUMNS, "request_ts", "latency_ms", "error_code"])
    if df.empty:
        return []
    ms = epoch_ms(df["request_ts"])
    lat = df["latency_ms"].astype("float64").to_numpy(na_value=np.nan)
    err = (df["error_code"].fillna(0) != 0).to_numpy(dtype=bool)
    api, names = pd.factorize(df["api_name"].astype("category"), use_na_sentinel=False)
    edges = log_bins(lat)
    shown = points(api, lat, ms, err)
    hover = hover_rows(df.iloc[shown])
    out = []
    for code in np.argsort(-np.bincount(api), kind="stable"):
        sel = api == code
        b = bucket_stats(ms[sel], lat[sel], width_ms)
        x, count, p50, p99, mx = with_gaps(b["b"].to_numpy(), width_ms, b["count"], b["p50"],
                                           b["p99"], b["max"])
        mine = np.flatnonzero(api[shown] == code)
        out.append({
            "api": "?" if pd.isna(names[code]) else str(names[code]), "count": int(sel.sum()),
            "x": x, "count_series": count, "p50": p50, "p99": p99, "max": mx,
            "hist_edges": edges, "hist_counts": np.histogram(lat[sel], bins=edges)[0],
            "points": {kind: {"x": ms[shown[i]], "y": lat[shown[i]],
                              "hover": [hover[j] for j in i]}
                       for kind, i in (("ok", mine[~err[shown[mine]]]),
                                       ("error", mine[err[shown[mine]]]))},
        })
    return out


def series_by(key: pd.Series, ms: np.ndarray, values: np.ndarray, width_ms: int,
              how="sum", limit: int = 10) -> list[dict]:
    """Per value of `key` (the `limit` with the most rows): x with gaps and, per bucket, the sum
    or max of `values` (`how`), or a quantile of them (`how` a number)."""
    codes, names = pd.factorize(key, use_na_sentinel=False)
    out = []
    for code in np.argsort(-np.bincount(codes), kind="stable")[:limit]:
        sel = codes == code
        g = pd.DataFrame({"b": np.floor(ms[sel] / width_ms).astype("int64"),
                          "v": values[sel]}).groupby("b", sort=True)["v"]
        agg = (g.quantile(how) if isinstance(how, float) else g.agg(how)).reset_index()
        x, y = with_gaps(agg["b"].to_numpy(), width_ms, agg["v"])
        out.append({"name": "?" if pd.isna(names[code]) else str(names[code]), "x": x, "y": y})
    return out


DELIVERY_POINTS = 200      # the slowest deliveries drawn one by one


def _packets(ex: pd.DataFrame, exchanges, column: str) -> list:
    """The `column` packet number of each exchange number in `exchanges` ("" if unknown)."""
    known = ex.drop_duplicates("exchange")
    pos = pd.Index(known["exchange"]).get_indexer(pd.Index(exchanges))
    values = known[column].to_numpy(dtype=object, na_value=None)
    return [_int(values[i]) if i >= 0 else "" for i in pos]


def deliveries(d: pd.DataFrame, ex: pd.DataFrame, width_ms: int) -> dict | None:
    """Delivered records' end-to-end latency by produce time: p99 per bucket for the 10 topics
    with the most deliveries, the slowest deliveries as points (hover rows: topic-partition and
    offset, producer, consumer, group, Produce request packet, Fetch response packet), and a
    histogram per consumer group (the 8 largest); topics and groups with their cluster where `d`
    has one (cluster.label)."""
    d = d[d["end_to_end_ms"].notna()]
    if d.empty:
        return None
    d = d.assign(group_shown=label(d, d["consumer_group"]).where(d["consumer_group"].notna()))
    ms = epoch_ms(d["produce_request_ts"])
    e2e = d["end_to_end_ms"].astype("float64").to_numpy(na_value=np.nan)
    slow = d.iloc[np.argsort(-e2e, kind="stable")[:DELIVERY_POINTS]]
    places = pd.Series([f"{'' if pd.isna(topic) else topic}-{_int(part)} @ {_int(off)}"
                        for topic, part, off in zip(slow["topic"], slow["partition"],
                                                    slow["offset"])],
                       index=slow.index, dtype="string")
    hover = [[_text(place), f"{_text(pc)} ({_text(pip)})",
              f"{_text(cc)} ({_text(cip)})", _text(group), pp, fp]
             for place, pc, pip, cc, cip, group, pp, fp in zip(
                 label(slow, places),
                 slow["producer_client_id"], slow["producer_ip"], slow["consumer_client_id"],
                 slow["consumer_ip"], slow["group_shown"],
                 _packets(ex, slow["produce_exchange"], "request_packet"),
                 _packets(ex, slow["fetch_exchange"], "response_packet"))]
    edges = log_bins(e2e)
    codes, groups = pd.factorize(d["group_shown"], use_na_sentinel=False)
    hist = [{"name": "(no group)" if pd.isna(groups[c]) else str(groups[c]),
             "counts": np.histogram(e2e[codes == c], bins=edges)[0]}
            for c in np.argsort(-np.bincount(codes), kind="stable")[:8]]
    return {"p99": series_by(label(d, d["topic"]), ms, e2e, width_ms, how=0.99),
            "points": {"x": epoch_ms(slow["produce_request_ts"]),
                       "y": slow["end_to_end_ms"].astype("float64").to_numpy(na_value=np.nan),
                       "hover": hover},
            "hist_edges": edges, "hist": hist}


FLOW_TOPICS = 15    # the topics with the most records in the clients graph
FLOW_LINKS = 40     # and at most this many links of each kind (the heaviest)
NO_CLIENT_ID = "(no client id)"


def client_flows(t) -> pd.DataFrame | None:
    """Who produces to and consumes from which topic, in records: links (source, target,
    records) between nodes (kind, name), kinds "producer" -> "topic" -> "group" -> "consumer"
    (a consumer outside a group: "topic" -> "consumer"). Producers are the clients of Produce
    requests, consumers those of Fetch responses that carried records (as the clients table's
    topics_produced and topics_consumed), groups each consumer's (deliveries.client_groups).
    Limited to the FLOW_TOPICS busiest topics and the FLOW_LINKS heaviest links of each kind;
    None when no client produced or consumed."""
    from .deliveries import FETCH, PRODUCE, client_groups
    p = t.partitions[["exchange", "api_key", "topic", "record_count"]]
    p = p[p["api_key"].isin([PRODUCE, FETCH]).fillna(False) & p["topic"].notna()]
    if p.empty:
        return None
    ex = t.exchanges[["exchange", "client_ip", "client_id"]].astype(
        {"client_ip": "string", "client_id": "string"})
    df, _ = clustered(t, p.merge(ex, on="exchange", how="inner"))
    df = df.assign(topic=label(df, df["topic"]),   # with its cluster, where several
                   records=df["record_count"].astype("float64").fillna(0))
    made = df[(df["api_key"] == PRODUCE).to_numpy()]
    got = df[((df["api_key"] == FETCH) & (df["records"] > 0)).to_numpy()]
    got = got.merge(client_groups(t.exchanges), on=["client_ip", "client_id"], how="left")
    got = got.assign(group_id=label(got, got["group_id"]).where(got["group_id"].notna()))
    topics = pd.concat([made, got]).groupby("topic")["records"].sum() \
        .sort_values(ascending=False, kind="stable").index[:FLOW_TOPICS]
    made, got = made[made["topic"].isin(topics)], got[got["topic"].isin(topics)]
    name = {"client_id": lambda s: s.fillna(NO_CLIENT_ID)}

    def links(frame, source, target, kinds):
        sums = frame.assign(**{c: name[c](frame[c]) for c in (source, target) if c in name}) \
            .groupby([source, target], dropna=False)["records"].sum().reset_index()
        sums = sums.sort_values("records", ascending=False, kind="stable").head(FLOW_LINKS)
        return pd.DataFrame({"source_kind": kinds[0], "source": sums[source].astype(str),
                             "target_kind": kinds[1], "target": sums[target].astype(str),
                             "records": sums["records"]})

    grouped = got["group_id"].notna().to_numpy()
    out = pd.concat([
        links(made, "client_id", "topic", ("producer", "topic")),
        links(got[grouped], "topic", "group_id", ("topic", "group")),
        links(got[grouped], "group_id", "client_id", ("group", "consumer")),
        links(got[~grouped], "topic", "client_id", ("topic", "consumer"))], ignore_index=True)
    return out if len(out) else None
