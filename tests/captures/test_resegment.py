"""captures/resegment.py: MSS re-segmentation, checked with scapy, dpkt and tshark (not with our
own readers), on synthetic flows and on the committed real captures."""
import random
import subprocess
import sys

import pytest

from captures import resegment as R
from tests.support import CAPTURES, ROOT, require_module, require_tool

MSS = 1448
CLIENT, BROKER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)


def _flow(link):
    """A small conversation with segments far over the MSS, an odd-sized one, a FIN carrying
    data, an IPv6 flow whose sequence numbers wrap, one UDP packet and Ethernet padding.
    Returns [(ts_ns, linktype, bytes)]."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import CookedLinux, Ether
    rnd = random.Random(3)
    opts = [("MSS", 65495), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 10)]
    ts_opt = [("NOP", None), ("NOP", None), ("Timestamp", (5, 6))]
    (cip, cport), (bip, bport) = CLIENT, BROKER

    def head():
        if link == "ether":
            return Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02")
        return CookedLinux(pkttype=0, lladdrtype=772, lladdrlen=6)

    def up(flags, seq, ack, payload=b"", **kw):
        return head() / IP(src=cip, dst=bip) / TCP(sport=cport, dport=bport, flags=flags,
                                                   seq=seq, ack=ack, **kw) / payload

    def down(flags, seq, ack, payload=b"", **kw):
        return head() / IP(src=bip, dst=cip) / TCP(sport=bport, dport=cport, flags=flags,
                                                   seq=seq, ack=ack, **kw) / payload

    big = rnd.randbytes(10_000)
    pkts = [
        up("S", 1000, 0, options=opts),
        down("SA", 5000, 1001, options=opts),
        up("PA", 1001, 5001, big, options=ts_opt),
        down("PA", 5001, 11001, rnd.randbytes(3001), options=ts_opt),
        up("A", 11001, 8002),
        down("FPA", 8002, 11001, rnd.randbytes(2000)),
        head() / IPv6(src="fd00::1", dst="fd00::2") / TCP(
            sport=cport + 1, dport=bport, flags="PA", seq=0xFFFFF000, ack=1) / big[:4000],
        head() / IP(src=cip, dst=bip) / UDP(sport=53, dport=53) / b"not tcp",
    ]
    raw = [bytes(p) for p in pkts]
    raw.append(bytes(up("A", 11001, 10002)) + b"\0" * 6)  # link-layer padding after the packet
    linktype = R.LT_ETHERNET if link == "ether" else R.LT_SLL
    return [(1_700_000_000_000_000_000 + i * 1_000_000, linktype, d) for i, d in enumerate(raw)]


@pytest.fixture(params=["ether", "sll"])
def flow(request):
    require_module("scapy")
    packets = _flow(request.param)
    counts = R.Counts()
    out = list(R.resegment(packets, MSS, counts))
    return packets, out, counts


def _parse(frame):
    from scapy.layers.l2 import Ether
    return Ether(frame)


def _tcp_pieces(out):
    from scapy.layers.inet import TCP
    for ts, frame in out:
        p = _parse(frame)
        yield ts, p, p[TCP]


def test_every_segment_fits_the_mss_and_bytes_are_kept(flow):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    packets, out, counts = flow
    assert counts.read == len(packets) and counts.dropped == 1  # the UDP packet
    streams = {}
    for _, p, tcp in _tcp_pieces(out):
        net = p[IP] if IP in p else p[IPv6]
        payload = bytes(tcp.payload)
        assert len(payload) <= MSS
        streams.setdefault((net.src, tcp.sport), []).append((tcp.seq, payload))
    # each direction's bytes, in sequence order, are the original bytes
    originals = {}
    for _, linktype, data in packets:
        from scapy.layers.l2 import CookedLinux, Ether
        p = Ether(data) if linktype == R.LT_ETHERNET else CookedLinux(data)
        if TCP not in p:
            continue
        net = p[IP] if IP in p else p[IPv6]
        body = bytes(p[TCP].payload)
        if IP in p:  # bounded by the IP length, not the link padding
            body = body[:net.len - net.ihl * 4 - p[TCP].dataofs * 4]
        originals.setdefault((net.src, p[TCP].sport), []).append((p[TCP].seq, body))
    assert streams.keys() == originals.keys()
    for key, pieces in streams.items():
        assert b"".join(b for _, b in pieces) == b"".join(b for _, b in originals[key])
        for (seq, body), (next_seq, _) in zip(pieces, pieces[1:]):
            if body:
                assert next_seq == (seq + len(body)) & 0xFFFFFFFF  # contiguous, wraps at 2**32


def test_checksums_are_valid_by_scapy(flow):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    _, out, _ = flow
    for _, p, tcp in _tcp_pieces(out):
        fresh = p.copy()
        del fresh[TCP].chksum
        if IP in fresh:
            del fresh[IP].chksum
        rebuilt = _parse(bytes(fresh))
        assert rebuilt[TCP].chksum == tcp.chksum
        if IP in p:
            assert rebuilt[IP].chksum == p[IP].chksum
            assert p[IP].len == len(p[IP])
        else:
            assert p[IPv6].plen == len(p[IPv6].payload)


def test_flags_timestamps_and_mss_option(flow):
    packets, out, _ = flow
    by_ts = {}
    for ts, p, tcp in _tcp_pieces(out):
        by_ts.setdefault(ts, []).append(tcp)
    assert set(by_ts) <= {t for t, _, _ in packets}  # pieces keep their packet's timestamp
    big_ts, fin_ts = packets[2][0], packets[5][0]
    big = by_ts[big_ts]
    assert len(big) == 7 and all(not (t.flags & 0x08) for t in big[:-1]) and big[-1].flags & 0x08
    fin = by_ts[fin_ts]
    assert len(fin) == 2 and not fin[0].flags & 0x01 and fin[1].flags & 0x01
    syn = by_ts[packets[0][0]][0]
    assert dict(syn.options)["MSS"] == MSS + 12  # timestamps take 12 bytes of each segment
    assert all(dict(t.options).get("Timestamp") == (5, 6) for t in big)  # options ride along


def test_tshark_finds_no_bad_checksum(flow, tmp_path):
    tshark = require_tool("tshark")
    _, out, _ = flow
    path = tmp_path / "out.pcap"
    with open(path, "wb") as f:
        w = R.PcapWriter(f, nanos=True)
        for ts, frame in out:
            w.write(ts, frame)
    statuses = _tshark_checksums(tshark, path)
    assert statuses and set(statuses) == {"1"}, statuses  # 1 = Good


def _tshark_checksums(tshark, path):
    out = subprocess.run(
        [tshark, "-r", str(path), "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
         "-T", "fields", "-e", "tcp.checksum.status", "-e", "ip.checksum.status"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    return [s for line in out.splitlines() for s in line.split("\t") if s]


def test_remap_moves_flows_and_keeps_checksums_valid(flow):
    from scapy.layers.inet import IP, TCP
    packets, _, _ = flow
    v4 = [p for p in packets if p[2][14 if p[1] == R.LT_ETHERNET else 16] >> 4 == 4]

    def remap(src, dst, sport, dport):
        swap = {bytes([10, 0, 0, 1]): bytes([192, 168, 1, 1])}
        return swap.get(src, src), swap.get(dst, dst), sport + 1 if sport != 9092 else sport, \
            dport + 1 if dport != 9092 else dport
    for _, p, tcp in _tcp_pieces(R.resegment(v4, MSS, remap=remap)):
        assert "10.0.0.1" not in (p[IP].src, p[IP].dst)
        assert 40000 not in (tcp.sport, tcp.dport)
        fresh = p.copy()
        del fresh[TCP].chksum
        del fresh[IP].chksum
        rebuilt = _parse(bytes(fresh))
        assert (rebuilt[TCP].chksum, rebuilt[IP].chksum) == (tcp.chksum, p[IP].chksum)


REAL = sorted(p for p in CAPTURES.glob("*.pcap") if ".mss" not in p.name)


@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_capture_streams_survive(path, tmp_path):
    dpkt = require_module("dpkt")
    out = tmp_path / "mss.pcap"
    counts = R.resegment_file(path, out)
    assert counts.dropped == 0

    def streams(p):
        """Each direction's bytes by sequence number (relative to its first segment: sequence
        numbers may wrap); retransmitted copies land on the same place."""
        data, base = {}, {}
        with open(p, "rb") as f:
            for _, buf in dpkt.pcap.Reader(f):
                tcp = dpkt.ethernet.Ethernet(buf).data.data
                assert len(tcp.data) <= MSS or p == path
                flow = (tcp.sport, tcp.dport)
                rel = (tcp.seq - base.setdefault(flow, tcp.seq)) & 0xFFFFFFFF
                if tcp.data:
                    data.setdefault(flow, {})[rel] = bytes(tcp.data)
        return {k: b"".join(v[s] for s in sorted(v)) for k, v in data.items()}
    assert streams(out) == streams(path)
    # the committed copy is exactly what the module makes from the committed capture
    assert out.read_bytes() == path.with_suffix(".mss1448.pcap").read_bytes()


def test_real_capture_checksums_by_tshark(tmp_path):
    tshark = require_tool("tshark")
    statuses = _tshark_checksums(tshark, CAPTURES / "codecs.mss1448.pcap")
    assert statuses and set(statuses) == {"1"}


def test_cli(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"definitely not a capture file")
    run = subprocess.run([sys.executable, str(ROOT / "captures" / "resegment.py"), str(bad),
                          str(tmp_path / "o.pcap")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "not a classic pcap" in run.stderr
    assert "Traceback" not in run.stderr
    good = subprocess.run([sys.executable, str(ROOT / "captures" / "resegment.py"),
                           str(CAPTURES / "aiokafka.pcap"), str(tmp_path / "o.pcap"),
                           "--mss", "536"], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good.stderr
    assert "dropped 0" in good.stdout
