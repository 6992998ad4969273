"""Plotly figures of the report, built from report_data's reductions. Each function returns a
plotly Figure, or None when the capture has nothing to show. Trace names and hover text that come
from the capture are HTML-escaped (Plotly reads a few tags in them)."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from . import anatomy, cluster, consumers, errors, producers, report_data
from .report_data import api_rows, epoch_ms, series_by, width_label

BLUE, ORANGE, GREY, RED, GREEN = "#1f77b4", "#ff7f0e", "#7f7f7f", "#d62728", "#2ca02c"
PALETTE = qualitative.Plotly   # one colour per series (series_by gives at most 10)
FONT = {"size": 11}
TIME_AXIS = {"type": "date", "title": {"text": "time (UTC)"}, "showgrid": True}
# hover text of one exchange; customdata is report_data.hover_rows' list
EXCHANGE_HOVER = ("<b>%{customdata[0]}</b><br>client id %{customdata[1]} (%{customdata[2]})"
                  "<br>latency %{y:.3f} ms<br>packets %{customdata[3]} → %{customdata[4]}"
                  "<br>exchange %{customdata[5]}%{customdata[6]}<extra></extra>")
DELIVERY_HOVER = ("<b>%{customdata[0]}</b><br>end to end %{y:.3f} ms<br>producer %{customdata[1]}"
                  "<br>consumer %{customdata[2]} group %{customdata[3]}<br>Produce request packet "
                  "%{customdata[4]}, Fetch response packet %{customdata[5]}<extra></extra>")


def _layout(height, **kw) -> dict:
    """Legend above the plot area (never over the data), small margins."""
    return dict(height=height, margin={"l": 60, "r": 20, "t": 36, "b": 44}, font=FONT,
                legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0,
                        "yanchor": "bottom", "font": {"size": 10}, "traceorder": "normal"},
                showlegend=True,
                hovermode="closest", **kw)


def _name(s) -> str:
    return html.escape(str(s), quote=False)


def _lone(y: np.ndarray) -> np.ndarray:
    """The values with no value beside them (a line through them draws nothing)."""
    ok = ~np.isnan(y)
    return ok & ~np.r_[False, ok[:-1]] & ~np.r_[ok[1:], False]


def _series(fig, x, y, name, colour, hover, dash="solid", showlegend=True, **axes) -> None:
    """A bucket series: a line broken at the NaNs, and markers only where a bucket has no
    neighbour (markers on every point take most of Plotly's drawing time)."""
    x, y = np.asarray(x, dtype="float64"), np.asarray(y, dtype="float64")
    fig.add_trace(go.Scatter(x=x, y=y, name=name, legendgroup=name, mode="lines",
                             line={"color": colour, "width": 1.2, "dash": dash},
                             connectgaps=False, hovertemplate=hover, showlegend=showlegend,
                             **axes))
    lone = _lone(y)
    if lone.any():
        fig.add_trace(go.Scatter(x=x[lone], y=y[lone], name=name, legendgroup=name,
                                 mode="markers", marker={"color": colour, "size": 4},
                                 showlegend=False, hovertemplate=hover, **axes))


def api_figures(ex, width_ms) -> list[tuple[str, go.Figure]]:
    """One row of small multiples per api: latency over time (bucket p50/p99/max and exchanges
    as points), requests per bucket, latency distribution; busiest api first."""
    out = []
    label = width_label(width_ms)
    for row in api_rows(ex, width_ms):
        fig = go.Figure(layout=_layout(
            240,
            xaxis={**TIME_AXIS, "domain": [0, 0.46]},
            yaxis={"type": "log", "title": {"text": "latency (ms)"}},
            xaxis2={**TIME_AXIS, "domain": [0.53, 0.76], "matches": "x"},
            yaxis2={"anchor": "x2", "title": {"text": f"requests / {label}"},
                    "rangemode": "tozero"},
            xaxis3={"type": "log", "domain": [0.82, 1], "title": {"text": "latency (ms)"}},
            yaxis3={"anchor": "x3", "title": {"text": "requests"}, "rangemode": "tozero"}))
        for name, key, colour, dash in (("p50", "p50", BLUE, "solid"), ("p99", "p99", ORANGE,
                                        "solid"), ("max", "max", GREY, "dot")):
            _series(fig, row["x"], row[key], f"{name} per {label}", colour,
                    f"{name} %{{y:.3f}} ms<br>%{{x}}<extra></extra>", dash)
        for kind, colour, symbol, title in (("ok", BLUE, "circle", "exchanges"),
                                            ("error", RED, "x", "errors")):
            p = row["points"][kind]
            if len(p["x"]):
                fig.add_trace(go.Scatter(
                    x=p["x"], y=p["y"], customdata=p["hover"], name=title, mode="markers",
                    marker={"color": colour, "symbol": symbol, "size": 6, "opacity": 0.7},
                    hovertemplate=EXCHANGE_HOVER))
        _series(fig, row["x"], row["count_series"], "requests", GREEN,
                f"%{{y}} requests in the {label} from %{{x}}<extra></extra>", xaxis="x2",
                yaxis="y2", showlegend=False)
        edges, counts = row["hist_edges"], row["hist_counts"]
        fig.add_trace(go.Scatter(
            x=edges, y=np.append(counts, counts[-1] if len(counts) else 0), xaxis="x3",
            yaxis="y3", mode="lines", line={"shape": "hv", "color": BLUE}, fill="tozeroy",
            name="distribution", showlegend=False,
            hovertemplate="%{y} requests from %{x:.3f} ms<extra></extra>"))
        out.append((row["api"], fig))
    return out


def error_figure(t):
    """Errors by name: failing exchanges and partition rows (the 15 most frequent)."""
    b = errors.by_error(t).head(15)
    if b.empty:
        return None
    names = [_name(f"{n}{'' if r else ' (fatal)'}") for n, r in zip(b["error_name"],
                                                                     b["retriable"])]
    fig = go.Figure(layout=_layout(
        80 + 28 * len(b), xaxis={"title": {"text": "count"}},
        yaxis={"autorange": "reversed", "automargin": True}, barmode="group"))
    fig.add_trace(go.Bar(y=names, x=b["exchanges"], orientation="h", name="exchanges",
                         marker={"color": RED}))
    fig.add_trace(go.Bar(y=names, x=b["partitions"], orientation="h", name="partitions",
                         marker={"color": ORANGE}))
    return fig


def _time_series_figure(series, ytitle, hover):
    if not series:
        return None
    fig = go.Figure(layout=_layout(320, xaxis=TIME_AXIS, yaxis={"title": {"text": ytitle},
                                                                  "rangemode": "tozero"}))
    for s, colour in zip(series, PALETTE):
        _series(fig, s["x"], s["y"], _name(s["name"]), colour,
                f"%{{fullData.name}}<br>{hover}<extra></extra>")
    return fig


def lag_figure(t, width_ms):
    """Largest lag per bucket for the 10 most fetched (client id, topic, partition; and
    cluster, where there are several)."""
    lag = consumers.lag(t)
    if lag.empty:
        return None
    key = cluster.label(lag, lag["client_id"].astype("string").fillna("") + " "
                        + lag["topic"].astype("string") + "-" + lag["partition"].astype("string"))
    return _time_series_figure(
        series_by(key, epoch_ms(lag["response_ts"]),
                  lag["lag"].astype("float64").to_numpy(na_value=np.nan), width_ms, how="max"),
        f"lag (records), max per {width_label(width_ms)}", "lag %{y} at %{x}")


def produce_figure(t, width_ms):
    """Records produced per bucket for the 10 busiest topics (of each cluster, where there are
    several)."""
    p = t.partitions
    p = p[(p["api_key"] == producers.PRODUCE).fillna(False) & p["record_count"].notna()]
    if p.empty:
        return None
    p, _ = cluster.clustered(t, p)
    return _time_series_figure(
        series_by(cluster.label(p, p["topic"]), epoch_ms(p["request_ts"]),
                  p["record_count"].astype("float64").to_numpy(na_value=np.nan), width_ms),
        f"records / {width_label(width_ms)}", "%{y} records from %{x}")


def delivery_figure(t, width_ms):
    """End-to-end record latency: p99 per bucket and topic with the slowest deliveries as points,
    by produce time; its distribution per consumer group."""
    data = report_data.deliveries(t.deliveries, t.exchanges, width_ms)
    if data is None:
        return None
    label = width_label(width_ms)
    fig = go.Figure(layout=_layout(
        320, xaxis={**TIME_AXIS, "domain": [0, 0.6], "title": {"text": "produced (UTC)"}},
        yaxis={"type": "log", "title": {"text": "end to end (ms)"}},
        xaxis2={"type": "log", "domain": [0.68, 1], "title": {"text": "end to end (ms)"}},
        yaxis2={"anchor": "x2", "title": {"text": "records"}, "rangemode": "tozero"}))
    for s, colour in zip(data["p99"], PALETTE):
        _series(fig, s["x"], s["y"], f"{_name(s['name'])} p99 per {label}", colour,
                "%{fullData.name} %{y:.3f} ms<br>%{x}<extra></extra>")
    p = data["points"]
    fig.add_trace(go.Scatter(x=p["x"], y=p["y"], customdata=p["hover"], mode="markers",
                             name="slowest records", hovertemplate=DELIVERY_HOVER,
                             marker={"color": RED, "size": 6, "opacity": 0.7}))
    edges = data["hist_edges"]
    for h in data["hist"]:
        fig.add_trace(go.Scatter(
            x=edges, y=np.append(h["counts"], h["counts"][-1]), xaxis="x2", yaxis="y2",
            mode="lines", line={"shape": "hv"}, name=f"group {_name(h['name'])}",
            hovertemplate="%{fullData.name}: %{y} records from %{x:.3f} ms<extra></extra>"))
    return fig


TIME_PARTS = (("request_transfer_ms", "request transfer", "#9ecae1"),
              ("broker_rtt_ms", "network round trip", "#fdae6b"),
              ("broker_ms", "broker", "#3182bd"),
              ("response_transfer_ms", "response transfer", "#a1d99b"))


def anatomy_figure(t):
    """Where the time goes: per api, the mean request transfer, network round trip, broker time
    and response transfer of answered exchanges, stacked (throttling is part of the broker's)."""
    w = anatomy.where_time_goes(t.exchanges, "api")
    w = w[w[[c for c, _, _ in TIME_PARTS]].notna().any(axis=1)]
    if w.empty:
        return None
    names = [_name(n) for n in w["api_name"]]
    fig = go.Figure(layout=_layout(
        90 + 24 * len(w), barmode="stack", xaxis={"title": {"text": "mean ms per exchange"}},
        yaxis={"autorange": "reversed", "automargin": True}))
    for col, label, colour in TIME_PARTS:
        fig.add_trace(go.Bar(y=names, x=w[col].astype("float64"), orientation="h", name=label,
                             marker={"color": colour},
                             hovertemplate=f"%{{y}}: {label} %{{x:.3f}} ms<extra></extra>"))
    return fig


REBALANCE_HOVER = ("<b>%{y}</b> generation %{customdata[0]}<br>%{customdata[1]} (by "
                   "%{customdata[2]})<br>%{customdata[3]} members<br>synced after "
                   "%{customdata[4]:.1f} ms, consuming again after %{customdata[5]:.1f} ms"
                   "<extra></extra>")


def rebalance_figure(t):
    """The rebalances on the time axis: a bar per group and generation (member epoch for
    KIP-848) from its start to when its members consumed again (to its sync when none fetched),
    a marker at the start (a short one is thinner than a pixel), coloured by what set it off."""
    r = t.rebalances
    r = r[(r["start_ts"].notna() & r["duration_ms"].notna()).to_numpy(dtype=bool)]
    if r.empty:
        return None
    kind = r["trigger"].astype("string").fillna("?").str.split(":").str[0]
    r = r.assign(shown=cluster.label(r, r["group_id"]))   # with its cluster, where several
    groups = sorted({_name(g) for g in r["shown"]})
    fig = go.Figure(layout=_layout(140 + 26 * len(groups), xaxis=TIME_AXIS, barmode="overlay",
                                   yaxis={"type": "category", "automargin": True,
                                          "categoryorder": "array", "categoryarray": groups}))
    for k, colour in zip(sorted(set(kind)), PALETTE):
        sel = r[(kind == k).to_numpy(dtype=bool)]
        y = [_name(g) for g in sel["shown"]]
        start = epoch_ms(sel["start_ts"])
        custom = [[int(gen), _name(trig), _name(who if not pd.isna(who) else "?"), int(n),
                   float(sync), float(dur)]
                  for gen, trig, who, n, sync, dur in zip(
                      sel["generation"], sel["trigger"], sel["trigger_client"], sel["members"],
                      sel["sync_ms"].fillna(0), sel["duration_ms"])]
        fig.add_trace(go.Bar(y=y, x=sel["duration_ms"].astype("float64"), base=start,
                             orientation="h", name=_name(k), legendgroup=k,
                             marker={"color": colour}, customdata=custom,
                             hovertemplate=REBALANCE_HOVER))
        fig.add_trace(go.Scatter(y=y, x=start, mode="markers", name=_name(k), legendgroup=k,
                                 showlegend=False, marker={"color": colour, "symbol": "diamond",
                                                           "size": 8},
                                 customdata=custom, hovertemplate=REBALANCE_HOVER))
    return fig


def leaders_figure(t, width_ms):
    """Partition leaders over time (node id per Metadata response) for the partitions whose
    leader changed, at most 10: a step where the leader moved."""
    lead = cluster.leaders(t)
    if lead.empty:
        return None
    key = cluster.label(lead, lead["topic"].astype("string").fillna("?") + "-"
                        + lead["partition"].astype("string"))
    moved = lead.assign(key=key).groupby("key")["leader_id"].nunique()
    keys = list(moved[moved > 1].index[:10])
    if not keys:
        return None
    fig = go.Figure(layout=_layout(300, xaxis=TIME_AXIS,
                                   yaxis={"title": {"text": "leader (node id)"}, "dtick": 1}))
    for k, colour in zip(keys, PALETTE):
        sel = (key == k).to_numpy()
        fig.add_trace(go.Scatter(
            x=epoch_ms(lead.loc[sel, "response_ts"]), y=lead.loc[sel, "leader_id"].astype(
                "float64"), name=_name(k), mode="lines+markers", line={"shape": "hv",
                                                                      "color": colour},
            marker={"size": 5}, hovertemplate="%{fullData.name}: leader %{y} at %{x}"
                                              "<extra></extra>"))
    return fig


def clients_graph(t, limit: int = 40):
    """Which client ids talk to which brokers: a flow per (client id, broker) weighted by
    exchanges, brokers by node id where a response advertised them (and cluster id where there
    are several); red where the address is one the cluster checks flag
    (cluster.misconfigurations)."""
    cb = cluster.connection_brokers(t)
    if cb.empty:
        return None
    c = t.connections
    counts = dict(zip(c["connection_id"].tolist(), c["exchange_count"].tolist()))
    flagged = {str(a) for a in cluster.misconfigurations(t)["address"]}
    flows = {}
    clusters = cb["cluster_id"].tolist() if "cluster_id" in cb else [""] * len(cb)
    for cid, ids, ip, port, node, of in zip(*(cb[k].tolist() for k in (
            "connection_id", "client_ids", "broker_ip", "broker_port", "node_id")), clusters):
        address = f"{ip}:{port}"
        of = f" of {of}" if of else ""   # the cluster, where there are several
        broker = f"node {node}{of} ({address})" if not pd.isna(node) \
            else f"{address} (no node id)"
        for client in (ids if ids is not None and len(ids) else ["(no client id)"]):
            key = (str(client), broker, address in flagged)
            flows[key] = flows.get(key, 0) + int(counts.get(cid, 0) or 0)
    top = sorted(flows.items(), key=lambda kv: -kv[1])[:limit]
    if not top:
        return None
    labels = sorted({c for (c, _, _), _ in top}) + sorted({b for (_, b, _), _ in top})
    index = {name: i for i, name in enumerate(labels)}
    fig = go.Figure(layout=_layout(120 + 22 * len(labels)))
    fig.add_trace(go.Sankey(
        node={"label": [_name(x) for x in labels], "pad": 12, "thickness": 12},
        link={"source": [index[c] for (c, _, _), _ in top],
              "target": [index[b] for (_, b, _), _ in top],
              "value": [max(v, 1) for _, v in top],
              "color": ["rgba(214,39,40,0.5)" if bad else "rgba(31,119,180,0.3)"
                        for (_, _, bad), _ in top],
              "hovertemplate": "%{source.label} → %{target.label}: %{value} exchanges"
                               "<extra></extra>"}))
    return fig


FLOW_COLOURS = {"producer": BLUE, "topic": GREY, "group": ORANGE, "consumer": GREEN}


def topics_graph(t):
    """Producers -> topics -> consumer groups -> consumers, flows in records
    (report_data.client_flows); a client that produces and consumes is a node on each side."""
    flows = report_data.client_flows(t)
    if flows is None:
        return None
    nodes = pd.concat([flows[["source_kind", "source"]].set_axis(["kind", "name"], axis=1),
                       flows[["target_kind", "target"]].set_axis(["kind", "name"], axis=1)]) \
        .drop_duplicates().reset_index(drop=True)
    index = {(k, n): i for i, (k, n) in enumerate(zip(nodes["kind"], nodes["name"]))}
    labels = [_name(f"group {n}" if k == "group" else n)
              for k, n in zip(nodes["kind"], nodes["name"])]
    fig = go.Figure(layout=_layout(160 + 18 * len(nodes)))
    fig.add_trace(go.Sankey(
        arrangement="snap",
        node={"label": labels, "pad": 10, "thickness": 12,
              "color": [FLOW_COLOURS[k] for k in nodes["kind"]],
              "customdata": list(nodes["kind"]),
              "hovertemplate": "%{customdata} %{label}: %{value} records<extra></extra>"},
        link={"source": [index[k] for k in zip(flows["source_kind"], flows["source"])],
              "target": [index[k] for k in zip(flows["target_kind"], flows["target"])],
              "value": [max(float(v), 1.0) for v in flows["records"]],
              "customdata": [f"{int(v):,}" for v in flows["records"]],
              "color": "rgba(127,127,127,0.25)",
              "hovertemplate": "%{source.label} → %{target.label}: %{customdata} records"
                               "<extra></extra>"}))
    return fig
