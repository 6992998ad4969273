"""The partitions table for the APIs the scenario capture does not carry (ListOffsets, OffsetFetch
old and group-batched, Fetch by topic id, ShareFetch), from hand-made bodies with the specs'
field names, and robustness to partial bodies."""
import uuid

from analysis.partitions import partition_rows
from analysis.schema import PARTITION_COLUMNS

from .fake import NS, Run, connection, exchange, tables

COL = {name: i for i, (name, _) in enumerate(PARTITION_COLUMNS)}


def values(rows, *names):
    return [tuple(r[COL[n]] for n in names) for r in rows]


def test_list_offsets():
    run = Run()
    ex = exchange(connection(run), 1, 2, 7, 0, 2,
                  req=NS(topics=[NS(name="t", partitions=[NS(partition_index=0, timestamp=-1),
                                                          NS(partition_index=1, timestamp=-2)])]),
                  resp=NS(topics=[NS(name="t", partitions=[
                      NS(partition_index=0, error_code=0, timestamp=-1, offset=42),
                      NS(partition_index=1, error_code=3, timestamp=-1, offset=-1)])]))
    rows = partition_rows(ex)
    assert values(rows, "topic", "partition", "timestamp_query", "listed_offset", "error_name") \
        == [("t", 0, -1, 42, "NONE"), ("t", 1, -2, -1, "UNKNOWN_TOPIC_OR_PARTITION")]


def test_offset_fetch_old_and_grouped():
    run = Run()
    c = connection(run)
    old = exchange(c, 1, 9, 5, 0, 1,
                   req=NS(group_id="g", topics=[NS(name="t", partition_indexes=[0, 1])]),
                   resp=NS(topics=[NS(name="t", partitions=[
                       NS(partition_index=0, committed_offset=10, error_code=0),
                       NS(partition_index=1, committed_offset=-1, error_code=0)])]))
    grouped = exchange(c, 2, 9, 8, 0, 1,
                       req=NS(groups=[NS(group_id="g2", topics=[NS(name="u",
                                                                  partition_indexes=[4])])]),
                       resp=NS(groups=[NS(group_id="g2", topics=[NS(name="u", partitions=[
                           NS(partition_index=4, committed_offset=77, error_code=0)])])]))
    assert values(partition_rows(old), "group_id", "partition", "committed_offset") == \
        [("g", 0, 10), ("g", 1, -1)]
    assert values(partition_rows(grouped), "group_id", "topic", "committed_offset") == \
        [("g2", "u", 77)]


def test_fetch_by_topic_id():
    run = Run()
    known, unknown = uuid.uuid4(), uuid.uuid4()
    ex = exchange(connection(run), 1, 1, 13, 0, 5,
                  req=NS(max_wait_ms=500, topics=[
                      NS(topic=None, topic_id=known, partitions=[NS(partition=0, fetch_offset=5)]),
                      NS(topic=None, topic_id=unknown, partitions=[NS(partition=0,
                                                                      fetch_offset=1)])]),
                  resp=NS(responses=[
                      NS(topic="named", topic_id=known, partitions=[NS(
                          partition_index=0, error_code=0, high_watermark=9, records=None)]),
                      NS(topic=None, topic_id=unknown, partitions=[NS(
                          partition_index=0, error_code=0, high_watermark=3, records=None)])]))
    rows = partition_rows(ex)
    # the request names the first topic by id only: merged with the response that has the name
    got = {(r[COL["topic_id"]], r[COL["fetch_offset"]], r[COL["high_watermark"]])
           for r in rows}
    assert got == {(str(known), 5, 9), (str(unknown), 1, 3)}
    by_id = {r[COL["topic_id"]]: r[COL["topic"]] for r in rows}
    assert by_id[str(unknown)] == str(unknown)   # no name known: the id stands in


def test_share_fetch():
    run = Run()
    tid = uuid.uuid4()
    ex = exchange(connection(run), 1, 78, 1, 0, 5,
                  req=NS(group_id="sg", topics=[NS(topic_id=tid, partitions=[
                      NS(partition_index=2)])]),
                  resp=NS(error_code=0, responses=[NS(topic_id=tid, partitions=[
                      NS(partition_index=2, error_code=0, records=b"\x00" * 70)])]))
    assert values(partition_rows(ex), "group_id", "topic", "partition", "bytes") == \
        [("sg", str(tid), 2, 70)]


def test_partial_body_keeps_rows_found():
    run = Run()
    ex = exchange(connection(run), 1, 0, 9, 0, 5,
                  req=NS(topic_data=[NS(name="t", partition_data=[NS(index=0, records=None)])]),
                  resp=NS(responses=[NS(name="t", partition_responses=None)]))
    assert values(partition_rows(ex), "topic", "partition") == [("t", 0)]
    broken = exchange(connection(run, 2), 2, 1, 12, 0, 5, req=NS(topics=[NS()]), resp=None)
    assert partition_rows(broken) == []


def test_other_apis_have_no_partition_rows():
    run = Run()
    ex = exchange(connection(run), 1, 3, 12, 0, 5, req=NS(topics=None), resp=NS(topics=[]))
    t = tables(run, [ex])
    assert len(t.partitions) == 0 and len(t.exchanges) == 1


def test_values_of_the_wrong_type_become_null():
    """A damaged body can hold anything: the table is still built, the bad value is null."""
    run = Run()
    c = connection(run)
    good = exchange(c, 1, 2, 7, 0, 2,
                    req=NS(topics=[NS(name="t", partitions=[NS(partition_index=0, timestamp=-1)])]),
                    resp=NS(topics=[NS(name="t", partitions=[
                        NS(partition_index=0, error_code=0, offset=42)])]))
    bad = exchange(c, 2, 2, 7, 3, 4,
                   req=NS(topics=[NS(name="t", partitions=[NS(partition_index=1,
                                                              timestamp=b"junk")])]),
                   resp=NS(topics=[NS(name="t", partitions=[
                       NS(partition_index=1, error_code=0, offset=2 ** 70)])]))
    p = tables(run, [good, bad]).partitions
    assert p["listed_offset"].tolist()[0] == 42
    assert p["listed_offset"].isna().tolist() == [False, True]
    assert p["timestamp_query"].isna().tolist() == [False, True]


def test_topic_id_texts_remembered_within_bounds(monkeypatch):
    """A topic id's text is the UUID's, whether the id comes as a UUID or its 16 bytes, the
    same each time; forged ids past the bound do not grow what is remembered."""
    from analysis import partitions as P
    monkeypatch.setattr(P, "_ID_TEXTS", {})
    monkeypatch.setattr(P, "MAX_ID_TEXTS", 3)
    u = uuid.UUID("0b8e7c1a-2f4d-4e6b-9a1c-3d5e7f9a1b2c")
    assert P.topic_id_str(u) == P.topic_id_str(u.bytes) == P.topic_id_str(bytearray(u.bytes)) \
        == P.topic_id_str(memoryview(u.bytes)) == str(u)
    assert P.topic_id(uuid.UUID(int=0)) is None and P.topic_id(bytes(16)) is None
    for n in range(10):
        forged = uuid.UUID(int=n + 1)
        assert P.topic_id_str(forged) == str(forged)
        assert len(P._ID_TEXTS) <= 3
    assert P.topic_id_str(b"short") == "b'short'"
