"""Embedded structures (ConsumerProtocolSubscription/Assignment in JoinGroup/SyncGroup, an
Envelope's inner request and response, DefaultPrincipalData) draw on the enclosing message's
array element budget: one message never holds more elements than the budget, however many
members each claim just under it. Messages are laid out by hand from the protocol guide."""
import struct

from dissector.protocol.decode import decode_request, decode_response
from dissector.protocol.primitives import MAX_ELEMENTS
from tests.protocol.encoder import uvarint

from .support import run_isolated


def _str(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def subscription_v1(owned: int) -> bytes:
    """ConsumerProtocolSubscription v1: no topics, null user data, `owned` partitions entries
    (TopicPartition with an empty topic name and no partitions: 6 bytes each)."""
    return (struct.pack(">hi", 1, 0) + struct.pack(">i", -1) + struct.pack(">i", owned)
            + b"\0\0\0\0\0\0" * owned)


def join_group_v1(metadatas) -> bytes:
    """JoinGroup v1 request (header v1) with protocol type "consumer" and one protocol per
    metadata."""
    body = (_str(b"g") + struct.pack(">ii", 10000, 30000) + _str(b"") + _str(b"consumer")
            + struct.pack(">i", len(metadatas)))
    for i, m in enumerate(metadatas):
        body += _str(b"p%d" % i) + struct.pack(">i", len(m)) + m
    return struct.pack(">hhi", 11, 1, 7) + _str(b"c") + body


def sync_group_response_v0(assignment: bytes) -> bytes:
    return struct.pack(">ih", 7, 0) + struct.pack(">i", len(assignment)) + assignment


def _held(message):
    """Array elements the decoded message holds: the protocols and every decoded metadata's
    owned partitions (counted from the objects, not by the code under test)."""
    n = len(message.body.protocols)
    for p in message.body.protocols:
        decoded = getattr(p.metadata, "decoded", None)
        if decoded is not None:
            n += len(decoded.topics) + len(decoded.owned_partitions)
    return n


def test_members_metadata_share_the_message_budget():
    budget = 1000
    raw = join_group_v1([subscription_v1(900)] * 3)
    m = decode_request(raw, max_elements=budget)
    assert _held(m) <= budget
    kept = [p for p in m.body.protocols if getattr(p.metadata, "decoded", None) is not None]
    assert len(kept) == 1 and len(kept[0].metadata.decoded.owned_partitions) == 900
    # the others stay raw bytes, each with a warning saying the budget is spent
    assert [bytes(p.metadata) for p in m.body.protocols] == [subscription_v1(900)] * 3
    spent = [i for i in m.issues if i.code == "kafka.bad_embedded"]
    assert len(spent) == 2 and all("kafka.too_many_elements" in i.detail for i in spent)
    # within the budget, everything decodes cleanly
    m = decode_request(raw, max_elements=3 + 3 * 900)
    assert _held(m) == 3 + 3 * 900 and m.issues == []


def test_the_body_itself_counts_against_the_budget():
    """Protocols that use up the budget leave nothing for their metadata."""
    raw = join_group_v1([subscription_v1(1)] * 10)
    m = decode_request(raw, max_elements=10)
    assert _held(m) == 10
    assert sum(i.code == "kafka.bad_embedded" for i in m.issues) == 10


def test_a_sync_group_assignment_within_the_budget():
    assignment = struct.pack(">hi", 0, 2) + _str(b"t") + struct.pack(">i", 3) + bytes(12) \
        + _str(b"u") + struct.pack(">i", 0) + struct.pack(">i", -1)
    raw = sync_group_response_v0(assignment)
    ok = decode_response(raw, 14, 0, max_elements=5)
    assert len(ok.body.assignment.decoded.assigned_partitions) == 2 and ok.issues == []
    spent = decode_response(raw, 14, 0, max_elements=4)   # 2 topics + 3 partitions
    assert bytes(spent.body.assignment) == assignment
    assert getattr(spent.body.assignment, "decoded", None) is None
    assert [i.code for i in spent.issues] == ["kafka.bad_embedded"]


def test_an_envelope_inner_request_shares_the_budget():
    """Envelope v0 request whose inner request is the JoinGroup above."""
    inner = join_group_v1([subscription_v1(600)] * 2)

    def compact(b):  # compact bytes: unsigned varint length + 1
        return uvarint(len(b) + 1) + b
    body = compact(inner) + compact(b"") + compact(b"\x7f\0\0\1") + b"\0"
    raw = struct.pack(">hhi", 58, 0, 1) + _str(b"admin") + b"\0" + body
    whole = decode_request(raw)
    assert whole.issues == [] and _held(whole.body.request_data.decoded) == 2 + 1200
    m = decode_request(raw, max_elements=1000)
    assert _held(m.body.request_data.decoded) <= 1000
    assert any(i.code == "kafka.bad_embedded" for i in m.body.request_data.decoded.issues)


def test_members_claiming_just_under_the_default_budget_stay_bounded():
    """Three members' metadata, each with MAX_ELEMENTS - 8 owned partitions (6 bytes on the wire,
    ~130 bytes as objects): sharing the budget keeps one decoded, not three; peak RSS of a fresh
    interpreter stays under what one of them costs twice."""
    result = run_isolated(f"""
        import time
        from tests.fuzz.test_embedded_budget import join_group_v1, subscription_v1, _held
        from dissector.protocol.decode import decode_request
        raw = join_group_v1([subscription_v1({MAX_ELEMENTS} - 8)] * 3)
        base = rss()
        t = time.process_time()
        m = decode_request(raw)
        print(json.dumps({{"held": _held(m), "grown": rss() - base, "cpu": time.process_time() - t,
                          "issues": [i.code for i in m.issues]}}))
    """, timeout=300)
    assert result["held"] <= MAX_ELEMENTS, result
    assert result["issues"] == ["kafka.bad_embedded"] * 2, result
    assert result["grown"] < 450 << 20, result
