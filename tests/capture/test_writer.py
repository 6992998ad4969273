"""The writers round-trip through read_packets and through readers nobody here wrote."""
import io

import pytest

from dissector.capture import read_packets
from dissector.capture.writer import PcapngWriter, PcapWriter
from tests.capture import build
from tests.capture.oracles import dpkt_packets, scapy_packets, tshark_packets

ETH = [build.tcp_packet(i, size=i * 97 % 1449) for i in range(30)]
RAW = [p[14:] for p in ETH]
TS = [1_700_000_000_123_456_789 + i * 1_000_003 for i in range(30)]


def test_pcapng_round_trip_one_link_type(tmp_path):
    path = tmp_path / "w.pcapng"
    with PcapngWriter(path, 1) as w:
        for ts, p in zip(TS, ETH):
            w.write(ts, p)
    got = list(read_packets(path))
    assert [(g[1], g[2], g[3]) for g in got] == [(ts, 1, p) for ts, p in zip(TS, ETH)]
    assert scapy_packets(path) == list(zip(TS, ETH))  # exact nanoseconds
    for (ts, data), g in zip(dpkt_packets(path), got):
        assert data == g[3] and abs(ts - g[1] / 1e9) < 1e-6
    assert [(r[0], r[1]) for r in tshark_packets(path)] == [(ts, len(p)) for ts, p in zip(TS, ETH)]


def test_pcapng_one_interface_per_link_type(tmp_path):
    path = tmp_path / "two.pcapng"
    with PcapngWriter(path, 1) as w:
        for i, (ts, p) in enumerate(zip(TS, ETH)):
            if i % 3 == 0:
                w.write(ts, RAW[i], linktype=101)
            else:
                w.write(ts, p)
    got = list(read_packets(path))
    assert [g[2] for g in got] == [101 if i % 3 == 0 else 1 for i in range(30)]
    assert [g[3] for g in got] == [RAW[i] if i % 3 == 0 else ETH[i] for i in range(30)]
    assert [r[2] for r in tshark_packets(path)] == [1 if i % 3 == 0 else 0 for i in range(30)]


def test_pcapng_orig_len_kept(tmp_path):
    dpkt = pytest.importorskip("dpkt")
    path = tmp_path / "snap.pcapng"
    with PcapngWriter(path, 1) as w:
        w.write(TS[0], ETH[5][:40], orig_len=len(ETH[5]))
    with open(path, "rb") as f:
        r = dpkt.pcapng.Reader(f)
        (_, data), = list(r)
    assert data == ETH[5][:40] == next(read_packets(path))[3]
    blob = path.read_bytes()
    # The EPB (after the 28-byte SHB and 32-byte IDB) records the original length at offset 24.
    assert int.from_bytes(blob[60 + 24:60 + 28], "little") == len(ETH[5])


@pytest.mark.parametrize("nano", [True, False], ids=["ns", "us"])
def test_pcap_round_trip(tmp_path, nano):
    path = tmp_path / "w.pcap"
    with PcapWriter(path, 1, nanosecond=nano) as w:
        for ts, p in zip(TS, ETH):
            w.write(ts, p)
    want_ts = TS if nano else [ts // 1000 * 1000 for ts in TS]
    got = list(read_packets(path))
    assert [(g[1], g[3]) for g in got] == list(zip(want_ts, ETH))
    assert scapy_packets(path) == list(zip(want_ts, ETH))
    for (ts, data), g in zip(dpkt_packets(path), got):
        assert data == g[3] and abs(ts - g[1] / 1e9) < 1e-6


def test_writer_leaves_a_callers_file_open():
    buf = io.BytesIO()
    w = PcapWriter(buf, 113)
    w.write(5, RAW[0])
    w.close()
    assert not buf.closed
    assert buf.getvalue()[20:24] == (113).to_bytes(4, "little")
