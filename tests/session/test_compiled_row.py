"""The compiled exchange row (dissector/_tablerow.c) against its Python twin
(tables.py_exchange_row): the same values of the same types on every exchange of the real
captures (TLS included) at every level, and on exchanges whose attributes are anything (ints of
any size, floats, strings, missing frames, unknown api keys and error codes, a subclass whose
times are properties of its own, one whose slot a property hides, a member never set: the
compiled row reads members in place, _attrs.h), or the same exception."""
import pytest
from hypothesis import given, strategies as st

from dissector import tables
from dissector.model import Connection, Exchange, Frame
from dissector.pipeline import dissect
from tests.fuzz.support import REAL, REAL_PORTS, fuzz_settings
from tests.support import require_compiled

TLS = REAL[0].parent / "tls"


@pytest.fixture(autouse=True)
def compiled():
    require_compiled(tables.exchange_row is not tables.py_exchange_row or None,
                     "exchange row (dissector/_tablerow.c)")


def outcome(row, ex):
    try:
        values = row(ex)
    except Exception as exc:   # noqa: BLE001 - the twins must fail alike
        return "error", type(exc).__name__
    return "ok", repr(values), [type(v) for v in values]


@pytest.mark.parametrize("level", ("headers", "bodies", "records"))
def test_real_captures(level):
    runs = [dissect(p, REAL_PORTS, level=level) for p in REAL]
    runs.append(dissect(TLS / "kafka_tls.pcap", (9093,), level=level,
                        keylog=TLS / "kafka_tls.keys.log"))
    n = tls = 0
    for run in runs:
        for ex in run:
            assert outcome(tables.exchange_row, ex) == outcome(tables.py_exchange_row, ex)
            n += 1
            tls += ex.connection.tls is not None
    assert n > 500 and tls > 10


class Timed(Exchange):
    """Times of its own: the compiled row must ask the properties."""
    __slots__ = ()

    @property
    def latency_ms(self):
        return "its own"


class Shadowed(Exchange):
    """A member hidden by a property: the compiled row must not read the slot."""
    __slots__ = ()

    status = property(lambda self: "shadowed", lambda self, value: None)


anything = st.one_of(st.none(), st.integers(), st.integers(-2**80, 2**80), st.floats(),
                     st.text(max_size=5), st.booleans(), st.lists(st.text(max_size=3)))
ints = st.one_of(st.none(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 3, 87, 5000]))


@st.composite
def frames(draw):
    if draw(st.booleans()):
        return None
    return Frame(None, 0, draw(anything), draw(anything), b"", draw(anything), draw(anything),
                 draw(st.one_of(ints, anything)), draw(st.one_of(ints, anything)))


@st.composite
def exchanges(draw):
    c = Connection(draw(anything), draw(anything), draw(anything), draw(anything), draw(anything))
    ex = draw(st.sampled_from([Exchange, Timed, Shadowed]))(
        c, draw(frames()), draw(frames()), draw(ints), draw(anything), draw(anything),
        draw(anything), draw(anything))
    ex.raw_sasl = draw(st.sampled_from([False, True, 0, 1, None]))
    for name in ("error_code", "error_count", "throttle_time_ms", "topics", "partition_count",
                 "record_count", "records_bytes", "records_uncompressed_bytes", "index"):
        setattr(ex, name, draw(st.one_of(ints, anything)))
    ex.issues = draw(st.sampled_from([[], [None], (), [1, 2]]))
    unset = draw(st.sampled_from([None, "client_id", "index", "topics"]))
    if unset is not None:   # an AttributeError from both
        delattr(ex, unset)
    return ex


@fuzz_settings(100)
@given(ex=exchanges())
def test_anything(ex):
    assert outcome(tables.exchange_row, ex) == outcome(tables.py_exchange_row, ex)
