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


# A 3 MiB buffer allocated, freed and allocated again: with freed memory kept, the second one
# reuses the first one's pages; by default the first is a mapping of its own, unmapped when
# freed, and the second is faulted in again page by page.
_REUSE = """
import resource, sys
from dissector import _framebuf
if sys.argv[1] == "keep":
    assert _framebuf.keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
n = 3 << 20
buf = b"\\1" * n   # every page written
del buf
before = faults()
buf = b"\\1" * n
print(faults() - before)
"""


def _second_faults(mode):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _REUSE, mode], capture_output=True, text=True,
                         check=True).stdout
    return int(out)


def test_keep_freed_memory_reuses_pages():
    compiled()
    import platform
    if platform.libc_ver()[0] != "glibc":
        assert not compiled().keep_freed_memory()   # nothing to set elsewhere
        return
    pages = (3 << 20) // 4096
    assert _second_faults("default") > pages // 2
    assert _second_faults("keep") < pages // 10


def test_python_twin_keeps_nothing():
    assert framebuf.py_keep_freed_memory() is False
