"""The compiled frame buffer (dissector/_framebuf.c) against its Python twin (framebuf.py_*):
random fills, in bounds or not, of random sources give the same bytes or the same error."""
import pytest
from hypothesis import given, settings, strategies as st

from dissector import framebuf
from tests.support import _missing


def compiled():
    try:
        from dissector import _framebuf
    except ImportError:
        _missing("the compiled frame buffer (dissector/_framebuf.c; pip install -e . builds it, "
                 "which needs a C compiler)")
    return _framebuf


def _run(new, fill, finished, n, steps):
    try:
        buf = new(n)
    except ValueError:
        return "negative"
    out = []
    for at, src, start, stop, as_view in steps:
        try:
            fill(buf, at, memoryview(src) if as_view else src, start, stop)
            out.append("ok")
        except ValueError:
            out.append("out of bounds")
    return out, finished(buf)


fills = st.lists(st.tuples(st.integers(-3, 70), st.binary(max_size=40), st.integers(-3, 45),
                           st.integers(-3, 45), st.booleans()), max_size=8)


@settings(max_examples=500, deadline=None)
@given(st.integers(-2, 64), fills)
def test_fills_alike(n, steps):
    c = compiled()
    # cover the whole buffer first: a compiled buffer starts unwritten
    if n > 0:
        steps = [(0, b"\0" * n, 0, n, False)] + steps
    assert _run(c.frame_buffer, c.fill, c.finished, n, steps) == \
        _run(framebuf.py_frame_buffer, framebuf.py_fill, framebuf.py_finished, n, steps)


def test_a_filled_frame_is_plain_bytes():
    c = compiled()
    buf = c.frame_buffer(6)
    c.fill(buf, 0, b"abc", 0, 3)
    c.fill(buf, 3, memoryview(b"xdefx"), 1, 4)
    done = c.finished(buf)
    assert done == b"abcdef" and type(done) is bytes and hash(done) == hash(b"abcdef")
    with pytest.raises(TypeError):
        c.fill([0] * 6, 0, b"a", 0, 1)
