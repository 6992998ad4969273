"""Damaged captures: whatever the bytes, the readers yield packets or raise CaptureError, and
nothing else (no struct.error, no IndexError, no huge allocation)."""
import gzip

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dissector.capture import chunks, read_packets
from dissector.capture.errors import CaptureError
from tests.capture import build

pytestmark = pytest.mark.usefixtures("reading")   # both file readers (conftest)

PKTS = [build.tcp_packet(i, size=20 + 30 * i) for i in range(4)]
PCAP = build.pcap([(1, i, p) for i, p in enumerate(PKTS)])
PCAPNG = (build.shb("<") + build.idb("<", 1, snaplen=100, tsresol=9, tsoffset=5)
          + build.idb("<", 101, tsresol=0x80 | 20)
          + build.epb("<", 0, 10, PKTS[0]) + build.spb("<", PKTS[1][:100])
          + build.block("<", 5, b"\0" * 12) + build.pb("<", 1, 7, PKTS[2][14:])
          + build.shb(">") + build.idb(">", 1) + build.epb(">", 0, 99, PKTS[3]))

edits = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6)


def _mutate(data, edits, cut):
    b = bytearray(data)
    for at, value in edits:
        b[at % len(b)] = value
    return bytes(b[:cut])


def _read_all(path):
    """Every packet before the damage; the damage, if any, must be a one-line CaptureError."""
    got = []
    try:
        for pkt in read_packets(path):
            got.append(pkt)
    except CaptureError as e:
        assert "\n" not in str(e) and str(e).startswith(str(path) + ": ")
    for no, ts, linktype, data in got:
        assert isinstance(no, int) and isinstance(ts, int) and isinstance(linktype, int)
        assert isinstance(data, bytes) and len(data) <= 256 * 1024
    return got


@pytest.mark.parametrize("base", [PCAP, PCAPNG], ids=["pcap", "pcapng"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=edits, cut=st.integers(0, 2000), zipped=st.booleans())
def test_mutated_captures_only_raise_capture_error(tmp_path, monkeypatch, base, edits, cut, zipped):
    monkeypatch.setattr(chunks, "CHUNK", 64)
    data = _mutate(base, edits, cut)
    path = tmp_path / "fuzz.cap"
    path.write_bytes(gzip.compress(data) if zipped else data)
    _read_all(path)


def test_unmutated_bases_read_fully(tmp_path):
    path = tmp_path / "base.pcapng"
    path.write_bytes(PCAPNG)
    got = _read_all(path)
    assert [g[3] for g in got] == [PKTS[0], PKTS[1][:100], PKTS[2][14:], PKTS[3]]
    assert [g[1] for g in got] == [5_000_000_010, 5_000_000_010, 7 * 10**9 // 2**20, 99_000]
