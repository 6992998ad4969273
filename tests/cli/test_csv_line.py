"""The compiled CSV line (dissector/_csvrow.c) writes what its Python twin (output.plain_line)
writes, or hands the row to the slow path (the csv module) alike, on random rows: None, ints of
any size, floats (nan, inf, -0.0), text with commas, quotes and line breaks, booleans, timestamps
across and past the years 1-9999 and past 64 bits (the compiled one leaves those to the slow
path), topic lists, and millionths (a latency's ns / 1e6) of every size."""
import csv
import io
import math

from hypothesis import given, settings, strategies as st

from dissector.output import csv_values, plain_line
from tests.support import _missing


def compiled_line():
    """The compiled csv_line; skips locally (fails in CI) when it is not built."""
    try:
        from dissector._csvrow import csv_line
    except ImportError:
        _missing("the compiled CSV line (dissector/_csvrow.c; pip install -e . builds it, which "
                 "needs a C compiler)")
    return csv_line


NS = 10**9
timestamps = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.integers(-2**80, 2**80),
    st.sampled_from([-62135596800 * NS, -62135596800 * NS - 1, 253402300799 * NS + NS - 1,
                     253402300800 * NS, -1, 0, 951782400 * NS, 4107542399 * NS + 5]))
# the latency columns: ns / 1e6 (the compiled line writes those without the general repr)
millionths = st.builds(lambda n, k: n * 10**k / 1e6, st.integers(-10**16, 10**16),
                       st.integers(0, 3))
values = st.one_of(
    st.none(), st.integers(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), millionths,
    st.sampled_from([0.1, -0.0, 1e16, 1e-7, 123456789.125, math.inf]),
    st.text(), st.text(alphabet="ab,\"\r\n;"), st.booleans())


@st.composite
def rows(draw):
    n = draw(st.integers(1, 40))
    row = draw(st.lists(values, min_size=n, max_size=n))
    topics_at = draw(st.integers(0, n - 1))
    ts_at = sorted(draw(st.sets(st.integers(0, n - 1), max_size=6)) - {topics_at})
    for i in ts_at:
        row[i] = draw(st.none() | timestamps)
    row[topics_at] = draw(st.none() | st.lists(st.text(alphabet="xy,;\n\u00e9"), max_size=3))
    return tuple(row), tuple(ts_at), topics_at


def past_64_bits(row, ts_at) -> bool:
    """Is a timestamp of `row` an int past 64 bits (which the compiled line leaves to the slow
    path)?"""
    return any(row[i] is not None and not -2**63 <= row[i] < 2**63 for i in ts_at)


def slow_line(row, ts_at, topics_at) -> str:
    """The line the slow path (the csv module) writes for `row`."""
    slow = io.StringIO()
    csv.writer(slow, lineterminator="\n").writerow(csv_values(row, ts_at, topics_at))
    return slow.getvalue()


@settings(max_examples=2000, deadline=None)
@given(rows())
def test_compiled_line_is_the_python_line(case):
    row, ts_at, topics_at = case
    line = compiled_line()(row, ts_at, topics_at)
    expected = plain_line(row, ts_at, topics_at)
    if line is None and expected is not None:   # only a timestamp past 64 bits goes slow
        assert past_64_bits(row, ts_at), row
        assert slow_line(row, ts_at, topics_at) == expected
    else:
        assert line == expected


@settings(max_examples=1000, deadline=None)
@given(st.one_of(millionths, st.integers(-10**6, 10**6).map(lambda n: n / 1e6),
                 st.floats(-1e10, 1e10)))
def test_floats_as_repr_writes_them(x):
    assert compiled_line()((x,), (), 0) == repr(x) + "\n"


@settings(max_examples=1000, deadline=None)
@given(rows(), st.data())
def test_holes_cut_the_line_where_their_values_go(case, data):
    """With holes, both csv_line give the same pieces (or both refuse the holes), and the line
    with the holes' values put back between them is the line of the whole row."""
    row, ts_at, topics_at = case
    holes = tuple(sorted(data.draw(st.sets(st.integers(-1, len(row)), max_size=3))))
    if data.draw(st.booleans()):
        holes = holes[::-1]
    results = []
    for line in (compiled_line(), plain_line):
        try:
            results.append(line(row, ts_at, topics_at, holes))
        except ValueError:
            results.append(ValueError)
    pieces = results[1]
    if pieces is ValueError:
        assert results[0] is ValueError
        assert any(not 0 <= h < len(row) for h in holes) or list(holes) != sorted(set(holes))
        return
    whole = plain_line(row, ts_at, topics_at)
    if results[0] is None and pieces is not None:   # only a timestamp past 64 bits goes slow
        assert past_64_bits(row, ts_at), row
    else:
        assert results[0] == pieces
    if pieces is None or whole is None:
        return
    assert len(pieces) == len(holes) + 1
    values = csv_values(row, ts_at, topics_at)
    filled = pieces[0] + "".join(str(values[h]) + p for h, p in zip(holes, pieces[1:]))
    assert filled == whole
