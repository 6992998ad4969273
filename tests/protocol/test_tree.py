"""Tree mode over whole messages: header and body fields with offsets that tile the message."""
from dissector.protocol.tree import request_tree, response_tree

from .test_vectors import h


def _leaves(node):
    if not node.children:
        yield node
    for c in node.children:
        yield from _leaves(c)


def test_request_tree_offsets_and_values():
    raw = h("0003 0001 0000002a 0004 6b636174 00000001 0005 7465737431")
    root = request_tree(raw)
    header, body = root.children
    assert [(n.name, n.offset, n.length, n.value) for n in header.children] == [
        ("request_api_key", 0, 2, 3), ("request_api_version", 2, 2, 1),
        ("correlation_id", 4, 4, 42), ("client_id", 8, 6, "kcat")]
    topics = body.children[0]
    assert (topics.name, topics.offset, topics.length) == ("topics", 14, 11)
    name = topics.children[0].children[0]
    assert (name.name, name.offset, name.length, name.value) == ("name", 18, 7, "test1")
    # leaves come in order without overlapping, each inside its parent; the last ends the message
    pos = 0
    for leaf in _leaves(root):
        assert leaf.offset >= pos
        pos = leaf.offset + leaf.length
    assert pos == len(raw)
    for _, node in root.walk():
        for c in node.children:
            assert node.offset <= c.offset and c.offset + c.length <= node.offset + node.length


def test_tree_shows_where_a_message_breaks():
    raw = h("0003 0001 0000002a 0004 6b636174 00000001 0009 7465")
    root = request_tree(raw)
    assert [(c.name, c.offset, c.value) for c in root.children if c.name == "malformed"] == \
        [("malformed", 18, "kafka.bad_string_length")]


def test_response_tree_flexible_header():
    raw = h("00000009 00") + h("00000000 0000 00 05 6d656d31 00000003 00001388 ff 00")
    root = response_tree(raw, 68, 0)
    header, body = root.children
    assert [(n.name, n.offset, n.length) for n in header.children] == [("correlation_id", 0, 4)]
    assert [c.name for c in body.children][:3] == ["throttle_time_ms", "error_code", "error_message"]
    assert body.offset + body.length == len(raw)
