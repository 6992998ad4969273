"""The records table rows from Produce requests and Fetch/ShareFetch responses.

Messages are built by hand from the protocol's published layouts, decoded by the project's
protocol decoders, and the rows compared with what kafka-python's record builders encoded.
"""
import struct
import uuid

from dissector.model import REQUEST, RESPONSE, Connection, Exchange
from dissector.protocol.decode import decode_request, decode_response
from dissector.records import decode_record_set
from dissector.records.rows import RECORD_COLUMN_NAMES, record_rows
from tests.records.builders import build, control_batch, expected

COL = {name: i for i, name in enumerate(RECORD_COLUMN_NAMES)}
ITEMS = [(1_700_000_000_000 + i, b"k%d" % i if i % 3 else None, b"v%d" % i, [("h", b"%d" % i)])
         for i in range(6)]
LEGACY = [(t, k, v, []) for t, k, v, _ in ITEMS]


def string(s):
    return struct.pack(">h", len(s)) + s


def produce_request(version, topics, corr=11):
    """Produce v0-v8 (non-flexible): header v1, [transactional_id v3+], acks, timeout, topics."""
    body = struct.pack(">hhih", 0, version, corr, 6) + b"client"
    if version >= 3:
        body += struct.pack(">h", -1)
    body += struct.pack(">hi", -1, 30000) + struct.pack(">i", len(topics))
    for name, parts in topics:
        body += string(name) + struct.pack(">i", len(parts))
        for index, records in parts:
            body += struct.pack(">ii", index, len(records)) + records
    return body


def fetch_response_v4(topics, corr=12):
    """Fetch v4 response: header v0, throttle,
    [topic, [partition, error, high watermark, last stable offset, aborted txns, records]]."""
    body = struct.pack(">ii", corr, 0) + struct.pack(">i", len(topics))
    for name, parts in topics:
        body += string(name) + struct.pack(">i", len(parts))
        for index, records in parts:
            body += struct.pack(">ihqqi", index, 0, 100, 100, 0)
            body += struct.pack(">i", len(records)) + records
    return body


def exchange(api_key, version, corr, request=None, response=None):
    ex = Exchange(Connection(7, "10.0.0.1", 40000, "10.0.0.2", 9092), None, None, api_key, version,
                  corr, "client", "ok")
    ex.request_msg = request
    ex.response_msg = response
    return ex


def check_rows(rows, buf, api_key, direction, topic, partition, magic):
    exp = expected(buf)
    assert [(r[COL["offset"]], r[COL["key"]], r[COL["value"]]) for r in rows] == \
        [(o, k, v) for o, _, k, v, _ in exp]
    for r, (_, ts, _, _, headers) in zip(rows, exp, strict=True):
        assert r[COL["connection_id"]] == 7
        assert (r[COL["api_key"]], r[COL["direction"]], r[COL["topic"]], r[COL["partition"]]) == \
            (api_key, direction, topic, partition)
        assert r[COL["magic"]] == magic
        assert r[COL["timestamp"]] == (None if ts is None else ts * 1_000_000)
        assert r[COL["headers"]] == [{"key": k, "value": v} for k, v in headers]
        assert r[COL["batch_crc_ok"]] is True
        assert len(r) == len(RECORD_COLUMN_NAMES)


def test_produce_v3_record_batches():
    a = build(2, 1, ITEMS, producer={"producer_id": 42, "producer_epoch": 1, "base_sequence": 0})
    b = build(2, 0, ITEMS[:2])
    msg = decode_request(produce_request(3, [(b"orders", [(0, a), (3, b)])]))
    assert msg.issues == []
    rows = list(record_rows(exchange(0, 3, 11, request=msg)))
    assert len(rows) == 8
    check_rows(rows[:6], a, 0, REQUEST, "orders", 0, 2)
    check_rows(rows[6:], b, 0, REQUEST, "orders", 3, 2)
    producer = {(r[COL["producer_id"]], r[COL["producer_epoch"]], r[COL["base_sequence"]])
                for r in rows[:6]}
    assert producer == {(42, 1, 0)}
    assert {r[COL["compression"]] for r in rows} == {"gzip", "none"}
    assert all(r[COL["correlation_id"]] == 11 for r in rows)


def test_produce_v2_message_set_magic1():
    buf = build(1, 1, LEGACY)
    msg = decode_request(produce_request(2, [(b"legacy", [(1, buf)])]))
    rows = list(record_rows(exchange(0, 2, 11, request=msg)))
    check_rows(rows, buf, 0, REQUEST, "legacy", 1, 1)
    assert {r[COL["producer_id"]] for r in rows} == {None}


def test_fetch_v4_with_control_batch_and_partial_tail():
    data = build(2, 0, ITEMS, offset=100)
    marker = control_batch(True, offset=106)
    records = data + marker + data[:40]  # a Fetch response may end inside a batch
    msg = decode_response(fetch_response_v4([(b"orders", [(2, records)])]), 1, 4)
    assert msg.issues == []
    rows = list(record_rows(exchange(1, 4, 12, response=msg)))
    check_rows(rows[:6], data, 1, RESPONSE, "orders", 2, 2)
    assert [r[COL["is_control"]] for r in rows] == [False] * 6 + [True]
    assert rows[6][COL["offset"]] == 106 and rows[6][COL["is_transactional"]] is True


def test_already_decoded_record_sets_are_used_and_headers_only_sets_give_no_rows():
    buf = build(2, 0, ITEMS)
    msg = decode_request(produce_request(3, [(b"t", [(0, buf), (1, buf)])]))
    parts = msg.body.topic_data[0].partition_data
    parts[0].records = decode_record_set(parts[0].records)
    parts[1].records = decode_record_set(parts[1].records, records=False)
    rows = list(record_rows(exchange(0, 3, 11, request=msg)))
    check_rows(rows, buf, 0, REQUEST, "t", 0, 2)


def test_share_fetch_topics_by_id():
    from dissector.protocol.generated import share_fetch as sf
    buf = build(2, 0, ITEMS)
    topic_id = uuid.uuid4()
    part = sf.ShareFetchResponse_PartitionData()
    part.partition_index, part.records = 5, memoryview(buf)
    topic = sf.ShareFetchResponse_ShareFetchableTopicResponse()
    topic.topic_id, topic.partitions = topic_id, [part]
    body = sf.ShareFetchResponse()
    body.responses = [topic]
    msg = decode_response(b"", 78, 0)
    msg.body = body
    rows = list(record_rows(exchange(78, 0, 13, response=msg), topic_names={topic_id: "shared"}))
    check_rows(rows, buf, 78, RESPONSE, "shared", 5, 2)
    rows = list(record_rows(exchange(78, 0, 13, response=msg)))
    assert {r[COL["topic"]] for r in rows} == {str(topic_id)}


def test_other_apis_and_missing_bodies_give_no_rows():
    assert list(record_rows(exchange(3, 9, 1))) == []
    assert list(record_rows(exchange(0, 3, 1))) == []
    assert list(record_rows(exchange(1, 4, 1))) == []
