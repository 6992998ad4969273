"""The fast paths of the records check accept only what _scan_records accepts, with the same end,
on records of every varint width (hand-encoded, so that widths kafka-python never writes are
covered too) and on damaged copies of them; and they take the records real clients write, so the
full scan runs only on unusual batches. Two of them: record_batch._check_records (Python, gives
up on unusual shapes) and the compiled records/_check.c (exact: it accepts all the scan does)."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from dissector.records import decode_record_set, record_batch
from dissector.records.record_batch import _check_records, _scan_records
from tests.records.builders import build, varint
from tests.support import require_compiled

try:
    from dissector.records._check import check_records as compiled_check
except ImportError:
    compiled_check = None

CHECKS = ["python", "compiled"]


@pytest.fixture(autouse=True, params=CHECKS)
def check(request, monkeypatch):
    """Each test with each check; decode_record_set uses it too."""
    fn = (_check_records if request.param == "python"
          else require_compiled(compiled_check, "records check (dissector/records/_check.c)"))
    monkeypatch.setattr(record_batch, "check_records", fn)
    return fn


def blob(n):
    return varint(-1) if n is None else varint(n) + b"x" * n


SIZES = st.sampled_from([None, 0, 1, 63, 64, 8191, 8192])
DELTAS = st.sampled_from([0, 1, -1, 63, 64, -65, 8191, 8192, 1 << 20, 1 << 40])
HEADER = st.tuples(st.sampled_from([0, 3, 63, 64]), SIZES)
RECORD = st.tuples(st.integers(0, 255), DELTAS, DELTAS, SIZES, SIZES,
                   st.lists(HEADER, max_size=3))


def encode(attributes, ts_delta, offset_delta, key, value, headers):
    body = (bytes([attributes]) + varint(ts_delta) + varint(offset_delta) + blob(key)
            + blob(value) + varint(len(headers)))
    for k, v in headers:
        body += blob(k) + blob(v)
    return varint(len(body)) + body


def agree(buf, count):
    end = record_batch.check_records(buf, count)
    scan = _scan_records(buf, count)
    if end is not None:
        assert scan == (count, end, None)
    elif record_batch.check_records is compiled_check:   # exact: takes all the scan takes
        assert scan[0] < count or scan[2] is not None
    return end


@settings(max_examples=300, deadline=None)
@given(records=st.lists(RECORD, min_size=1, max_size=5), seed=st.integers(0, 2**32),
       edits=st.integers(0, 3))
def test_fast_check_accepts_only_what_the_scan_accepts(records, seed, edits):
    buf = bytearray(b"".join(encode(*r) for r in records))
    rnd = random.Random(seed)
    for _ in range(edits):  # overwrite, drop or insert a byte, or cut the end
        if not buf:
            break
        at = rnd.randrange(len(buf))
        op = rnd.randrange(4)
        if op == 0:
            buf[at] = rnd.choice([0, 1, 2, 3, 0x7F, 0x80, 0x81, 0xFF, rnd.randrange(256)])
        elif op == 1:
            del buf[at]
        elif op == 2:
            buf.insert(at, rnd.randrange(256))
        else:
            del buf[at:]
    for count in {1, len(records) - 1, len(records), len(records) + 1} - {0}:
        agree(bytes(buf), count)


def test_every_single_byte_change_of_small_records():
    """Records whose lengths sit at the one-byte limits, each byte set to each interesting
    value, dropped, or the buffer cut there: lengths under six, nulls, negative lengths and
    varints that run into the next field all lie here."""
    buf = (encode(0, 0, 0, None, 0, []) + encode(0, -1, 1, 1, None, [(1, None)])
           + encode(0, 63, 2, 0, 2, [(0, 0), (2, 1)]))
    values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 0x3F, 0x40, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF]
    variants = [buf, buf + b"\x00"]
    for at in range(len(buf)):
        variants += [buf[:at] + bytes([v]) + buf[at + 1:] for v in values]
        variants += [buf[:at] + buf[at + 1:], buf[:at]]
    taken = 0
    for v in variants:
        for count in (1, 2, 3, 4):
            taken += agree(v, count) is not None
    assert taken > len(variants)  # the check is not trivially giving up


@pytest.mark.parametrize("headers", [[], [("trace-id", b"0123456789abcdef")],
                                     [("a", None), ("b", b"")] * 3])
@pytest.mark.parametrize("codec", [0, 1])
def test_client_batches_take_the_fast_path(monkeypatch, headers, codec):
    """Batches as clients write them (one- and two-byte lengths, 300 records: two-byte offset
    deltas, timestamps over 63 ms apart, keys and values of every size below 8 kB) are checked
    by the fast path alone."""
    def no_scan(buf, count):
        raise AssertionError("the full scan ran")
    monkeypatch.setattr(record_batch, "_scan_records", no_scan)
    items = [(1_700_000_000_000 + i * 50, None if i % 7 == 0 else b"k" * (i % 100),
              b"v" * (i * 25 % 8000), headers) for i in range(300)]
    rs = decode_record_set(build(2, codec, items))
    assert rs.issues == [] and rs.record_count == 300
