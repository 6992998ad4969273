"""The generated readers' size-dependent fast paths, over all 736 decoders.

The shared round-trip tests use arrays of 0-3 elements; the readers switch to one iter_unpack
(by pairs) per array of fixed-size structs above that, and in flexible versions take that path
only when no element carries tagged fields. Here arrays are long (4-33 elements), with tags on none,
some or all elements, and the fast reader must agree with the body that was encoded (the
schema-driven test encoder), with the interpreter, and on truncations with the interpreter's
partial result.
"""
import random

from dissector.protocol import tree
from dissector.protocol.decode import decode_struct
from dissector.protocol.primitives import DEFAULT_STRUCT
from tests.protocol.conftest import ALL, entry
from tests.protocol.encoder import encode, random_body, random_value

import pytest

IDS = [f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in ALL]


def _strip_tags(obj, schema):
    """No tagged section content (struct-typed tagged fields are always encoded: kept)."""
    obj.unknown_tags = None
    for f in schema[3]:
        if f[6] is not DEFAULT_STRUCT:
            setattr(obj, f[0], [] if isinstance(f[6], list) else f[6])


def long_body(schema, rnd, depth=0):
    """A random body whose arrays (two levels deep) hold 4-33 elements."""
    obj = random_body(schema, rnd, depth)
    for f in schema[2]:
        attr, kind, elem, _, compact, _, _, child = f
        if kind != "array" or depth > 1 or getattr(obj, attr) is None:
            continue
        n = rnd.choice([4, 5, 6, 9, 33])  # even and odd counts past FLAT_MIN: pairs, plus one
        if elem == "struct":
            tagged = rnd.choice([0.0, 0.1, 1.0])  # share of elements that keep their tags
            items = []
            for _ in range(n):
                e = long_body(child, rnd, depth + 1)
                if rnd.random() >= tagged:
                    _strip_tags(e, child)
                items.append(e)
        else:
            ef = ("value", elem, None, False, compact, None, None, None)
            items = [random_value(ef, rnd, depth + 1) for _ in range(n)]
        setattr(obj, attr, items)
    return obj


@pytest.mark.parametrize("decoder", ALL, ids=IDS)
def test_long_arrays_decode_like_the_encoded_body(decoder):
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"long/{k}/{v}/{d}")
    for _ in range(4):
        body = long_body(schema, rnd)
        raw = b"\x07" + encode(schema, body)
        fast, end = reader(raw, 1)
        assert end == len(raw)
        assert fast == body
        slow, end2, _, fault = tree.decode(raw, 1, schema)
        assert fault is None and end2 == end and slow == fast
        # Cut inside the message: the public path falls back to the interpreter, which finds
        # the fault; the fast reader must never hide it (no kafka.decoder_mismatch).
        cuts = {len(raw) - 1, len(raw) // 2, rnd.randrange(1, len(raw))} if len(raw) > 1 else ()
        for cut in sorted(cuts):
            issues = []
            partial = decode_struct(raw[:cut], 1, (reader, schema), issues)
            expected, _, _, fault = tree.decode(raw[:cut], 1, schema)
            assert fault is not None
            assert [(i.code, i.stream_offset) for i in issues] == [(fault.code, fault.offset)]
            assert partial == expected


def _set_records(obj, schema, size):
    """Every non-null records field of obj (at any depth) set to `size` bytes; True if any."""
    found = False
    for f in schema[2] + schema[3]:
        value = getattr(obj, f[0])
        if f[1] == "records" and value is not None:
            setattr(obj, f[0], bytes(range(256)) * (size // 256) + bytes(size % 256))
            found = True
        elif f[1] == "struct" and value is not None:
            found |= _set_records(value, f[7], size)
        elif f[1] == "array" and f[2] == "struct" and value:
            for item in value:
                found |= _set_records(item, f[7], size)
    return found


RECORDS = [(k, v, d) for k, v, d in ALL if "'records'" in repr(entry(k, v, d)[1])]


@pytest.mark.parametrize("decoder", RECORDS, ids=[f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in RECORDS])
def test_record_set_lengths_around_varint_boundaries(decoder):
    """Compact lengths of record sets have an inline two-byte varint path."""
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"records/{k}/{v}/{d}")
    done = 0
    for size in (0, 126, 127, 128, 300, 16382, 16383, 16384, 70000):
        for _ in range(20):
            body = random_body(schema, rnd)
            if _set_records(body, schema, size):
                break
        else:
            continue
        done += 1
        raw = encode(schema, body)
        fast, end = reader(raw, 0)
        assert end == len(raw) and fast == body, size
    assert done


def _speculated(schema, seen=None):
    """The (schema, field) pairs at any depth whose field the readers speculate on."""
    from dissector.codegen.emit_decoders import SPECULATE
    seen = set() if seen is None else seen
    if id(schema) in seen:
        return []
    seen.add(id(schema))
    out = [(schema, f) for f in schema[2] if (schema[0].__name__, f[0]) in SPECULATE]
    for f in schema[2] + schema[3]:
        if f[7] is not None:
            out += _speculated(f[7], seen)
    return out


SPECULATING = [(k, v, d) for k, v, d in ALL if _speculated(entry(k, v, d)[1])]


def _force(obj, schema, form, rnd):
    """Every speculated field of obj (at any depth) set to `form`: "guess" (the form the
    readers expect), "null" (if nullable) or "full" (a non-empty value)."""
    from dissector.codegen.emit_decoders import SPECULATE
    for f in schema[2]:
        attr, kind, _, nullable, _, _, _, child = f
        expect = SPECULATE.get((schema[0].__name__, attr))
        if expect is not None:
            if form == "guess":
                value = None if expect == "null" else {"array": [], "string": "", "bytes": b""}[kind]
            elif form == "null":
                value = None if nullable else getattr(obj, attr)
            else:
                while not (value := random_value(f, rnd, 1)):
                    pass
            setattr(obj, attr, value)
        value = getattr(obj, attr)
        if kind == "struct" and value is not None:
            _force(value, child, form, rnd)
        elif kind == "array" and f[2] == "struct" and value:
            for item in value:
                _force(item, child, form, rnd)


@pytest.mark.parametrize("decoder", SPECULATING, ids=[f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in SPECULATING])
def test_speculative_reads_whatever_the_field_holds(decoder):
    """Readers read past fields real traffic leaves empty (emit_decoders.SPECULATE) as if they
    were, and read again when they are not: both ways decode the encoded body."""
    k, v, d = decoder
    reader, schema = entry(k, v, d)
    rnd = random.Random(f"speculate/{k}/{v}/{d}")
    for form in ("guess", "null", "full") * 4:
        body = random_body(schema, rnd)
        _force(body, schema, form, rnd)
        raw = b"\x07" + encode(schema, body)
        fast, end = reader(raw, 1)
        assert end == len(raw) and fast == body, form
        slow, end2, _, fault = tree.decode(raw, 1, schema)
        assert fault is None and end2 == end and slow == fast
