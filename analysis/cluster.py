"""The cluster map: brokers, controller and cluster id as Metadata and DescribeCluster responses
advertise them; every connection labelled with its broker's node id; partition leaders over time
and the leader changes with the NOT_LEADER/FENCED errors around them; coordinators; and what looks
misconfigured.

A connection is a broker's when its broker address (ip:port) is one a response advertised
(host as given: a name that is not the address on the wire does not match, and is flagged).
"""
from __future__ import annotations

import weakref

import pandas as pd

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
# what a client sends to a bootstrap address before it knows the brokers
BOOTSTRAP_APIS = frozenset({18, 3, 17, 36})   # ApiVersions, Metadata, SaslHandshake/Authenticate
LEADER_ERRORS = frozenset({"NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH",
                           "UNKNOWN_LEADER_EPOCH", "LEADER_NOT_AVAILABLE"})


def _advertisements(t) -> pd.DataFrame:
    """One row per broker per Metadata/DescribeCluster response: response_ts, client_id,
    cluster_id, controller_id, node_id, host, port, rack."""
    ex = t.exchanges
    cols = ["response_ts", "exchange", "client_id", "cluster_id", "controller_id", "node_id",
            "host", "port", "rack"]
    df = ex[ex["api_key"].isin([METADATA, DESCRIBE_CLUSTER]).fillna(False)
            & ex["brokers"].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df[["response_ts", "exchange", "client_id", "cluster_id", "controller_id",
             "brokers"]].explode("brokers").dropna(subset=["brokers"])
    if df.empty:
        return pd.DataFrame(columns=cols)
    fields = pd.DataFrame(df["brokers"].tolist(), index=df.index)
    df = pd.concat([df.drop(columns="brokers"), fields], axis=1)
    return df.sort_values("response_ts", kind="stable")[cols].reset_index(drop=True)


def brokers(t) -> pd.DataFrame:
    """Per node id, as last advertised: host, port, rack, whether it is the controller (the
    latest controller id), first and last seen, how many responses listed it, and the
    connections that reached its address. Where the capture holds several clusters (two
    cluster ids or more), per cluster id and node id, with the cluster id first."""
    ads = _advertisements(t)
    cols = ["node_id", "host", "port", "rack", "controller", "first_seen", "last_seen",
            "advertised", "connections"]
    if ads.empty:
        return pd.DataFrame(columns=cols)
    multi = bool(broker_clusters(t))
    keys = ["cluster_id", "node_id"] if multi else ["node_id"]
    g = ads.groupby(keys, dropna=False)
    out = g.tail(1).set_index(keys)[["host", "port", "rack"]]
    out["first_seen"] = g["response_ts"].min()
    out["last_seen"] = g["response_ts"].max()
    out["advertised"] = g.size()
    named = ads.dropna(subset=["controller_id"])
    conns = connection_brokers(t, ads)
    if multi:   # each cluster's latest controller; conns have their address's cluster id
        latest = named.groupby("cluster_id")["controller_id"].last()
        out["controller"] = [latest.get(c) == n for c, n in out.index]
    else:
        latest = named["controller_id"].iloc[-1] if len(named) else None
        out["controller"] = out.index == latest
    reached = conns.groupby(keys)["connection_id"].count() if len(conns) else pd.Series()
    out["connections"] = reached.reindex(out.index).fillna(0).astype(int)
    return out.reset_index()[keys[:-1] + cols].sort_values(keys).reset_index(drop=True)


def cluster(t) -> pd.DataFrame:
    """The cluster ids and controllers responses named, in time order, one row per change
    (cluster_id, controller_id, since, responses); where the capture holds several clusters
    (two cluster ids or more), per cluster: another cluster's responses in between change
    nothing."""
    ex = t.exchanges
    df = ex[ex["api_key"].isin([METADATA, DESCRIBE_CLUSTER]).fillna(False)
            & (ex["cluster_id"].notna() | ex["controller_id"].notna())]
    cols = ["cluster_id", "controller_id", "since", "responses"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.sort_values("response_ts", kind="stable")
    if broker_clusters(t):
        cid = df["cluster_id"].astype("string").fillna("").to_numpy()
        ctrl = df["controller_id"].astype("string").fillna("")
        changed = (ctrl != ctrl.groupby(cid).shift()).fillna(True).astype(int)
        g = df.groupby([cid, changed.groupby(cid).cumsum().to_numpy()])
    else:
        key = df["cluster_id"].astype("string").fillna("") + "/" + \
            df["controller_id"].astype("string").fillna("")
        g = df.groupby((key != key.shift()).fillna(True).astype(int).cumsum().to_numpy())
    out = pd.DataFrame({"cluster_id": g["cluster_id"].first(),
                        "controller_id": g["controller_id"].first(),
                        "since": g["response_ts"].first(), "responses": g.size()})
    return out.sort_values("since", kind="stable").reset_index(drop=True)[cols]


# the exchanges columns broker_clusters reads
CLUSTER_COLUMNS = ("api_key", "response_ts", "cluster_id", "brokers", "broker_ip", "broker_port")


def broker_clusters(t) -> dict:
    """(broker address, port) -> cluster id where the capture names two cluster ids or more
    (else empty: one cluster needs no telling apart). From each Metadata and DescribeCluster
    response naming its cluster, in time order, the latest winning: every broker it advertises
    (host as given), then the address it came from, which no advertisement overrides."""
    return _known(t)[1]


def _known(t) -> list:
    """[the exchanges table (weakly), broker_clusters' map, each exchange's cluster by exchange
    number (with_cluster; made when first asked)]: worked out once per exchanges table, which a
    dozen tables of `stats` ask about, and anew for a table put in its place."""
    ex = t.exchanges
    known = getattr(t, "_broker_clusters", None)
    if known is not None and known[0]() is ex:
        return known
    known = [weakref.ref(ex), _broker_clusters(ex), None]
    try:   # the table by weak reference: one replaced is not kept alive by this
        t._broker_clusters = known
    except AttributeError:   # an object that takes no attributes: worked out each time
        pass
    return known


def _broker_clusters(ex) -> dict:
    df = ex.loc[ex["api_key"].isin([METADATA, DESCRIBE_CLUSTER]).fillna(False)
                & ex["cluster_id"].notna(), list(CLUSTER_COLUMNS[1:])]
    if df["cluster_id"].nunique() < 2:
        return {}
    df = df.sort_values("response_ts", kind="stable")
    clusters = df["cluster_id"].astype("object").tolist()
    where = {}
    for brokers, cluster_id in zip(df["brokers"].tolist(), clusters):
        for b in brokers if isinstance(brokers, list) else ():
            if b.get("host") is not None and b.get("port") is not None:
                where[(b["host"], int(b["port"]))] = cluster_id
    for ip, port, cluster_id in zip(df["broker_ip"].astype("object").tolist(),
                                    df["broker_port"].tolist(), clusters):
        if ip is not None and not pd.isna(port):
            where[(ip, int(port))] = cluster_id
    return where


def with_cluster(t, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (rows with an "exchange" column) with the cluster of each exchange's broker in a
    "cluster" column: broker_clusters', "" where it names none (every row of a capture of one
    cluster)."""
    known = _known(t)
    if not known[1]:
        return frame.assign(cluster="")
    if known[2] is None:
        ex = t.exchanges
        known[2] = pd.Series(_address_clusters(ex["broker_ip"], ex["broker_port"], known[1]),
                             index=ex["exchange"].to_numpy())
    return frame.assign(cluster=frame["exchange"].map(known[2]).fillna("").to_numpy(object))


def clustered(t, frame: pd.DataFrame) -> tuple:
    """(`frame` with a cluster_id column first, ["cluster_id"]) where the capture holds several
    clusters (broker_clusters: a group, a partition or a node of one cluster is not another's of
    the same name), else (`frame`, []). `frame` has an "exchange" column."""
    if not broker_clusters(t):
        return frame, []
    frame = with_cluster(t, frame)
    cluster = frame.pop("cluster").astype("string")
    frame.insert(0, "cluster_id", cluster)
    return frame, ["cluster_id"]


def label(frame: pd.DataFrame, text: pd.Series) -> pd.Series:
    """`text` (a name per row of `frame`: a group, a topic, a partition) followed by the row's
    cluster id in brackets where `frame` has one (clustered): on a figure, one name must not
    stand for the groups or partitions of two clusters."""
    text = text.astype("string").fillna("?")
    if "cluster_id" not in frame:
        return text
    return text + " (" + frame["cluster_id"].astype("string").fillna("") + ")"


def _address_clusters(ips: pd.Series, ports: pd.Series, where: dict):
    """The cluster broker_clusters' `where` gives each (ip, port), "" where it names none."""
    known = pd.DataFrame([(ip, port, c) for (ip, port), c in where.items()],
                         columns=["ip", "port", "cluster"])
    at = pd.DataFrame({"ip": ips.astype("object").to_numpy(),
                       "port": ports.to_numpy("int64", na_value=-1)})
    return at.merge(known, on=["ip", "port"], how="left")["cluster"].fillna("").to_numpy(object)


def _addresses(ads: pd.DataFrame) -> dict:
    """(host, port) -> node id, the latest advertisement winning."""
    return {(h, int(p)): n for h, p, n in zip(ads["host"].tolist(), ads["port"].tolist(),
                                              ads["node_id"].tolist())
            if h is not None and not pd.isna(p)}


def connection_brokers(t, ads=None) -> pd.DataFrame:
    """Every connection with the node id of the broker whose advertised address it reached
    (missing when no response advertised it), and whether it carried only what a client sends
    to a bootstrap address; where the capture holds several clusters, the cluster id of its
    broker address first (broker_clusters). `ads`: _advertisements(t), where the caller has it
    already."""
    c = t.connections
    cols = ["connection_id", "client_ip", "client_port", "broker_ip", "broker_port", "node_id",
            "bootstrap_only", "client_ids"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    where = _addresses(_advertisements(t) if ads is None else ads)
    node = [where.get((str(ip), int(port)))
            for ip, port in zip(c["broker_ip"].tolist(), c["broker_port"].tolist())]
    out = c.assign(node_id=pd.array(node, dtype="Int32"), bootstrap_only=_bootstrap_only(t))
    clusters = broker_clusters(t)
    if clusters:
        out = out.assign(cluster_id=pd.array(
            _address_clusters(out["broker_ip"], out["broker_port"], clusters), dtype="string"))
        cols = ["cluster_id"] + cols
    return out[cols].reset_index(drop=True)


def _bootstrap_only(t) -> list:
    """Per connection: whether it carried requests and every one was a bootstrap api
    (BOOTSTRAP_APIS). Grouped in numpy: a Python step per exchange was a second of `stats` on
    the 400 MB dense benchmark capture."""
    ex = t.exchanges
    known = ex["api_key"].notna().to_numpy(bool)
    ids = ex["connection_id"].to_numpy()[known]
    boot = ex["api_key"][known].isin(sorted(BOOTSTRAP_APIS)).to_numpy(bool)
    every = pd.Series(boot).groupby(ids).all()
    return every.reindex(t.connections["connection_id"].to_numpy(), fill_value=False) \
        .astype(bool).tolist()


def misconfigurations(t) -> pd.DataFrame:
    """What looks wrong, one row each (problem, address, detail):
    - bootstrap_not_a_broker: a connection's address no response advertised, carrying only
      bootstrap requests (ApiVersions, Metadata, SASL): clients bootstrap through something
      that is not a broker (a load balancer, an old address);
    - unadvertised_address: a client exchanging more than that with an address no response
      advertised;
    - advertised_unreached: an advertised broker address no connection in the capture reached
      (a wrong advertised listener, or just idle)."""
    cols = ["problem", "address", "detail"]
    ads = _advertisements(t)
    if ads.empty:
        return pd.DataFrame(columns=cols)
    conns = connection_brokers(t, ads)
    rows = []
    unknown = conns[conns["node_id"].isna()]
    for (ip, port), g in unknown.groupby(["broker_ip", "broker_port"], observed=True):
        address = f"{ip}:{port}"
        clients = sorted({str(i) for ids in g["client_ids"] for i in (ids if ids is not None
                                                                        else ())})
        problem = "bootstrap_not_a_broker" if g["bootstrap_only"].all() \
            else "unadvertised_address"
        rows.append((problem, address, f"{len(g)} connections from "
                     f"{', '.join(clients) or 'unknown clients'}"))
    reached = {(str(ip), int(port))
               for ip, port in zip(conns["broker_ip"].tolist(), conns["broker_port"].tolist())}
    # each node's latest address; where there are several clusters, each cluster's nodes
    multi = bool(broker_clusters(t))
    latest = ads.groupby(["cluster_id", "node_id"] if multi else "node_id", dropna=False).tail(1)
    for node, host, port, cid in zip(latest["node_id"], latest["host"], latest["port"],
                                     latest["cluster_id"]):
        if host is not None and not pd.isna(port) and (host, int(port)) not in reached:
            of = f" of cluster {cid}" if multi else ""
            rows.append(("advertised_unreached", f"{host}:{int(port)}",
                         f"node {node}{of}: no connection in the capture"))
    return pd.DataFrame(rows, columns=cols)


def leaders(t) -> pd.DataFrame:
    """Partition leaders as Metadata responses gave them, in time order: response_ts, topic,
    partition, leader_id, leader_epoch (after the cluster id where the capture holds several)."""
    cols = ["response_ts", "topic", "partition", "leader_id", "leader_epoch"]
    ld, by = clustered(t, _leaders(t))
    return ld[by + cols]


def _leaders(t) -> pd.DataFrame:
    p = t.partitions
    df = p[(p["api_key"] == METADATA).fillna(False) & p["leader_id"].notna()]
    cols = ["exchange", "response_ts", "topic", "partition", "leader_id", "leader_epoch"]
    return df.sort_values("response_ts", kind="stable")[cols].reset_index(drop=True)


def leader_changes(t) -> pd.DataFrame:
    """Each change of a partition's leader (or leader epoch) between Metadata responses: when it
    was first seen, from and to, and the leader errors (NOT_LEADER_OR_FOLLOWER,
    FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE) that Produce, Fetch and
    other partition responses carried on that partition since the previous Metadata response:
    the errors that sent the clients to ask again. Where the capture holds several clusters,
    each cluster's partitions apart (broker_clusters: the same topic's partitions have leaders of
    their own in each), with the cluster id first."""
    ld = _leaders(t)
    by = ["cluster_id"] if broker_clusters(t) else []
    cols = by + ["seen_ts", "topic", "partition", "from_leader", "to_leader", "from_epoch",
                 "to_epoch", "errors", "error_names"]
    if ld.empty:
        return pd.DataFrame(columns=cols)
    ld = with_cluster(t, ld.assign(topic=ld["topic"].astype("string")))
    g = ld.groupby(["cluster", "topic", "partition"])
    ld["prev_leader"] = g["leader_id"].shift()
    ld["prev_epoch"] = g["leader_epoch"].shift()
    ld["prev_ts"] = g["response_ts"].shift()
    changed = ld[ld["prev_leader"].notna() & ((ld["leader_id"] != ld["prev_leader"])
                                              | (ld["leader_epoch"] != ld["prev_epoch"])
                                              .fillna(False))]
    if changed.empty:
        return pd.DataFrame(columns=cols)
    p = t.partitions
    errs = p[p["error_name"].astype("string").isin(list(LEADER_ERRORS)).fillna(False)
             & (p["api_key"] != METADATA).fillna(False)]
    errs = with_cluster(t, errs.assign(topic=errs["topic"].astype("string"),
                                       ts=errs["response_ts"].fillna(errs["request_ts"])))
    rows = []
    for r in changed.itertuples(index=False):
        e = errs[(errs["cluster"] == r.cluster) & (errs["topic"] == r.topic)
                 & (errs["partition"] == r.partition)
                 & (errs["ts"] >= r.prev_ts) & (errs["ts"] <= r.response_ts)]
        names = sorted(set(e["error_name"].astype(str)))
        rows.append((r.cluster,) * len(by) + (
            r.response_ts, r.topic, r.partition, r.prev_leader, r.leader_id, r.prev_epoch,
            r.leader_epoch, len(e), ", ".join(names)))
    return pd.DataFrame(rows, columns=cols)


def coordinators(t) -> pd.DataFrame:
    """FindCoordinator answers in time order: response_ts, client_id, key (group or
    transactional id), node_id, host, port (after the cluster id of the broker that answered
    where the capture holds several clusters)."""
    ex = t.exchanges
    cols = ["response_ts", "client_id", "key", "node_id", "host", "port"]
    df = ex[(ex["api_key"] == FIND_COORDINATOR).fillna(False) & ex["brokers"].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for n, ts, cid, found, keys in zip(df["exchange"], df["response_ts"], df["client_id"],
                                       df["brokers"], df["coordinator_keys"]):
        keys = list(keys) if keys is not None else []
        for i, b in enumerate(found if found is not None else ()):
            rows.append((n, ts, cid, keys[i] if i < len(keys) else None, b["node_id"],
                         b["host"], b["port"]))
    found, by = clustered(t, pd.DataFrame(rows, columns=["exchange"] + cols))
    return found[by + cols].sort_values("response_ts", kind="stable").reset_index(drop=True)
