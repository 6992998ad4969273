"""Classic pcap: magics, byte orders, snaplen, damage; checked against scapy and dpkt readers."""
import gzip

import pytest

from dissector.capture import chunks, read_packets
from dissector.capture.errors import CaptureError
from tests.capture import build
from tests.capture.oracles import dpkt_packets, scapy_packets

pytestmark = pytest.mark.usefixtures("reading")   # both file readers (conftest)

PACKETS = [build.tcp_packet(i, size=50 + 37 * i) for i in range(20)]


@pytest.fixture(params=[7, 100, chunks.CHUNK], ids=["chunk7", "chunk100", "chunk_default"])
def chunk_size(request, monkeypatch):
    """Small chunks make every record straddle refills."""
    monkeypatch.setattr(chunks, "CHUNK", request.param)
    return request.param


def _records(nano):
    # Seconds around 2023 and fractions near the top of their range.
    return [(1_700_000_000 + i, (999_999_000 if nano else 999_000) + i, p) for i, p in enumerate(PACKETS)]


@pytest.mark.parametrize("order", ["<", ">"], ids=["le", "be"])
@pytest.mark.parametrize("nano", [False, True], ids=["us", "ns"])
def test_magics_and_byte_orders(tmp_path, order, nano, chunk_size):
    path = tmp_path / "x.pcap"
    path.write_bytes(build.pcap(_records(nano), order=order, nano=nano, linktype=1))
    got = list(read_packets(path))
    assert [g[0] for g in got] == list(range(1, len(PACKETS) + 1))
    assert all(g[2] == 1 for g in got)
    assert [g[3] for g in got] == PACKETS
    for (sec, frac, _), g in zip(_records(nano), got):
        assert g[1] == sec * 10**9 + frac * (1 if nano else 1000)
    # Oracles: scapy (exact timestamps) and dpkt (float seconds) read the same file.
    assert [(g[1], g[3]) for g in got] == scapy_packets(path)
    for (ts, data), g in zip(dpkt_packets(path), got):
        assert data == g[3] and abs(ts - g[1] / 1e9) < 1e-6


def test_files_written_by_other_tools(tmp_path):
    scapy_utils = pytest.importorskip("scapy.utils")
    dpkt = pytest.importorskip("dpkt")
    from scapy.layers.l2 import Ether
    pkts = [Ether(p) for p in PACKETS]
    for i, p in enumerate(pkts):
        p.time = 1_600_000_000 + i / 8
    a = tmp_path / "scapy.pcap"
    scapy_utils.wrpcap(str(a), pkts)
    b = tmp_path / "dpkt.pcap"
    with open(b, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True, linktype=1)
        for i, p in enumerate(PACKETS):
            w.writepkt(p, ts=1_600_000_000 + i / 4)
    for path, step in ((a, 125_000_000), (b, 250_000_000)):
        got = list(read_packets(path))
        assert [g[3] for g in got] == PACKETS
        assert [g[1] for g in got] == [1_600_000_000 * 10**9 + i * step for i in range(len(PACKETS))]


def test_snaplen_cut_packets(tmp_path):
    path = tmp_path / "snap.pcap"
    recs = [(1, 0, p[:64], len(p)) for p in PACKETS]
    path.write_bytes(build.pcap(recs, snaplen=64))
    got = list(read_packets(path))
    assert [g[3] for g in got] == [p[:64] for p in PACKETS]
    assert [d for _, d in scapy_packets(path)] == [g[3] for g in got]


def test_linktype_field_fcs_bits_ignored(tmp_path):
    """The upper bits of the header's link type carry FCS length, not the type."""
    path = tmp_path / "fcs.pcap"
    path.write_bytes(build.pcap([(1, 0, PACKETS[0])], linktype=(1 << 28) | (1 << 26) | 1))
    assert [g[2] for g in read_packets(path)] == [1]


def test_empty_capture_has_no_packets(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(build.pcap([]))
    assert list(read_packets(path)) == []


def test_truncated_record_yields_good_packets_then_error(tmp_path, chunk_size):
    whole = build.pcap(_records(False))
    path = tmp_path / "cut.pcap"
    cut_at = len(whole) - 30  # inside the last packet's data
    path.write_bytes(whole[:cut_at])
    last_record = len(whole) - 16 - len(PACKETS[-1])
    got = []
    with pytest.raises(CaptureError) as e:
        for pkt in read_packets(path):
            got.append(pkt)
    assert [g[3] for g in got] == PACKETS[:-1]
    assert str(e.value) == f"{path}: truncated packet record at byte {last_record}"


def test_truncated_inside_record_header(tmp_path):
    whole = build.pcap(_records(False)[:3])
    path = tmp_path / "cut.pcap"
    path.write_bytes(whole + b"\x01\x02\x03")
    with pytest.raises(CaptureError, match=rf"truncated packet record at byte {len(whole)}$"):
        assert len(list(read_packets(path))) == 3


def test_truncated_file_header(tmp_path):
    path = tmp_path / "short.pcap"
    path.write_bytes(build.pcap([])[:10])
    with pytest.raises(CaptureError, match="truncated pcap file header"):
        read_packets(path)


@pytest.mark.parametrize("length", [256 * 1024 + 1, 0xFFFFFFFF])
def test_absurd_record_length_is_an_error_not_an_allocation(tmp_path, length):
    good = build.pcap(_records(False)[:2])
    import struct
    path = tmp_path / "absurd.pcap"
    path.write_bytes(good + struct.pack("<IIII", 5, 0, length, length) + b"x" * 100)
    got = []
    with pytest.raises(CaptureError, match=rf"{path}: packet record length {length} too large at byte {len(good)}$"):
        for pkt in read_packets(path):
            got.append(pkt)
    assert len(got) == 2


def test_largest_legal_record(tmp_path):
    big = bytes(range(256)) * 1024  # 256 KiB: libpcap's largest snapshot length
    path = tmp_path / "big.pcap"
    path.write_bytes(build.pcap([(1, 0, big), (2, 0, PACKETS[0])]))
    assert [g[3] for g in read_packets(path)] == [big, PACKETS[0]]


def test_missing_file():
    with pytest.raises(CaptureError, match=r"^/nonexistent/x\.pcap: No such file or directory$"):
        read_packets("/nonexistent/x.pcap")


def test_directory_is_not_a_capture(tmp_path):
    with pytest.raises(CaptureError, match=rf"^{tmp_path}: "):
        read_packets(tmp_path)


@pytest.mark.parametrize("content", [b"", b"hello world, this is not a capture file at all\n", b"\xa1\xb2"])
def test_not_a_capture(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(CaptureError, match=rf"^{path}: .*not a pcap or pcapng file$"):
        read_packets(path)


def test_gzip_compressed(tmp_path, chunk_size):
    raw = build.pcap(_records(True), nano=True)
    path = tmp_path / "x.pcap.gz"
    path.write_bytes(gzip.compress(raw))
    plain = tmp_path / "x.pcap"
    plain.write_bytes(raw)
    assert list(read_packets(path)) == list(read_packets(plain))
    assert [g[3] for g in read_packets(path)] == PACKETS


def test_truncated_gzip_yields_what_it_can_then_error(tmp_path):
    raw = build.pcap(_records(False))
    z = gzip.compress(raw)
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(z[:len(z) // 2])
    got = []
    with pytest.raises(CaptureError, match=rf"^{path}: truncated"):
        for pkt in read_packets(path):
            got.append(pkt)
    assert [g[3] for g in got] == PACKETS[:len(got)]


def test_corrupt_gzip(tmp_path):
    raw = gzip.compress(build.pcap(_records(False)))
    path = tmp_path / "bad.pcap.gz"
    path.write_bytes(raw[:12] + bytes(b ^ 0x55 for b in raw[12:]))
    with pytest.raises(CaptureError, match=rf"^{path}: "):
        list(read_packets(path))


def test_file_closed_when_consumer_stops(tmp_path):
    path = tmp_path / "x.pcap"
    path.write_bytes(build.pcap(_records(False)))
    it = read_packets(path)
    next(it)
    f = it.gi_frame.f_locals["f"]
    it.close()
    assert f.closed
