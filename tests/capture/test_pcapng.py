"""pcapng: sections in both byte orders, interfaces with their own link types and timestamp
resolutions, EPB/SPB/PB, unknown blocks, damage; checked against tshark, scapy and dpkt."""
import gzip
import struct

import pytest

from dissector.capture import chunks, read_packets
from dissector.capture.errors import CaptureError
from tests.capture import build
from tests.capture.oracles import dpkt_packets, scapy_packets, tshark_packets

pytestmark = pytest.mark.usefixtures("reading")   # both file readers (conftest)

ETH = [build.tcp_packet(i, size=40 + 13 * i) for i in range(6)]
RAW = [p[14:] for p in ETH]  # the same packets as raw IP (link type 101)
T0 = 1_700_000_000  # seconds


@pytest.fixture(params=[5, 64, chunks.CHUNK], ids=["chunk5", "chunk64", "chunk_default"])
def chunk_size(request, monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK", request.param)
    return request.param


def _two_interfaces(order):
    """Interface 0: Ethernet, default microseconds. Interface 1: raw IP, 2^-20 s ticks, an offset
    of 100 s. Expected nanoseconds are written out by hand from the tick arithmetic."""
    blocks = [build.shb(order),
              build.idb(order, 1, snaplen=65535),
              build.idb(order, 101, tsresol=0x80 | 20, tsoffset=100)]
    expected = []
    for i in range(6):
        if i % 2 == 0:
            blocks.append(build.epb(order, 0, (T0 + i) * 1_000_000 + 250_001, ETH[i]))
            expected.append(((T0 + i) * 10**9 + 250_001_000, 1, ETH[i]))
        else:
            # (T0 + i) s plus 2^18 ticks of 2^-20 s = 0.25 s exactly; +100 s from if_tsoffset.
            blocks.append(build.epb(order, 1, ((T0 + i) << 20) + (1 << 18), RAW[i]))
            expected.append(((T0 + i + 100) * 10**9 + 250_000_000, 101, RAW[i]))
    return b"".join(blocks), expected


@pytest.mark.parametrize("order", ["<", ">"], ids=["le", "be"])
def test_two_interfaces_link_types_and_resolutions(tmp_path, order, chunk_size):
    data, expected = _two_interfaces(order)
    path = tmp_path / "two.pcapng"
    path.write_bytes(data)
    got = list(read_packets(path))
    assert [g[0] for g in got] == [1, 2, 3, 4, 5, 6]
    assert [g[1:] for g in got] == expected


def test_two_interfaces_against_tshark(tmp_path):
    for order in "<>":
        data, expected = _two_interfaces(order)
        path = tmp_path / f"two{order == '>'}.pcapng"
        path.write_bytes(data)
        got = list(read_packets(path))
        assert [(g[1], len(g[3]), 0 if g[2] == 1 else 1) for g in got] == tshark_packets(path)


# tshark 4.0 misreads finer-than-ns resolutions (10^-12 gives a wrong value): test_tsresol_by_hand
# covers those.
@pytest.mark.parametrize("resol,ticks", [(0, 7), (3, 1_234), (6, 1_234_567), (9, 123_456_789),
                                         (0x80 | 10, 1024 + 512), (0x80 | 20, (T0 << 20) + 3)])
def test_tsresol_forms_against_tshark(tmp_path, resol, ticks):
    path = tmp_path / "r.pcapng"
    path.write_bytes(build.shb("<") + build.idb("<", 1, tsresol=resol) + build.epb("<", 0, ticks, ETH[0]))
    (_, ts, _, _), = read_packets(path)
    (tshark_ts, _, _), = tshark_packets(path)
    assert ts == tshark_ts


def test_tsresol_by_hand(tmp_path):
    cases = [(3, 1_700_000_000_123, 1_700_000_000_123_000_000),
             (9, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
             (12, 123_456_789_321, 123_456_789),  # ps (64 bits hold ~200 days), truncated to ns
             (0x80 | 30, (1_700_000_000 << 30) + (1 << 29), 1_700_000_000_500_000_000)]
    blocks = [build.shb("<")]
    for resol, _, _ in cases:
        blocks.append(build.idb("<", 1, tsresol=resol))
    for i, (_, ticks, _) in enumerate(cases):
        blocks.append(build.epb("<", i, ticks, ETH[0]))
    path = tmp_path / "r.pcapng"
    path.write_bytes(b"".join(blocks))
    assert [g[1] for g in read_packets(path)] == [ns for _, _, ns in cases]


def test_negative_tsoffset(tmp_path):
    path = tmp_path / "o.pcapng"
    path.write_bytes(build.shb("<") + build.idb("<", 1, tsresol=9, tsoffset=-1000)
                     + build.epb("<", 0, 1_700_000_000 * 10**9 + 5, ETH[0]))
    assert [g[1] for g in read_packets(path)] == [1_699_999_000 * 10**9 + 5]


def test_simple_packet_blocks_use_previous_timestamp_and_snaplen(tmp_path):
    path = tmp_path / "spb.pcapng"
    path.write_bytes(build.shb("<") + build.idb("<", 1, snaplen=60, tsresol=9)
                     + build.spb("<", ETH[0][:60], orig_len=len(ETH[0]))
                     + build.epb("<", 0, 5_000_000_001, ETH[1][:60], orig_len=len(ETH[1]))
                     + build.spb("<", ETH[2][:60], orig_len=len(ETH[2]))
                     + build.spb("<", ETH[3][:30]))  # a short packet: its own length rules
    got = list(read_packets(path))
    assert [g[3] for g in got] == [ETH[0][:60], ETH[1][:60], ETH[2][:60], ETH[3][:30]]
    assert [g[1] for g in got] == [0, 5_000_000_001, 5_000_000_001, 5_000_000_001]
    assert [d for _, d in scapy_packets(path)] == [g[3] for g in got]


def test_obsolete_packet_block(tmp_path):
    path = tmp_path / "pb.pcapng"
    path.write_bytes(build.shb("<") + build.idb("<", 1) + build.pb("<", 0, 3_000_000, ETH[0]))
    assert [(g[1], g[3]) for g in read_packets(path)] == [(3 * 10**9, ETH[0])]


def test_unknown_blocks_and_options_are_skipped(tmp_path, chunk_size):
    o = "<"
    nrb = build.block(o, 4, struct.pack("<HH", 1, 9) + bytes([10, 0, 0, 1]) + b"host\0" + b"\0" * 3
                      + struct.pack("<HH", 0, 0))
    isb = build.block(o, 5, struct.pack("<III", 0, 0, 0))
    custom = build.block(o, 0x00000BAD, struct.pack("<I", 32473) + b"private data" * 10)
    dsb = build.block(o, 0x0000000A, b"\0" * 40)
    epb_opts = build.options(o, (1, b"a comment"), (2, struct.pack("<I", 1)))  # opt_comment, epb_flags
    shb = build.shb(o, build.options(o, (2, b"x86_64"), (3, b"Linux"), (4, b"test builder")))
    data = (shb + nrb + build.idb(o, 1, tsresol=9) + custom
            + build.epb(o, 0, 10, ETH[0], opts=epb_opts) + dsb + isb + build.epb(o, 0, 20, ETH[1]) + isb)
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(data)
    assert [(g[1], g[3]) for g in read_packets(path)] == [(10, ETH[0]), (20, ETH[1])]
    assert [len(g[3]) for g in read_packets(path)] == [r[1] for r in tshark_packets(path)]


def test_huge_unknown_block_is_skipped_by_streaming(tmp_path, monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK", 4096)
    huge = build.block("<", 0x0000BEEF, b"\xee" * (3 << 20))  # far beyond buffer room
    path = tmp_path / "huge.pcapng"
    path.write_bytes(build.shb("<") + build.idb("<", 1) + build.epb("<", 0, 1, ETH[0]) + huge
                     + build.epb("<", 0, 2, ETH[1]))
    assert [g[3] for g in read_packets(path)] == [ETH[0], ETH[1]]


def test_sections_with_different_byte_orders(tmp_path, chunk_size):
    """A new section resets the interfaces and may switch byte order (like `mergecap -a`)."""
    s1 = build.shb("<") + build.idb("<", 1, tsresol=9) + build.epb("<", 0, 111, ETH[0])
    s2 = build.shb(">") + build.idb(">", 101) + build.epb(">", 0, 222, RAW[1])
    s3 = build.shb("<") + build.idb("<", 101) + build.idb("<", 1, tsresol=3) + build.epb("<", 1, 333, ETH[2])
    path = tmp_path / "sections.pcapng"
    path.write_bytes(s1 + s2 + s3)
    assert [g[1:] for g in read_packets(path)] == [(111, 1, ETH[0]), (222_000, 101, RAW[1]),
                                                  (333_000_000, 1, ETH[2])]
    assert [(g[1], len(g[3])) for g in read_packets(path)] == [r[:2] for r in tshark_packets(path)]


def test_files_written_by_scapy_and_dpkt(tmp_path):
    scapy_utils = pytest.importorskip("scapy.utils")
    dpkt = pytest.importorskip("dpkt")
    from scapy.layers.l2 import Ether
    pkts = [Ether(p) for p in ETH]
    for i, p in enumerate(pkts):
        p.time = T0 + i / 4
    a = tmp_path / "scapy.pcapng"
    scapy_utils.wrpcapng(str(a), pkts)
    b = tmp_path / "dpkt.pcapng"
    with open(b, "wb") as f:
        w = dpkt.pcapng.Writer(f, linktype=1)
        for i, p in enumerate(ETH):
            w.writepkt(p, ts=T0 + i / 8)
    got_a, got_b = list(read_packets(a)), list(read_packets(b))
    assert [g[3] for g in got_a] == ETH == [g[3] for g in got_b]
    assert [g[1] for g in got_a] == [T0 * 10**9 + i * 250_000_000 for i in range(6)]
    assert [g[1] for g in got_b] == [T0 * 10**9 + i * 125_000_000 for i in range(6)]
    for path, got in ((a, got_a), (b, got_b)):
        for (ts, data), g in zip(dpkt_packets(path), got):
            assert data == g[3] and abs(ts - g[1] / 1e9) < 1e-6


def test_gzip_pcapng(tmp_path, chunk_size):
    data, expected = _two_interfaces(">")
    path = tmp_path / "two.pcapng.gz"
    path.write_bytes(gzip.compress(data))
    assert [g[1:] for g in read_packets(path)] == expected


def _collect(path):
    got = []
    with pytest.raises(CaptureError) as e:
        for pkt in read_packets(path):
            got.append(pkt)
    return got, str(e.value)


def test_truncated_block_yields_good_packets_then_error(tmp_path, chunk_size):
    data, expected = _two_interfaces("<")
    path = tmp_path / "cut.pcapng"
    last = build.epb("<", 1, 0, RAW[5])
    path.write_bytes(data[:-10])
    got, msg = _collect(path)
    assert [g[1:] for g in got] == expected[:-1]
    assert msg == f"{path}: truncated block at byte {len(data) - len(last)}"


@pytest.mark.parametrize("damage,message", [
    (lambda b: b[:-4] + struct.pack("<I", 999), "block length mismatch"),
    (lambda b: b[:4] + struct.pack("<I", 30) + b[8:], "bad block length 30"),
    (lambda b: b[:4] + struct.pack("<I", 4) + b[8:], "bad block length 4"),
    (lambda b: b[:4] + struct.pack("<I", 64 << 20) + b[8:], "block length 67108864 too large"),
    (lambda b: b[:8] + struct.pack("<I", 7) + b[12:], "packet on undeclared interface 7"),
    (lambda b: b[:20] + struct.pack("<I", 10_000) + b[24:], "bad packet length 10000"),
])
def test_damaged_packet_block(tmp_path, damage, message):
    good = build.shb("<") + build.idb("<", 1) + build.epb("<", 0, 1, ETH[0])
    bad = damage(build.epb("<", 0, 2, ETH[1]))
    path = tmp_path / "bad.pcapng"
    path.write_bytes(good + bad + build.epb("<", 0, 3, ETH[2]))
    got, msg = _collect(path)
    assert [g[3] for g in got] == [ETH[0]]
    assert msg == f"{path}: {message} at byte {len(good)}"


def test_packet_before_any_interface(tmp_path):
    path = tmp_path / "noif.pcapng"
    path.write_bytes(build.shb("<") + build.spb("<", ETH[0]))
    got, msg = _collect(path)
    assert got == [] and "undeclared interface 0" in msg


def test_bad_byte_order_magic(tmp_path):
    path = tmp_path / "bom.pcapng"
    shb = bytearray(build.shb("<"))
    shb[8:12] = b"abcd"
    path.write_bytes(bytes(shb))
    with pytest.raises(CaptureError, match=rf"^{path}: bad pcapng byte-order magic$"):
        read_packets(path)


def test_unsupported_major_version(tmp_path):
    shb = bytearray(build.shb("<"))
    shb[12:14] = struct.pack("<H", 2)
    path = tmp_path / "v2.pcapng"
    path.write_bytes(bytes(shb) + build.idb("<", 1) + build.epb("<", 0, 1, ETH[0]))
    got, msg = _collect(path)
    assert got == [] and msg == f"{path}: unsupported pcapng section at byte 0"


def test_short_packet_blocks(tmp_path):
    good = build.shb("<") + build.idb("<", 1) + build.epb("<", 0, 1, ETH[0])
    # EPB, PB: 16 body bytes cannot hold their fixed fields; SPB: no room for its length.
    for btype, body in ((6, b"\0" * 16), (2, b"\0" * 16), (3, b"")):
        path = tmp_path / f"short{btype}.pcapng"
        path.write_bytes(good + build.block("<", btype, body))
        got, msg = _collect(path)
        assert [g[3] for g in got] == [ETH[0]]
        assert msg == f"{path}: bad packet block at byte {len(good)}"


def test_interface_option_overrun(tmp_path):
    shb = build.shb("<")
    idb = build.block("<", 1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 200) + b"\x09\0\0\0")
    path = tmp_path / "opt.pcapng"
    path.write_bytes(shb + idb + build.epb("<", 0, 1, ETH[0]))
    got, msg = _collect(path)
    assert got == [] and msg == f"{path}: interface option overruns its block at byte {len(shb)}"
