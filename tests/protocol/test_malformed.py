"""Partial decoding over all 736 decoders: every truncation of a valid body and random bytes
never raise, yield exactly one error Issue at an offset inside the message, and keep every field
that was complete before the fault."""
import random

from dissector.model import ERROR
from dissector.protocol import tree
from dissector.protocol.decode import decode_request, decode_response, decode_struct
from dissector.protocol.headers import response_header_version
from dissector.protocol.primitives import Body

from .conftest import entry
from .encoder import encode, random_body


def _leaves(node, obj, path=(), in_container=False):
    """(path, node, value, inside an array or tagged section) for every scalar leaf."""
    for child in node.children:
        name = child.name
        if name == "tagged_fields":
            yield from _leaves(child, obj, path + (name,), True)
            continue
        if name.startswith("tag "):
            continue
        sub = obj[int(name[1:-1])] if name.startswith("[") else getattr(obj, name)
        if isinstance(sub, (list, Body)):
            yield from _leaves(child, sub, path + (name,), in_container or isinstance(sub, list))
        else:
            yield path + (name,), child, sub, in_container


def _get(obj, path):
    for name in path:
        if name == "tagged_fields":
            continue
        obj = obj[int(name[1:-1])] if name.startswith("[") else getattr(obj, name)
    return obj


def _rich_body(schema, rnd):
    """A random body with some content (the largest of a few tries)."""
    return max((random_body(schema, rnd) for _ in range(6)), key=lambda b: len(encode(schema, b)))


def test_every_truncation_keeps_the_prefix(decoder):
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"trunc/{k}/{v}/{d}")
    body = _rich_body(schema, rnd)
    raw = encode(schema, body)
    full, _, root, _ = tree.decode(raw, 0, schema, tree=True)
    leaves = list(_leaves(root, full))
    for cut in range(len(raw)):
        issues = []
        partial = decode_struct(raw[:cut], 0, (reader, schema), issues)
        assert isinstance(partial, type(body))
        errors = [i for i in issues if i.severity == ERROR]
        assert len(errors) == 1 and len(issues) == 1, (cut, issues)
        fault = errors[0].stream_offset
        assert 0 <= fault <= cut and errors[0].code.startswith("kafka.")
        for path, node, value, in_container in leaves:
            end = node.offset + node.length
            # Fields complete before the fault are kept; outside arrays and tagged sections
            # (whose lengths are checked before their elements are read) so is every field
            # complete before the cut.
            if end <= fault or (end <= cut and not in_container):
                assert _get(partial, path) == value, (cut, path)


def test_random_bytes_never_raise(decoder):
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"random/{k}/{v}/{d}")
    for n in (0, 1, 3, 8, 17, 64, 300):
        raw = bytes(rnd.getrandbits(8) for _ in range(n))
        issues = []
        body = decode_struct(raw, 0, (reader, schema), issues)
        assert isinstance(body, type(random_body(schema, random.Random(0))))
        assert len([i for i in issues if i.severity == ERROR]) <= 1
        for i in issues:
            assert 0 <= i.stream_offset <= n


def test_huge_counts_are_issues_not_allocations():
    # Metadata v1 request: topics array claiming 2**31-1 entries with 10 bytes left.
    raw = bytes.fromhex("0003 0001 00000007 ffff") + b"\x7f\xff\xff\xff" + bytes(10)
    m = decode_request(raw)
    assert m.api_key == 3 and m.correlation_id == 7
    assert [(i.code, i.stream_offset) for i in m.issues] == [("kafka.bad_array_length", 10)]
    assert m.body.topics == []


def test_whole_messages_with_headers_never_raise():
    rnd = random.Random(5)
    for k, v in ((0, 9), (1, 12), (3, 12), (18, 3), (7, 0), (11, 5)):
        reader, schema = entry(k, v, 0)
        body = encode(schema, _rich_body(schema, rnd))
        header = bytes.fromhex(f"{k:04x}{v:04x}0000002a") + (b"" if (k, v) == (7, 0) else b"\x00\x02id")
        if v >= {0: 9, 1: 12, 3: 9, 18: 3, 11: 6, 7: 3}[k]:
            header += b"\x00"
        msg = header + body
        assert decode_request(msg).issues == []
        for cut in range(len(msg)):
            m = decode_request(msg[:cut])
            assert m.issues and m.issues[0].severity == ERROR
        reader, schema = entry(k, v, 1)
        rbody = encode(schema, _rich_body(schema, rnd))
        rheader = b"\x00\x00\x00\x2a" + (b"\x00" if response_header_version(k, v) == 1 else b"")
        assert decode_response(rheader + rbody, k, v).issues == []
        for cut in range(len(rheader) + len(rbody)):
            decode_response((rheader + rbody)[:cut], k, v)


def test_hypothesis_bytes_never_raise(decoder):
    """Random byte strings, and valid bodies with random bytes spliced in, from hypothesis."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    valid = encode(schema, _rich_body(schema, random.Random(f"hyp/{k}/{v}/{d}")))

    @settings(max_examples=12, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=200), st.integers(0, max(len(valid) - 1, 0)))
    def check(noise, at):
        for raw in (noise, valid[:at] + noise + valid[at + len(noise):]):
            issues = []
            decode_struct(raw, 0, (reader, schema), issues)
            assert len([i for i in issues if i.severity == ERROR]) <= 1
            assert all(0 <= i.stream_offset <= len(raw) for i in issues)

    check()
