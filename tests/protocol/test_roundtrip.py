"""Every generated decoder against the schema-driven test encoder; the fast readers, the tree
interpreter and tree mode must agree on every (api, version, direction)."""
import random

from dissector.protocol import tree
from dissector.protocol.decode import decode_struct, tables
from dissector.protocol.generated.apis import APIS
from dissector.protocol.primitives import Body

from .conftest import ALL, entry
from .encoder import encode, random_body


def test_coverage_95_keys_368_pairs_736_decoders():
    assert sorted(APIS) == list(range(95))
    assert sum(hi - lo + 1 for _, lo, hi, _, _ in APIS.values()) == 368
    assert len(ALL) == 736
    for k, (_, lo, hi, _, _) in APIS.items():
        req, resp = tables(k)
        assert sorted(req) == sorted(resp) == list(range(lo, hi + 1))


def _leaves(node, obj, path=()):
    """(path, node, value in obj) for every scalar leaf of a tree-mode node."""
    for child in node.children:
        name = child.name
        if name == "tagged_fields":
            yield from _leaves(child, obj, path + (name,))
            continue
        if name.startswith("tag "):
            sub = (obj.unknown_tags or {}).get(int(name[4:]))
        elif name.startswith("["):
            sub = obj[int(name[1:-1])]
        else:
            sub = getattr(obj, name)
        if isinstance(sub, list):
            assert len(child.children) == len(sub), path + (name,)
        if isinstance(sub, (list, Body)):
            yield from _leaves(child, sub, path + (name,))
        else:
            yield path + (name,), child, sub


def test_roundtrip_fast_interpreter_and_tree_agree(decoder):
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"{k}/{v}/{d}")
    for _ in range(8):
        body = random_body(schema, rnd)
        raw = b"\x00\x01\x02" + encode(schema, body)  # decode at a non-zero offset
        fast, end = reader(raw, 3)
        assert end == len(raw)
        assert fast == body
        slow, end2, root, fault = tree.decode(raw, 3, schema, tree=True)
        assert fault is None and end2 == len(raw)
        assert slow == body
        assert root.offset == 3 and root.length == len(raw) - 3
        for path, node, value in _leaves(root, fast):
            assert node.value == value, path
            assert 3 <= node.offset and node.offset + node.length <= len(raw)
        issues = []
        assert decode_struct(raw, 3, (reader, schema), issues) == body and issues == []
