"""Rebalances: per consumer group and generation, how long the group stopped consuming, who was in
it with what, and what set it off.

Classic protocol (JoinGroup/SyncGroup): generation G's rebalance starts at the first JoinGroup
request of the group after the previous generation's last SyncGroup answer (the capture's first
when there is none) and its members are the JoinGroup answers that gave generation G. It is
synced when the last member's SyncGroup for G is answered, and over when every member has sent
its first Fetch after its own sync: `duration_ms` (start to that last first Fetch, or to the
sync when no member fetched in the capture) is the time the group did not consume.
`trigger`: `first join` (the group's first generation in the capture), `leave` (a LeaveGroup
since the previous generation), `new member` (a member the previous generation did not have),
`heartbeat error: NAME` (a Heartbeat or other group request answered with an error since then,
REBALANCE_IN_PROGRESS most often) or `rejoin`; `trigger_client` names who sent it.

KIP-848 (ConsumerGroupHeartbeat): one row per group and member epoch E the coordinator gave.
Members do not stop as a group: a member reaching E may still wait for partitions others give
up, and gets them later at the same epoch. Started at what set it off, else at the first
heartbeat answered with E; synced when the last member got its assignment of E (its last
answer at E that gave it partitions, else its first at E), and over when each member has sent
its first Fetch after that (`duration_ms`, as above); members, subscriptions (each member's last)
and assignments (topic ids named from the capture's Metadata answers) as held then. `trigger`:
the first since the epoch before of `member left` (epoch -1), `heartbeat error: NAME` (a member
fenced: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID) and `member joined` (epoch 0), else
`epoch bump`.
"""
from __future__ import annotations

import pandas as pd

from .cluster import CLUSTER_COLUMNS, DESCRIBE_CLUSTER, broker_clusters, with_cluster

FETCH, METADATA, HEARTBEAT, JOIN, LEAVE, SYNC, CGH = 1, 3, 12, 11, 13, 14, 68
GROUP_APIS = (8, 9, 12, 13, 14, 11)

REBALANCE_COLUMNS = (
    ("group_id", "string"),
    ("protocol", "string"),           # classic | consumer (KIP-848)
    ("generation", "int32"),          # generation id, or member epoch (KIP-848)
    ("start_ts", "timestamp"),
    ("synced_ts", "timestamp"),
    ("resumed_ts", "timestamp"),      # the last member's first Fetch after its assignment
    ("sync_ms", "float64"),           # start to synced
    ("duration_ms", "float64"),       # start to resumed (to synced when nobody fetched)
    ("members", "int32"),
    ("member_ids", "list<string>"),
    ("subscriptions", "list<string>"),   # "member: topic, topic"
    ("assignments", "list<string>"),     # "member: topic:partition, ..."
    ("trigger", "string"),
    ("trigger_client", "string"),
)
# the columns rebalances() reads, per table (export computes the table from just these)
NEEDS = {
    "exchanges": tuple(dict.fromkeys(
        ("exchange", "api_key", "group_id", "client_id", "client_ip", "request_ts",
         "response_ts", "replica_id", "member_id", "generation_id", "response_epoch",
         "error_code", "error_name", "subscribed_topics", "assigned_partitions")
        + CLUSTER_COLUMNS)),
    "partitions": ("api_key", "topic_id", "topic"),
}
# ... and of their rows only those of these api keys, per table (Metadata and DescribeCluster
# for the cluster of each broker address)
ROWS = {"exchanges": (FETCH, CGH, METADATA, DESCRIBE_CLUSTER) + GROUP_APIS,
        "partitions": (METADATA,)}


def _ms(start, end):
    """end - start in ms; None where a damaged exchange left either time null."""
    if start is None or end is None or pd.isna(start) or pd.isna(end):
        return None
    return (end - start).total_seconds() * 1e3


def _str(v):
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)


def _list(v):
    """A list cell's values, None when missing."""
    if v is None or v is pd.NA or isinstance(v, float):
        return None
    return [str(x) for x in v]


def rebalances(t) -> pd.DataFrame:
    """The rebalances table (REBALANCE_COLUMNS; Arrow dtypes), in time order. Where the capture
    holds several clusters (cluster.broker_clusters), a group of one cluster is not the group
    of the same name in another: each is followed apart, with its own cluster's fetches, and
    the table starts with the cluster id of each row's group."""
    ex = t.exchanges
    api = ex["api_key"]
    g = ex[api.isin([HEARTBEAT, JOIN, LEAVE, SYNC, CGH, 8, 9]).fillna(False)
           & ex["group_id"].notna()]
    rows, clusters = [], []
    if not g.empty:
        g = with_cluster(t, g.assign(group_id=g["group_id"].astype("string"),
                                     client_id=g["client_id"].astype("string"),
                                     client_ip=g["client_ip"].astype("string"))
                         .sort_values("request_ts", kind="stable"))
        names = _topic_names(t.partitions)
        fetches = ex[(api == FETCH).fillna(False) & (ex["replica_id"].fillna(-1) < 0)]
        fetches = with_cluster(t, fetches.assign(client_id=fetches["client_id"].astype("string"),
                                                 client_ip=fetches["client_ip"].astype("string")))
        for (cluster, group), rows_g in g.groupby(["cluster", "group_id"], sort=False):
            theirs = fetches[(fetches["cluster"] == cluster).to_numpy(bool)]
            rows.extend(_classic(group, rows_g, theirs))
            rows.extend(_kip848(group, rows_g, theirs, names))
            clusters.extend([cluster] * (len(rows) - len(clusters)))
    import pyarrow as pa
    import pyarrow.compute as pc
    from .columns import table_schema, to_pandas
    schema = table_schema(REBALANCE_COLUMNS)
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    table = pa.Table.from_arrays(
        [pa.array([None if v is None or pd.isna(v) is True else v for v in col], type=f.type)
         for col, f in zip(columns, schema)], schema=schema)
    if broker_clusters(t):
        table = table.add_column(0, "cluster_id", pa.array(clusters, pa.string()))
    return to_pandas(table.take(pc.sort_indices(table, [("start_ts", "ascending")])))  # nulls last


def _ok(df):
    return df[(df["error_code"].fillna(0) == 0)]


def _classic(group, g, fetches):
    joins = g[g["api_key"] == JOIN]
    done = _ok(joins)
    done = done[done["generation_id"].notna() & (done["generation_id"] >= 0)]
    out = []
    prev_end = prev_members = None
    for gen in sorted(set(done["generation_id"].astype(int))):
        # a member can join twice into one generation (tansu 0.6 answers a rejoin with the same
        # generation): one member, its last answer
        members = _last_per_member(done[done["generation_id"] == gen])
        first_answer = members["response_ts"].min()
        window = joins[(joins["request_ts"] <= first_answer)
                       & ((joins["request_ts"] > prev_end) if prev_end is not None else True)]
        start = window["request_ts"].min() if len(window) else members["request_ts"].min()
        syncs = _last_per_member(g[(g["api_key"] == SYNC) & (g["generation_id"] == gen)])
        synced = syncs["response_ts"].max() if len(syncs) else members["response_ts"].max()
        resumed, assignments = [], []
        for member, sync_ip, sync_cid, sync_ts, assigned in zip(
                syncs["member_id"], syncs["client_ip"], syncs["client_id"],
                syncs["response_ts"], syncs["assigned_partitions"]):
            first = _first_fetch(fetches, sync_ip, sync_cid, sync_ts)
            if first is not None:
                resumed.append(first)
            if _list(assigned) is not None:
                assignments.append(f"{member}: {', '.join(_list(assigned))}")
        resumed_ts = max(resumed) if resumed else None
        end = resumed_ts if resumed_ts is not None else synced
        subs = [f"{m}: {', '.join(_list(s))}" for m, s in zip(members["member_id"],
                                                              members["subscribed_topics"])
                if _list(s) is not None]
        # the member's own JoinGroup request carried its subscription: join it by member id
        for m, s in zip(window["member_id"], window["subscribed_topics"]):
            if _list(s) is not None and _str(m) and not any(x.startswith(f"{m}:")
                                                             for x in subs):
                subs.append(f"{m}: {', '.join(_list(s))}")
        trigger, who = _trigger(g, prev_end, start, prev_members, members)
        out.append((group, "classic", gen, start, synced, resumed_ts,
                    _ms(start, synced),
                    _ms(start, end), len(members),
                    sorted(_str(m) for m in members["member_id"] if _str(m)),
                    sorted(subs), sorted(assignments), trigger, who))
        prev_end = synced
        prev_members = members
    return out


def _first_fetch(fetches, ip, client_id, after):
    """The first Fetch request a client (address and client id) sent at or after `after`."""
    # a damaged exchange can leave any of these null: a null comparison is no match
    same = [(fetches["client_ip"] == ip), (fetches["client_id"] == client_id),
            (fetches["request_ts"] >= after)]
    f = fetches[same[0].fillna(False).astype(bool).to_numpy()
                & same[1].fillna(False).astype(bool).to_numpy()
                & same[2].fillna(False).astype(bool).to_numpy()]
    return f["request_ts"].min() if len(f) else None


def _last_per_member(df):
    """Each member's last row (rows without a member id kept as they are)."""
    return df[~(df["member_id"].notna() & df["member_id"].duplicated(keep="last"))
              .fillna(False).astype(bool).to_numpy()]


def _trigger(g, prev_end, start, prev_members, members):
    """What set generation `members` off: a LeaveGroup since the generation before, a member it
    did not have, a group request answered with an error (a heartbeat told to rejoin), or the
    group's first join."""
    if prev_members is None:
        joins = g[(g["api_key"] == JOIN) & (g["request_ts"] >= start)]
        return "first join", _str(joins["client_id"].iloc[0]) if len(joins) else None
    since = g[(g["request_ts"] <= start) & (g["request_ts"] > prev_end)]
    leaves = since[since["api_key"] == LEAVE]
    if len(leaves):
        return "leave", _str(leaves["client_id"].iloc[0])
    new = members[~members["member_id"].isin(list(prev_members["member_id"].dropna()))
                  .fillna(False).astype(bool)]
    if len(new):
        return "new member", _str(new["client_id"].iloc[0])
    failed = since[(since["error_code"].fillna(0) != 0) & (since["api_key"] != JOIN)]
    if len(failed):
        return f"heartbeat error: {_str(failed['error_name'].iloc[0])}", \
            _str(failed["client_id"].iloc[0])
    return "rejoin", None


def _kip848(group, g, fetches, names):
    # a damaged exchange can leave a time or a member id null: such rows take no part
    reqs = g[((g["api_key"] == CGH) & g["request_ts"].notna()).fillna(False).to_numpy(bool)]
    hb = _ok(reqs[(reqs["response_epoch"].notna() & reqs["response_ts"].notna()
                   & reqs["member_id"].notna()).to_numpy(bool)])
    out = []
    prev_end = None
    for epoch in sorted(set(hb["response_epoch"].astype(int))):
        if epoch <= 0:
            continue
        reached = hb[hb["response_epoch"] == epoch]
        first_reach = reached["request_ts"].min()
        done, resumed, assignments, subs, ids = [], [], [], [], []
        for member, mine in reached.groupby("member_id", sort=False):
            ts, assigned = _member_synced(hb[hb["member_id"] == member], mine)
            done.append(ts)
            first = _first_fetch(fetches, mine["client_ip"].iloc[-1], mine["client_id"].iloc[-1],
                                 ts)
            if first is not None:
                resumed.append(first)
            ids.append(_str(member))
            if assigned is not None:
                assignments.append(f"{member}: {', '.join(_named(assigned, names))}")
            topics = reqs["subscribed_topics"][((reqs["member_id"] == member)
                                                 & (reqs["request_ts"] <= ts)
                                                 & reqs["subscribed_topics"].notna())
                                                .fillna(False).to_numpy(bool)]
            if len(topics):
                subs.append(f"{member}: {', '.join(_list(topics.iloc[-1]))}")
        since = reqs[((reqs["request_ts"] <= first_reach)
                      & ((reqs["request_ts"] > prev_end) if prev_end is not None else True))
                     .to_numpy(bool)]
        trigger, who, at = _kip848_trigger(since)
        start = at if at is not None else first_reach
        synced = max(done)
        resumed_ts = max(resumed) if resumed else None
        out.append((group, "consumer", epoch, start, synced, resumed_ts, _ms(start, synced),
                    _ms(start, resumed_ts if resumed_ts is not None else synced), len(ids),
                    sorted(ids), sorted(subs), sorted(assignments), trigger, who))
        prev_end = synced
    return out


def _member_synced(member_rows, reached):
    """When a member got its assignment of an epoch, and that assignment: the last answer at the
    epoch that gave it partitions (a member reaching an epoch may still wait for partitions
    others give up; an answer taking some away asks it to revoke them for the next epoch), else
    its first answer at the epoch; the assignment held then. A member's epochs only grow, so its
    answers between its first and last at the epoch are at the epoch."""
    first, last = reached["response_ts"].min(), reached["response_ts"].max()
    given = [(ts, _list(a)) for ts, a in zip(member_rows["response_ts"],
                                             member_rows["assigned_partitions"])
             if _list(a) is not None and ts <= last]
    done, held = first, None
    for ts, new in given:
        if ts > first and set(new) - set(held or ()):
            done = ts
        held = new
    held = [new for ts, new in given if ts <= done]
    return done, (held[-1] if held else None)


# errors that put a member out of the group: it rejoins with epoch 0
FENCING_ERRORS = ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID")


def _kip848_trigger(since):
    """The first of: a member leaving (epoch -1), a member fenced (its heartbeat answered with a
    fencing error), a member joining (epoch 0); (trigger, client id, request time)."""
    for ts, epoch, error, cid in zip(since["request_ts"], since["generation_id"],
                                     since["error_name"], since["client_id"]):
        epoch = None if pd.isna(epoch) else int(epoch)
        if epoch == -1:
            return "member left", _str(cid), ts
        if _str(error) in FENCING_ERRORS:
            return f"heartbeat error: {error}", _str(cid), ts
        if epoch == 0:
            return "member joined", _str(cid), ts
    return "epoch bump", None, None


def _named(assigned, names):
    """"topic-id:partition" entries with the topic's name where the capture told it."""
    out = []
    for a in assigned:
        topic, _, partition = a.rpartition(":")
        out.append(f"{names.get(topic, topic)}:{partition}")
    return out


def _topic_names(partitions):
    """{topic id: name} from the Metadata answers' partition rows that carried both."""
    both = partitions[(partitions["api_key"] == METADATA).fillna(False)
                      & partitions["topic_id"].notna() & partitions["topic"].notna()
                      & (partitions["topic"] != partitions["topic_id"]).fillna(False)]
    return dict(zip(both["topic_id"].astype(str), both["topic"].astype(str)))
