"""Hand-annotated byte vectors, written from the Kafka protocol guide and the specs (not from our
decoder's output): headers v0/v1/v2, a flexible message with known and unknown tagged fields,
a nullable struct and a compact nullable array."""
import uuid

from dissector.protocol.decode import decode_request, decode_response
from dissector.protocol.jsonify import to_json


def h(text):
    """Hex with spaces and `#` comments."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


def test_request_header_v0_controlled_shutdown_v0():
    m = decode_request(h("""
        0007          # api_key 7 ControlledShutdown
        0000          # api_version 0 -> request header v0: no client id
        00000001      # correlation_id 1
        00000005      # body: broker_id 5
    """))
    assert (m.api_key, m.api_version, m.correlation_id, m.client_id) == (7, 0, 1, None)
    assert m.body.broker_id == 5 and m.issues == []


def test_request_header_v1_metadata_v1():
    m = decode_request(h("""
        0003 0001 0000002a  # Metadata v1, correlation id 42 -> header v1
        0004 6b636174       # client_id "kcat" (int16 length)
        00000002            # topics: int32 count 2
        0005 7465737431     #   name "test1"
        0001 78             #   name "x"
    """))
    assert (m.api_key, m.api_version, m.correlation_id, m.client_id) == (3, 1, 42, "kcat")
    assert [t.name for t in m.body.topics] == ["test1", "x"]
    assert m.issues == []


def test_request_header_v2_and_flexible_body_with_unknown_tag():
    m = decode_request(h("""
        0012 0003 00000007          # ApiVersions v3 -> header v2
        0003 616263                 # client_id "abc": still a classic int16 string in v2
        00                          # header tagged fields: none
        0b 6c696272646b61666b61     # client_software_name: compact (10+1) "librdkafka"
        06 322e332e30               # client_software_version: compact (5+1) "2.3.0"
        01                          # body tagged fields: 1
        05 02 beef                  #   tag 5 (unknown), size 2
    """))
    assert (m.api_key, m.api_version, m.correlation_id, m.client_id) == (18, 3, 7, "abc")
    assert m.header_tags == {}
    assert m.body.client_software_name == "librdkafka"
    assert m.body.client_software_version == "2.3.0"
    assert m.body.unknown_tags == {5: b"\xbe\xef"}
    assert to_json(m.body)["unknown_tags"] == {"5": "vu8="}
    assert m.issues == []


def test_flexible_response_with_known_tagged_fields():
    m = decode_response(h("""
        00000007                # correlation id (ApiVersions responses always use header v0)
        0000                    # error_code 0
        02                      # api_keys: compact array, 1 element
        0000 0000 000d 00       #   Produce 0..13, no tags
        00000064                # throttle_time_ms 100
        02                      # tagged fields: 2
        00 17                   #   tag 0 supported_features, 23 bytes:
        02                      #     compact array, 1 element
        11 6d657461646174612e76657273696f6e  # name "metadata.version" (16+1)
        0001 0014 00            #     min 1, max 20, no tags
        01 08 000000000000002a  #   tag 1 finalized_features_epoch (int64) 42
    """), 18, 3)
    b = m.body
    assert m.correlation_id == 7 and m.issues == []
    assert b.error_code == 0 and b.throttle_time_ms == 100
    assert [(a.api_key, a.min_version, a.max_version) for a in b.api_keys] == [(0, 0, 13)]
    assert [(f.name, f.min_version, f.max_version) for f in b.supported_features] == [("metadata.version", 1, 20)]
    assert b.finalized_features_epoch == 42
    assert b.finalized_features == [] and b.zk_migration_ready is False  # absent tags: defaults


def test_nullable_struct_present_and_null():
    topic = uuid.UUID("0123456789abcdef0123456789abcdef")
    body = h("""
        00000000 0000            # throttle_time_ms 0, error_code 0
        00                       # error_message: compact nullable string, null
        05 6d656d31              # member_id "mem1"
        00000003 00001388        # member_epoch 3, heartbeat_interval_ms 5000
        01                       # assignment: int8 presence byte 1 -> present
        02                       #   topic_partitions: compact array, 1 element
        0123456789abcdef0123456789abcdef  # topic_id
        03 00000000 00000002     #   partitions: compact [0, 2]
        00                       #   topic partition tags
        00                       #   assignment tags
        00                       # body tags
    """)
    m = decode_response(b"\x00\x00\x00\x09\x00" + body, 68, 0)  # response header v1
    assert m.issues == [] and m.correlation_id == 9
    assert m.body.error_message is None and m.body.member_id == "mem1"
    assert m.body.heartbeat_interval_ms == 5000
    tp = m.body.assignment.topic_partitions
    assert [(t.topic_id, t.partitions) for t in tp] == [(topic, [0, 2])]
    null = body[:20] + b"\xff" + b"\x00"  # presence byte -1: assignment is null
    m = decode_response(b"\x00\x00\x00\x09\x00" + null, 68, 0)
    assert m.issues == [] and m.body.assignment is None


def test_compact_nullable_array():
    head = h("0003 000c 00000001 ffff 00")  # Metadata v12, null client id, no header tags
    m = decode_request(head + h("""
        00      # topics: compact nullable array, null (all topics)
        01 00   # allow_auto_topic_creation true, include_topic_authorized_operations false
        00      # tags
    """))
    assert m.issues == [] and m.client_id is None
    assert m.body.topics is None and m.body.allow_auto_topic_creation is True
    m = decode_request(head + h("""
        01      # topics: empty compact array (0+1)
        00 01 00
    """))
    assert m.issues == [] and m.body.topics == [] and m.body.include_topic_authorized_operations is True


def test_bad_length_claims_are_issues_with_offsets():
    head = h("0003 0001 00000001 0000")  # Metadata v1, client id ""
    m = decode_request(head + h("00000001 fffe"))  # one topic whose name length is -2
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.bad_string_length", 14)]
    m = decode_request(head + h("00000001 0009 6162"))  # name claims 9 bytes, 2 left
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.bad_string_length", 14)]
    m = decode_request(head + h("00000000 00"))  # one byte after the body
    assert [(i.code, i.severity, i.stream_offset) for i in m.issues] == [("kafka.trailing_bytes", "warning", 14)]
    assert m.body.topics == []
    m = decode_request(h("0003 0063 00000001 0000 00"))  # Metadata v99 (flexible header assumed)
    assert [i.code for i in m.issues] == ["kafka.unknown_version"] and m.body is None
    m = decode_request(h("0300 0000 00000001 0000"))  # api key 768
    assert [i.code for i in m.issues] == ["kafka.unknown_api"] and m.body is None
    m = decode_request(h("0012 0003 00000001 0000 00 8080808080"))  # 6-byte varint
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.bad_varint", 11)]


def test_tagged_field_must_fill_its_declared_size():
    # ApiVersions v3 response whose tag 1 (finalized_features_epoch, an int64) claims 9 bytes
    m = decode_response(h("""
        00000007 0000 01 00000000   # corr, error 0, no api keys, throttle 0
        01 01 09 000000000000002a ff
    """), 18, 3)
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.bad_tagged_field", 12)]
    # the value read inside the declared size is kept; the fault is the unused byte
    assert m.body.throttle_time_ms == 0 and m.body.finalized_features_epoch == 42


def test_embedded_consumer_protocol_subscription():
    from dissector.protocol.decode import decode_data
    raw = h("""
        0001                 # version 1 (read by the caller)
        00000002 0001 61 0001 62   # topics ["a", "b"]
        ffffffff             # user_data null
        00000001 0001 61 00000001 00000003   # owned_partitions: a -> [3]
    """)
    issues = []
    sub = decode_data("consumer_protocol_subscription", raw, 2, 1, issues)
    assert issues == []
    assert sub.topics == ["a", "b"] and sub.user_data is None
    assert [(t.topic, t.partitions) for t in sub.owned_partitions] == [("a", [3])]
    assert sub.generation_id == -1  # absent before v2: spec default
