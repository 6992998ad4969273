"""Independent readers (scapy, dpkt, tshark) giving (ts_ns, data) for a capture file."""
import subprocess
from decimal import Decimal

from tests.support import require_module, require_tool


def scapy_packets(path):
    """(ts_ns, linktype-independent raw bytes) via scapy's rdpcap (exact Decimal timestamps)."""
    utils = require_module("scapy.utils")
    return [(int(Decimal(p.time) * 1_000_000_000), bytes(p.original)) for p in utils.rdpcap(str(path))]


def dpkt_packets(path):
    """(ts in float seconds, data) via dpkt's own pcap or pcapng reader."""
    dpkt = require_module("dpkt")
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(0)
        reader = dpkt.pcapng.Reader(f) if head == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
        return [(float(ts), bytes(buf)) for ts, buf in reader]


def tshark_packets(path):
    """(ts_ns, captured length, interface id) per packet, via tshark."""
    tshark = require_tool("tshark")
    out = subprocess.run([tshark, "-n", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "frame.cap_len", "-e", "frame.interface_id"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    rows = []
    for line in out.splitlines():
        ts, caplen, iface = line.split("\t")
        if not ts:  # tshark 4.0 lists custom blocks as frames without a time: not packets
            continue
        sec, _, frac = ts.partition(".")
        rows.append((int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9]), int(caplen),
                     int(iface) if iface else 0))
    return rows
