"""A pcapng file of nothing but Interface Description Blocks must not cost memory in proportion
to its size: a section keeps MAX_INTERFACES of them, and a packet on one past the cap fails with
a message that says so. Files are built here block by block from the pcapng layout
(draft-ietf-opsawg-pcapng: SHB, IDB, EPB), not with our writer."""
from __future__ import annotations

import struct

import pytest

from dissector.capture import pcapng
from dissector.capture.files import CaptureError, read_packets

from .support import run_isolated

SHB = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
IDB = struct.pack("<IIHHII", 1, 20, 1, 0, 0, 20)   # Ethernet, no snaplen, no options
FRAME = bytes(range(60))


def _epb(iface, data=FRAME):
    pad = bytes(-len(data) % 4)
    blen = 32 + len(data) + len(pad)
    return struct.pack("<IIIIIII", 6, blen, iface, 0, 1000, len(data), len(data)) + data + pad \
        + struct.pack("<I", blen)


def _file(tmp_path, n_idbs, iface):
    path = tmp_path / "idbs.pcapng"
    path.write_bytes(SHB + IDB * n_idbs + _epb(iface))
    return path


def test_packets_on_kept_interfaces_are_read(tmp_path):
    """Past the cap the file still reads: a packet on interface 0 and one on the last kept."""
    n = pcapng.MAX_INTERFACES + 10
    for iface in (0, pcapng.MAX_INTERFACES - 1):
        got = list(read_packets(_file(tmp_path, n, iface)))
        assert [(no, data) for no, _ts, _lt, data in got] == [(1, FRAME)]


def test_a_packet_past_the_cap_says_why(tmp_path):
    path = _file(tmp_path, pcapng.MAX_INTERFACES + 10, pcapng.MAX_INTERFACES + 3)
    with pytest.raises(CaptureError, match=f"only the first {pcapng.MAX_INTERFACES} interfaces"):
        list(read_packets(path))
    # an interface never declared is still named as such
    path = _file(tmp_path, pcapng.MAX_INTERFACES + 10, pcapng.MAX_INTERFACES + 10)
    with pytest.raises(CaptureError, match="undeclared interface"):
        list(read_packets(path))


def test_a_file_of_interface_blocks_stays_bounded(tmp_path):
    """600k IDBs (12 MB; ~100 bytes each kept: 60 MB before the cap) then one packet, read in a
    fresh interpreter: the peak grows by less than 24 MB (65536 kept ~ 7 MB, plus read chunks)."""
    n = 600_000
    path = _file(tmp_path, n, 0)
    result = run_isolated(f"""
        from dissector.capture.files import read_packets
        base = rss()
        got = [len(p[3]) for p in read_packets({str(path)!r})]
        print(json.dumps({{"grown": rss() - base, "got": got}}))
    """)
    assert result["got"] == [len(FRAME)]
    assert result["grown"] < 24 << 20, result
