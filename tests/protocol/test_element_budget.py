"""The per-message array element budget (kafka.too_many_elements): legit big messages decode,
the fast readers and the interpreter charge the same elements (once per array) and fail at the
same place, and a message over budget keeps what was decoded before the fault.

Messages are packed by hand from the Metadata v0 layout in Kafka's spec (MetadataRequest.json,
MetadataResponse.json), so the element counts are known independently of our decoders."""
import struct

import pytest

from dissector.model import ERROR
from dissector.protocol import tree
from dissector.protocol.decode import decode_request, decode_response, tables
from dissector.protocol.primitives import MAX_ELEMENTS, Malformed


def _s(text):
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def metadata_response_v0(brokers, topics, partitions, replicas):
    """Response header v0 + MetadataResponse v0 body; returns (message, element count, offset of
    the first topic's partitions count)."""
    out = [struct.pack(">i", 42), struct.pack(">i", brokers)]
    for i in range(brokers):
        out.append(struct.pack(">i", i) + _s(f"broker-{i}") + struct.pack(">i", 9092))
    out.append(struct.pack(">i", topics))
    first = None
    for t in range(topics):
        out.append(struct.pack(">h", 0) + _s(f"topic-{t}"))
        if first is None:
            first = sum(map(len, out))
        out.append(struct.pack(">i", partitions))
        part = struct.pack(">i", replicas) + struct.pack(f">{replicas}i", *range(replicas))
        for p in range(partitions):
            out.append(struct.pack(">hii", 0, p, 0) + part + part)  # replicas, then isr
    elements = brokers + topics + topics * partitions * (1 + 2 * replicas)
    return b"".join(out), elements, first


def metadata_request_v0(names):
    """Request header v1 (client id "c") + MetadataRequest v0: an array of topic names."""
    return (struct.pack(">hhih", 3, 0, 7, 1) + b"c" + struct.pack(">i", len(names))
            + b"".join(_s(n) for n in names))


def test_default_is_generous_for_a_big_cluster():
    """100k partitions with 3 replicas and 3 in-sync replicas (~700k elements) decode cleanly
    with the default budget."""
    raw, elements, _ = metadata_response_v0(6, 100, 1000, 3)
    assert elements < MAX_ELEMENTS
    m = decode_response(raw, 3, 0)
    assert m.issues == []
    parts = [p for t in m.body.topics for p in t.partitions]
    assert len(parts) == 100_000 and parts[-1].isr_nodes == [0, 1, 2]


@pytest.mark.parametrize("replicas", [1, 3, 20])  # short and iter_unpack-sized int32 arrays
def test_budget_is_charged_once_per_array_in_both_paths(replicas):
    raw, elements, _ = metadata_response_v0(3, 4, 6, replicas)
    reader, schema = tables(3)[1][0]
    body, end = reader(raw, 4, elements)  # exactly enough
    assert end == len(raw)
    obj, end2, _, fault = tree.decode(raw, 4, schema, max_elements=elements)
    assert fault is None and end2 == len(raw) and obj == body
    with pytest.raises(Malformed):
        reader(raw, 4, elements - 1)
    _, _, _, fault = tree.decode(raw, 4, schema, max_elements=elements - 1)
    assert fault.code == "kafka.too_many_elements"
    assert decode_response(raw, 3, 0, max_elements=elements).issues == []


def test_over_budget_keeps_what_came_before():
    """A budget that covers the brokers and the topic list but not the first topic's partitions:
    one error Issue at that count's offset; brokers and topic names are kept."""
    raw, _, first = metadata_response_v0(3, 2, 5, 3)
    m = decode_response(raw, 3, 0, max_elements=3 + 2 + 4)
    assert [(i.code, i.severity, i.stream_offset) for i in m.issues] == \
        [("kafka.too_many_elements", ERROR, first)]
    assert [b.host for b in m.body.brokers] == ["broker-0", "broker-1", "broker-2"]
    assert m.body.topics[0].name == "topic-0" and m.body.topics[0].partitions == []


def test_request_budget_keyword():
    raw = metadata_request_v0([""] * 1000)
    assert decode_request(raw).issues == []
    assert len(decode_request(raw, max_elements=1000).body.topics) == 1000
    m = decode_request(raw, max_elements=999)
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.too_many_elements", 11)]
    assert m.body.topics == [] and m.correlation_id == 7


def test_tagged_arrays_share_the_budget():
    """ApiVersions response v3: api_keys (2 elements) plus the tagged supported_features (3):
    the tagged array draws from the same budget in both paths (the interpreter reads it with a
    sub-walker, the fast readers pass the budget through the tag function)."""
    from dissector.protocol.tree import new_body
    from tests.protocol.encoder import encode
    reader, schema = tables(18)[1][3]
    body = new_body(schema)
    keys = {f[0]: f for f in schema[2] + schema[3]}
    body.api_keys = [new_body(keys["api_keys"][7]) for _ in range(2)]
    body.supported_features = [new_body(keys["supported_features"][7]) for _ in range(3)]
    for i, feature in enumerate(body.supported_features):
        feature.name = f"f{i}"
    raw = encode(schema, body)
    for budget in range(8):
        slow = tree.decode(raw, 0, schema, max_elements=budget)[3]
        try:
            reader(raw, 0, budget)
            fast_ok = True
        except Malformed:
            fast_ok = False
        assert fast_ok == (slow is None) == (budget >= 5), budget
        if budget < 5:
            assert slow.code == "kafka.too_many_elements"
