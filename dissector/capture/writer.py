"""Streaming capture writers: pcapng (nanosecond timestamps) and classic pcap.

Used by live capture (`--write`) and to build captures in tests and benchmarks. Both accept an
open binary file (left open by close(): the caller owns it) or a path (opened and closed here).
"""
from __future__ import annotations

import struct

SNAPLEN = 262144

_shb = struct.Struct("<IIIHHqI")           # type, length, byte-order magic, major, minor, section length, length
_idb = struct.Struct("<IIHHIHHB3xHHI")     # type, length, linktype, 0, snaplen, if_tsresol option, opt_endofopt, length
_epb = struct.Struct("<IIIIIII")           # type, length, interface, ts high, ts low, caplen, len
_u32 = struct.Struct("<I")
_pcap_hdr = struct.Struct("<IHHiIII")      # magic, major, minor, thiszone, sigfigs, snaplen, linktype
_pcap_rec = struct.Struct("<IIII")         # seconds, fraction, caplen, len


class _Writer:
    def __init__(self, fileobj):
        self._own = not hasattr(fileobj, "write")
        self._f = open(fileobj, "wb") if self._own else fileobj

    def close(self):
        self._f.flush()
        if self._own:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PcapngWriter(_Writer):
    """One section, one interface per link type (added on first use), Enhanced Packet Blocks."""

    def __init__(self, fileobj, linktype, snaplen=SNAPLEN):
        super().__init__(fileobj)
        self._snaplen = snaplen
        self._ifaces = {}
        self._f.write(_shb.pack(0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28))
        self._linktype = linktype
        self._interface(linktype)

    def _interface(self, linktype):
        iid = self._ifaces[linktype] = len(self._ifaces)
        self._f.write(_idb.pack(1, 32, linktype, 0, self._snaplen, 9, 1, 9, 0, 0, 32))
        return iid

    def write(self, ts_ns, data, orig_len=None, linktype=None):
        """Append one packet; `linktype` (default: the writer's) selects or adds an interface."""
        lt = self._linktype if linktype is None else linktype
        iid = self._ifaces.get(lt)
        if iid is None:
            iid = self._interface(lt)
        caplen = len(data)
        pad = -caplen & 3
        blen = 32 + caplen + pad
        f = self._f
        f.write(_epb.pack(6, blen, iid, ts_ns >> 32, ts_ns & 0xFFFFFFFF, caplen,
                          caplen if orig_len is None else orig_len))
        f.write(data)
        f.write(b"\0" * pad + _u32.pack(blen))


class PcapWriter(_Writer):
    """Classic pcap, little-endian, nanosecond magic unless nanosecond=False."""

    def __init__(self, fileobj, linktype, snaplen=SNAPLEN, nanosecond=True):
        super().__init__(fileobj)
        self._nano = nanosecond
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        self._f.write(_pcap_hdr.pack(magic, 2, 4, 0, 0, snaplen, linktype))

    def write(self, ts_ns, data, orig_len=None):
        sec, frac = divmod(ts_ns, 1_000_000_000)
        if not self._nano:
            frac //= 1000
        self._f.write(_pcap_rec.pack(sec, frac, len(data), len(data) if orig_len is None else orig_len))
        self._f.write(data)
