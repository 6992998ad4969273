"""Protocol special cases (DESIGN.md "Protocol facts"), each as byte vectors and end to end
through the pipeline on a small scapy-built capture. Bodies are laid out by hand from the specs
(field by field, commented) or written by kafka-python's encoder, never by our own code."""
import struct
import uuid

from dissector.pipeline import dissect
from dissector.protocol.decode import decode_request, decode_response
from dissector.protocol.embedded import Embedded
from dissector.protocol.jsonify import to_json
from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_row
from tests.analysis.build import Capture, ms, request_bytes, response_bytes
from tests.support import require_module


def s16(s):  # classic string: int16 length + UTF-8
    return struct.pack(">h", len(s)) + s.encode()


def cs(s):  # compact string: uvarint length + 1 (all lengths here are < 127)
    return bytes([len(s) + 1]) + s.encode()


def run(tmp_path, conversation, port=9092):
    """[(request bytes, response bytes or None)] on one connection -> rows as dicts."""
    cap = Capture()
    c = cap.connection(broker_port=port, ts=ms(0))
    t = 10
    for req, resp in conversation:
        c.request(ms(t), req)
        if resp is not None:
            c.response(ms(t + 2), resp)
        t += 10
    path = cap.write(tmp_path / "special.pcap")
    exchanges = list(dissect(path, (port,), level="bodies"))
    return exchanges, [dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(e))) for e in exchanges]


# -- ApiVersions: v0-shaped reply with UNSUPPORTED_VERSION ---------------------------------------

# error_code 35, api_keys: int32 count 1, (api_key 18, min 0, max 3): the v0 layout, no throttle
V0_SHAPED_35 = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 3)


def test_api_versions_unsupported_version_reply_decodes_with_v0_layout():
    for version in (1, 2, 3, 4, 5):
        msg = decode_response(struct.pack(">i", 7) + V0_SHAPED_35, 18, version)
        assert msg.issues == [], version
        assert msg.correlation_id == 7
        assert msg.body.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in msg.body.api_keys] == [(18, 0, 3)]


def test_api_versions_normal_v3_reply_is_unaffected():
    # v3 (flexible body, response header v0): error 0, compact array of 1 + 1 entries, each
    # with an empty tag section, throttle 0, empty body tag section
    body = struct.pack(">hb", 0, 2) + struct.pack(">hhhb", 0, 0, 9, 0) + struct.pack(">ib", 0, 0)
    msg = decode_response(struct.pack(">i", 1) + body, 18, 3)
    assert msg.issues == []
    assert [(k.api_key, k.max_version) for k in msg.body.api_keys] == [(0, 9)]


def test_api_versions_unsupported_version_end_to_end(tmp_path):
    req = request_bytes(18, 3, 1, cs("lib") + cs("1.0") + b"\x00", flexible=True)
    ex, rows = run(tmp_path, [(req, response_bytes(1, V0_SHAPED_35))])
    assert [(r["api_name"], r["api_version"], r["status"], r["error_code"], r["error_name"],
             r["issue_count"]) for r in rows] == [("ApiVersions", 3, "ok", 35, "UNSUPPORTED_VERSION", 0)]


# -- ControlledShutdown v0: request header v0, no client id ---------------------------------------

def test_controlled_shutdown_v0_header_has_no_client_id(tmp_path):
    # header v0: api_key 7, version 0, correlation id 42; body: broker_id 3
    req = struct.pack(">hhi", 7, 0, 42) + struct.pack(">i", 3)
    msg = decode_request(req)
    assert (msg.api_key, msg.api_version, msg.correlation_id, msg.client_id) == (7, 0, 42, None)
    assert msg.body.broker_id == 3 and msg.issues == []
    # response v0: error_code 0, remaining partitions [("t", 1)]
    resp = struct.pack(">i", 42) + struct.pack(">hi", 0, 1) + s16("t") + struct.pack(">i", 1)
    ex, rows = run(tmp_path, [(struct.pack(">i", len(req)) + req, struct.pack(">i", len(resp)) + resp)])
    assert [(r["api_name"], r["api_version"], r["correlation_id"], r["client_id"], r["status"],
             r["issue_count"]) for r in rows] == [("ControlledShutdown", 0, 42, None, "ok", 0)]
    assert ex[0].request_msg.body.broker_id == 3
    assert [(p.topic_name, p.partition_index) for p in ex[0].response_msg.body.remaining_partitions] == [("t", 1)]


# -- raw SASL tokens after SaslHandshake v0: a SCRAM-like two-round exchange ---------------------

def test_scram_tokens_after_handshake_v0(tmp_path):
    handshake = request_bytes(17, 0, 1, s16("SCRAM-SHA-512"))
    accepted = response_bytes(1, struct.pack(">hi", 0, 1) + s16("SCRAM-SHA-512"))
    tokens = [b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
              b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
              b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
              b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="]
    raw = [struct.pack(">i", len(t)) + t for t in tokens]
    meta = request_bytes(3, 1, 2, struct.pack(">i", -1))
    meta_resp = response_bytes(2, struct.pack(">iii", 0, 1, 0))
    ex, rows = run(tmp_path, [(handshake, accepted), (raw[0], raw[1]), (raw[2], raw[3]),
                              (meta, meta_resp)])
    assert [(r["api_name"], r["correlation_id"], r["status"], r["issue_count"]) for r in rows] == [
        ("SaslHandshake", 1, "ok", 0), ("SaslToken", None, "ok", 0), ("SaslToken", None, "ok", 0),
        ("Metadata", 2, "ok", 0)]
    assert [e.request.data for e in ex[1:3]] == [tokens[0], tokens[2]]
    assert [e.response.data for e in ex[1:3]] == [tokens[1], tokens[3]]


def test_failed_handshake_v0_keeps_kafka_framing(tmp_path):
    handshake = request_bytes(17, 0, 1, s16("GSSAPI"))
    refused = response_bytes(1, struct.pack(">hi", 33, 1) + s16("PLAIN"))  # UNSUPPORTED_SASL_MECHANISM
    meta = request_bytes(3, 1, 2, struct.pack(">i", -1))
    ex, rows = run(tmp_path, [(handshake, refused), (meta, response_bytes(2, struct.pack(">iii", 0, 1, 0)))])
    assert [(r["api_name"], r["status"], r["error_code"]) for r in rows] == [
        ("SaslHandshake", "ok", 33), ("Metadata", "ok", 0)]


# -- JoinGroup / SyncGroup with protocol type "consumer" -----------------------------------------

# ConsumerProtocolSubscription v1: int16 version 1, topics ["orders", "pay"], user_data null,
# owned_partitions [("orders", [0, 2])]
SUBSCRIPTION = (struct.pack(">hi", 1, 2) + s16("orders") + s16("pay") + struct.pack(">i", -1)
                + struct.pack(">i", 1) + s16("orders") + struct.pack(">iii", 2, 0, 2))
# ConsumerProtocolAssignment v0: int16 version 0, [("orders", [1])], user_data b"u"
ASSIGNMENT = (struct.pack(">hi", 0, 1) + s16("orders") + struct.pack(">ii", 1, 1)
              + struct.pack(">i", 1) + b"u")


def join_group_v5_request(protocol_type, metadata):
    # group_id, session_timeout, rebalance_timeout, member_id, group_instance_id null,
    # protocol_type, protocols [("range", metadata)]
    return (s16("g") + struct.pack(">ii", 10000, 30000) + s16("") + struct.pack(">h", -1)
            + s16(protocol_type) + struct.pack(">i", 1) + s16("range")
            + struct.pack(">i", len(metadata)) + metadata)


def test_join_group_consumer_subscription_decoded():
    msg = decode_request(request_bytes(11, 5, 9, join_group_v5_request("consumer", SUBSCRIPTION))[4:])
    assert msg.issues == []
    meta = msg.body.protocols[0].metadata
    assert isinstance(meta, Embedded) and meta == SUBSCRIPTION and meta.version == 1
    assert meta.decoded.topics == ["orders", "pay"] and meta.decoded.user_data is None
    assert [(t.topic, t.partitions) for t in meta.decoded.owned_partitions] == [("orders", [0, 2])]
    j = to_json(msg.body)["protocols"][0]["metadata"]
    assert j["version"] == 1 and j["decoded"]["topics"] == ["orders", "pay"]


def test_join_group_other_protocol_types_stay_raw():
    msg = decode_request(request_bytes(11, 5, 9, join_group_v5_request("connect", SUBSCRIPTION))[4:])
    meta = msg.body.protocols[0].metadata
    assert msg.issues == [] and type(meta) is bytes and meta == SUBSCRIPTION


def test_join_group_consumer_with_bad_metadata_is_a_warning_and_raw():
    bad = SUBSCRIPTION[:-3]
    msg = decode_request(request_bytes(11, 5, 9, join_group_v5_request("consumer", bad))[4:])
    assert [i.code for i in msg.issues] == ["kafka.bad_embedded"]
    assert type(msg.body.protocols[0].metadata) is bytes


def test_join_group_v5_response_members_metadata_tried():
    # throttle, error, generation_id, protocol_name, leader, member_id,
    # members [("m1", instance null, SUBSCRIPTION), ("m2", null, b"\xff\xff")]
    body = (struct.pack(">ihi", 0, 0, 4) + s16("range") + s16("m1") + s16("m1")
            + struct.pack(">i", 2) + s16("m1") + struct.pack(">h", -1)
            + struct.pack(">i", len(SUBSCRIPTION)) + SUBSCRIPTION
            + s16("m2") + struct.pack(">h", -1) + struct.pack(">i", 2) + b"\xff\xff")
    msg = decode_response(response_bytes(9, body)[4:], 11, 5)
    assert msg.issues == []
    first, second = (m.metadata for m in msg.body.members)
    assert first.decoded.topics == ["orders", "pay"]
    assert type(second) is bytes and second == b"\xff\xff"   # not a subscription: kept raw


def test_sync_group_assignments_decoded(tmp_path):
    # v3 request: group_id, generation, member_id, instance null, assignments [("m1", ASSIGNMENT)]
    req = (s16("g") + struct.pack(">i", 4) + s16("m1") + struct.pack(">h", -1) + struct.pack(">i", 1)
           + s16("m1") + struct.pack(">i", len(ASSIGNMENT)) + ASSIGNMENT)
    # v3 response: throttle, error, assignment
    resp = struct.pack(">ih", 0, 0) + struct.pack(">i", len(ASSIGNMENT)) + ASSIGNMENT
    ex, rows = run(tmp_path, [(request_bytes(14, 3, 5, req), response_bytes(5, resp))])
    assert rows[0]["issue_count"] == 0 and rows[0]["status"] == "ok"
    a = ex[0].request_msg.body.assignments[0].assignment
    b = ex[0].response_msg.body.assignment
    for x in (a, b):
        assert x.version == 0
        assert [(t.topic, t.partitions) for t in x.decoded.assigned_partitions] == [("orders", [1])]
        assert x.decoded.user_data == b"u"


def test_sync_group_v5_other_protocol_type_raw():
    # v5 (flexible) response: throttle, error, protocol_type "connect", protocol_name "x",
    # compact bytes assignment, empty tags
    body = (struct.pack(">ih", 0, 0) + cs("connect") + cs("x") + bytes([len(ASSIGNMENT) + 1])
            + ASSIGNMENT + b"\x00")
    msg = decode_response(response_bytes(5, body, flexible=True)[4:], 14, 5)
    assert msg.issues == [] and type(msg.body.assignment) is bytes


# -- Envelope: inner request and response decoded recursively -------------------------------------

def test_envelope_inner_messages_decoded(tmp_path):
    # inner: CreateTopics v0 request (header v1) and response (header v0)
    inner_req = (struct.pack(">hhi", 19, 0, 77) + s16("broker-1") + struct.pack(">i", 1) + s16("t")
                 + struct.pack(">ihiii", 3, 1, 0, 0, 30000))
    inner_resp = struct.pack(">i", 77) + struct.pack(">i", 1) + s16("t") + struct.pack(">h", 36)
    # DefaultPrincipalData v0 (flexible), version-prefixed: type, name, token_authenticated, tags
    principal = struct.pack(">h", 0) + cs("User") + cs("alice") + b"\x00" + b"\x00"
    # Envelope v0 request (flexible): compact bytes request_data, compact bytes principal,
    # compact bytes client_host_address (4 bytes), tags
    env_req = (bytes([len(inner_req) + 1]) + inner_req + bytes([len(principal) + 1]) + principal
               + bytes([5]) + bytes([10, 0, 0, 1]) + b"\x00")
    # Envelope v0 response: compact nullable bytes response_data, error_code, tags
    env_resp = bytes([len(inner_resp) + 1]) + inner_resp + struct.pack(">h", 0) + b"\x00"
    req_msg = decode_request(request_bytes(58, 0, 3, env_req, flexible=True)[4:])
    assert req_msg.issues == []
    inner = req_msg.body.request_data.decoded
    assert (inner.api_key, inner.api_version, inner.correlation_id, inner.client_id) == (19, 0, 77, "broker-1")
    assert [t.name for t in inner.body.topics] == ["t"] and inner.body.topics[0].num_partitions == 3
    p = req_msg.body.request_principal.decoded
    assert (p.type, p.name, p.token_authenticated) == ("User", "alice", False)
    resp_msg = decode_response(response_bytes(3, env_resp, flexible=True)[4:], 58, 0, request=req_msg)
    assert resp_msg.issues == []
    inner_r = resp_msg.body.response_data.decoded
    assert inner_r.correlation_id == 77 and inner_r.body.topics[0].error_code == 36
    j = to_json(resp_msg.body)["response_data"]["decoded"]
    assert j["body"]["topics"][0]["name"] == "t"
    # without the request the inner response stays raw
    alone = decode_response(response_bytes(3, env_resp, flexible=True)[4:], 58, 0)
    assert type(alone.body.response_data) is bytes


# -- Fetch v13 by topic id, named from an earlier Metadata v12 response ----------------------------

def test_fetch_topic_ids_resolved_from_metadata(tmp_path):
    require_module("kafka")
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from tests.oracles.kafka_python import build, encode_request, encode_response, framed
    tid = uuid.UUID("6f1c1e2a-8b5e-4c8e-9d43-0a3f5e6b7c81")
    part = dict(error_code=0, partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1],
                isr_nodes=[1], offline_replicas=[])
    meta_req = build(MetadataRequest, dict(topics=None, allow_auto_topic_creation=False), 12)
    meta = build(MetadataResponse, dict(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=1,
                 topics=[dict(error_code=0, name="orders", topic_id=tid, is_internal=False,
                              partitions=[part, dict(part, partition_index=1)])]), 12)
    fetch = build(FetchRequest, dict(replica_id=-1, max_wait_ms=100, min_bytes=1, topics=[
        dict(topic_id=tid, partitions=[dict(partition=0, fetch_offset=0, partition_max_bytes=1000),
                                       dict(partition=1, fetch_offset=5, partition_max_bytes=1000)])]), 13)
    fetched = build(FetchResponse, dict(throttle_time_ms=7, error_code=0, session_id=0, responses=[
        dict(topic_id=tid, partitions=[dict(partition_index=0, error_code=0, high_watermark=0, records=None),
                                       dict(partition_index=1, error_code=1, high_watermark=9, records=None)])]), 13)
    ex, rows = run(tmp_path, [(framed(encode_request(meta_req, 1)), framed(encode_response(meta, 1))),
                              (framed(encode_request(fetch, 2)), framed(encode_response(fetched, 2)))])
    assert [(r["api_name"], r["status"], r["issue_count"]) for r in rows] == [
        ("Metadata", "ok", 0), ("Fetch", "ok", 0)]
    f = rows[1]
    assert (f["topics"], f["partition_count"], f["throttle_time_ms"]) == (["orders"], 2, 7)
    assert (f["error_code"], f["error_name"], f["error_count"]) == (1, "OFFSET_OUT_OF_RANGE", 1)


def test_nested_envelopes_are_not_followed():
    inner = struct.pack(">hhi", 58, 0, 1) + s16("x") + b"\x00" + b"\x01\x01\x01\x00"  # an Envelope
    env_req = bytes([len(inner) + 1]) + inner + b"\x01" + b"\x01" + b"\x00"
    msg = decode_request(request_bytes(58, 0, 3, env_req, flexible=True)[4:])
    assert msg.issues == [] and type(msg.body.request_data) is bytes and msg.body.request_data == inner
