"""dissector/_value_buffers.c against its specification, pa.array: the analysis tables' columns
laid out in C must be the arrays pyarrow makes of the same values, and any value it does not
take (None returned) must go to pa.array."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from analysis import columns
from dissector._value_buffers import buffers, text_length

TYPES = list(columns._KINDS)
ODD = (True, False, 1.5, 2, "x", b"x", bytearray(b"x"), ("a",), ["a", None], ["a", b"x"], [1],
       1 << 63, -(1 << 63) - 1, "\ud800", ["\udfff"], float("nan"))


_HELD = {"b": int, "h": int, "i": int, "q": int, "d": float, "s": str, "y": bytes, "L": list}


def _value(typ, rnd):
    if rnd.random() < 0.2:
        return None
    if pa.types.is_integer(typ) or pa.types.is_timestamp(typ):
        w = typ.bit_width
        return rnd.choice((0, -1, 1, (1 << (w - 1)) - 1, -(1 << (w - 1)),
                           rnd.randrange(-(1 << (w - 1)), 1 << (w - 1))))
    if pa.types.is_floating(typ):
        return rnd.choice((0.0, -1.5, float("inf"), -0.0, 1e300, rnd.random()))
    if typ == pa.string():
        return rnd.choice(("", "a", "héllo", "\x00x", "z" * rnd.randrange(50), "\U0001f600"))
    if typ == pa.binary():
        return rnd.choice((b"", b"\x00\xff", rnd.randbytes(rnd.randrange(40))))
    return [rnd.choice(("", "ab", "ü", "\U0001f600")) for _ in range(rnd.randrange(4))]


def _same(a, b) -> bool:
    """The same type, nulls and values (NaN as NaN, -0.0 as -0.0)."""
    return (a.type == b.type and a.null_count == b.null_count
            and repr(a.to_pylist()) == repr(b.to_pylist()))


def _pyarrow(values, typ):
    """What _array made before the C path: pa.array, a bad value as null."""
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return pa.array([columns._scalar(v, typ) for v in values], type=typ)


@pytest.mark.parametrize("seed", range(4))
def test_plain_columns_are_what_pyarrow_makes(seed):
    rnd = random.Random(seed)
    laid_out = 0
    for _ in range(500):
        typ = rnd.choice(TYPES)
        values = [_value(typ, rnd) for _ in range(rnd.randrange(0, 70))]
        values = tuple(values) if rnd.random() < 0.5 else values
        got = columns._array(values, typ)
        got.validate(full=True)
        assert _same(got, pa.array(values, type=typ)), (typ, values)
        laid_out += buffers(values, columns._KINDS[typ]) is not None
    assert laid_out == 500   # every plain column went through C


@pytest.mark.parametrize("odd", ODD, ids=repr)
def test_a_value_c_does_not_take_goes_to_pyarrow(odd):
    for typ in TYPES:
        values = [_value(typ, random.Random(1)), odd, None]
        taken = buffers(values, columns._KINDS[typ])
        got = columns._array(values, typ)
        assert _same(got, _pyarrow(values, typ)), (typ, odd)
        if taken is not None:   # only a value of the exact type the kind holds, in range
            assert type(odd) is _HELD[columns._KINDS[typ]], (typ, odd)


def test_values_at_the_limits_of_each_width():
    for typ, kind in columns._KINDS.items():
        if not (pa.types.is_integer(typ) or pa.types.is_timestamp(typ)):
            continue
        top = (1 << (typ.bit_width - 1)) - 1
        assert buffers([top, -top - 1], kind) is not None
        assert buffers([top + 1], kind) is None and buffers([-top - 2], kind) is None


def test_all_null_and_empty_columns():
    for typ, kind in columns._KINDS.items():
        for values in ([], [None] * 9):
            assert _same(columns._array(values, typ), pa.array(values, type=typ))
        nulls, bufs = buffers([None] * 9, kind)
        assert nulls == 9 and bufs[0] == bytes(2)


def test_bad_arguments_are_errors():
    with pytest.raises(TypeError):
        buffers([1], "qq")
    with pytest.raises(ValueError):
        buffers([1], "z")
    with pytest.raises(TypeError):
        buffers(5, "q")


class _Str(str):
    def __len__(self):
        return 99


@pytest.mark.parametrize("seed", range(3))
def test_text_length_counts_what_the_python_counts(seed):
    """text_length against _text_length (its specification) over the columns picked from rows:
    the same count, or None where a value is not plainly a str, bytes or None."""
    rnd = random.Random(seed)
    plain = (None, "", "abc", "héllo", "\U0001f600", b"", b"\x00\xff", "z" * 300)
    odd = (0, 1.5, ["a"], bytearray(b"xy"), _Str("q"), True)
    counted = 0
    for _ in range(300):
        width = rnd.randrange(1, 8)
        sized = tuple(sorted(rnd.sample(range(width), rnd.randrange(1, width + 1))))
        oddity = 0.1 if rnd.random() < 0.2 else 0   # a fifth of the batches hold odd values
        rows = [tuple(rnd.choice(odd if rnd.random() < oddity else plain) for _ in range(width))
                for _ in range(rnd.randrange(0, 30))]
        got = text_length(rows, sized)
        want = columns._text_length(columns._picker(sized)(rows))
        if got is None:
            assert any(type(r[i]) not in (str, bytes, type(None)) for r in rows for i in sized)
        else:
            assert got == want, (rows, sized)
            counted += 1
    assert counted > 200


def test_text_length_declines_rows_it_cannot_read():
    assert text_length([("a",)], (1,)) is None            # a row shorter than the columns
    assert text_length([["a"]], (0,)) is None             # a row that is not a tuple
    assert text_length([("ab", _Str("q"))], (1,)) is None  # its own len()
    assert text_length([], (0,)) == 0
