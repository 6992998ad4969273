"""pcapng files: sections in either byte order, interfaces, EPB/SPB/PB packets.

Each Section Header Block sets the byte order and starts a new interface list. Interface
Description Blocks give the link type and the timestamp resolution (if_tsresol, power of 10 or
of 2) and offset (if_tsoffset). Blocks we do not need are skipped by their length; a huge one is
skipped without buffering it. A section keeps at most MAX_INTERFACES interfaces (real files have a
handful; a file of nothing but IDBs would otherwise cost ~5x its size): a packet on one past the
cap is an error that says so.
"""
from __future__ import annotations

import struct

from .errors import CaptureError
from .pcap import MAX_RECORD

SHB_MAGIC = b"\x0a\x0d\x0d\x0a"
SHB = 0x0A0D0D0A  # a palindrome: it reads the same in both byte orders
IDB, PB, SPB, EPB, DSB = 1, 2, 3, 6, 10
PARSED = frozenset((SHB, IDB, PB, SPB, EPB, DSB))
MAX_BLOCK = 16 << 20  # a block we parse must fit in memory; others are skipped by streaming
OPT_TSRESOL, OPT_TSOFFSET = 9, 14
MAX_INTERFACES = 1 << 16  # interfaces kept per section (their ids are 32-bit)


class _Order:
    """Precompiled readers for one byte order."""
    __slots__ = ("big", "hdr", "u32", "u16", "epb", "pb", "idb", "opt", "i64")

    def __init__(self, o):
        self.big = o == ">"
        self.hdr = struct.Struct(o + "II").unpack_from
        self.u32 = struct.Struct(o + "I").unpack_from
        self.u16 = struct.Struct(o + "H").unpack_from
        # block type, length, then the EPB's interface, ts high, ts low, caplen, len
        self.epb = struct.Struct(o + "IIIIIII").unpack_from
        self.pb = struct.Struct(o + "HHIIII").unpack_from  # interface, drops, ts high, ts low, caplen, len
        self.idb = struct.Struct(o + "HHI").unpack_from    # link type, reserved, snaplen
        self.opt = struct.Struct(o + "HH").unpack_from
        self.i64 = struct.Struct(o + "q").unpack_from


ORDERS = {b"\x4d\x3c\x2b\x1a": _Order("<"), b"\x1a\x2b\x3c\x4d": _Order(">")}


def pcapng_batches(chunks, epbs=None, secrets=None):
    """Check the first section header (in the first chunk) and return an iterator over batches
    of packets: lists of (ts_ns, linktype, start, stop), the packet being chunks.buf[start:stop]
    until the iterator is resumed (the buffer is then refilled).

    `epbs(buf, mv, pos, end, big_endian, interfaces) -> (pos, ts_ns)`, if given, takes the
    well-formed Enhanced Packet Blocks from buf[pos:end] itself (the compiled walker hands their
    packets on at once, in file order: the batch before them is handed out first) and returns
    where it stopped and the last one's timestamp (None if it took none); what it leaves is read
    here. A batch, empty or not, is then handed out before every refill and skip, so that the
    caller can copy out what it keeps of the buffer.

    `secrets(secrets_type, data)`, if given, gets the contents of each Decryption Secrets Block
    (a TLS key log: type 0x544C534B), before the packets that follow it."""
    if chunks.end < 12:
        raise CaptureError(f"{chunks.name}: truncated pcapng section header")
    if bytes(chunks.buf[8:12]) not in ORDERS:
        raise CaptureError(f"{chunks.name}: bad pcapng byte-order magic")
    return _blocks(chunks, epbs, secrets)


def pcapng_packets(chunks):
    """Check the first section header (in the first chunk) and return the packet iterator."""
    return _packets(pcapng_batches(chunks), chunks)


def _packets(batches, chunks):
    n = 0
    for batch in batches:
        mv = chunks.mv
        for ts_ns, linktype, start, stop in batch:
            n += 1
            yield n, ts_ns, linktype, mv[start:stop].tobytes()


def _bad(chunks, pos, what):
    return CaptureError(f"{chunks.name}: {what} at byte {chunks.base + pos}")


def _tsresol(r):
    """(multiplier, divisor) turning ticks of resolution byte `r` into nanoseconds."""
    if r & 0x80:
        return 1_000_000_000, 1 << (r & 0x7F)
    if r <= 9:
        return 10 ** (9 - r), 1
    return 1, 10 ** (r - 9)


def _interface(o, buf, pos, stop, chunks):
    """(linktype, scale, ts multiplier, ts divisor, ts offset ns, snaplen) from an IDB.

    scale is the multiplier when it alone turns ticks into ns (no divisor, no offset), else 0:
    the packet loop then skips the big-integer division, a third of its time otherwise."""
    linktype, _, snaplen = o.idb(buf, pos + 8)
    mul, div, offset = 1000, 1, 0  # default resolution: microseconds
    p, end = pos + 16, stop - 4
    while p + 4 <= end:
        code, olen = o.opt(buf, p)
        if code == 0:
            break
        v = p + 4
        if v + olen > end:
            raise _bad(chunks, pos, "interface option overruns its block")
        if code == OPT_TSRESOL and olen >= 1:
            mul, div = _tsresol(buf[v])
        elif code == OPT_TSOFFSET and olen >= 8:
            offset = o.i64(buf, v)[0] * 1_000_000_000
        p = v + ((olen + 3) & ~3)
    return linktype, (mul if div == 1 and not offset else 0), mul, div, offset, snaplen


def _undeclared(chunks, pos, iid, extra):
    """The error for a packet on interface `iid`, when the section kept fewer (and declared
    `extra` more past MAX_INTERFACES)."""
    if extra and iid < MAX_INTERFACES + extra:
        return _bad(chunks, pos, f"packet on interface {iid}: only the first {MAX_INTERFACES} "
                                 f"interfaces of a section are kept")
    return _bad(chunks, pos, f"packet on undeclared interface {iid}")


def _blocks(chunks, epbs, secrets=None):
    """Batches of the packets in each chunk (see pcapng_batches); the packets before a damaged
    block are handed out before the error is raised."""
    batch = []
    try:
        yield from _parse(chunks, batch, epbs, secrets)
    except CaptureError:
        if batch:
            yield batch
        raise


def _parse(chunks, batch, epbs, secrets=None):
    buf, end = chunks.buf, chunks.end
    walked = False  # epbs handed packets on since the last batch
    pos = 0
    ts_ns = 0  # last timestamp: Simple Packet Blocks have none
    o = ORDERS[bytes(buf[8:12])]
    u32, epb = o.u32, o.epb
    ifaces = []
    extra = 0  # interfaces declared past MAX_INTERFACES in this section
    while True:
        # Fast path: complete, well-formed Enhanced Packet Blocks, one unpack for both headers.
        while pos + 28 <= end:
            if epbs is not None:
                if batch:   # packets before these blocks go first
                    yield batch[:]
                    batch.clear()
                pos, ts = epbs(buf, chunks.mv, pos, end, o.big, ifaces)
                if ts is not None:
                    ts_ns = ts
                    walked = True
                if pos + 28 > end:
                    break
            btype, blen, iid, hi, lo, caplen, _orig = epb(buf, pos)
            stop = pos + blen
            if btype != EPB or stop > end or blen < 32 or blen & 3:
                break
            if caplen > blen - 32 or caplen > MAX_RECORD:
                raise _bad(chunks, pos, f"bad packet length {caplen}")
            if u32(buf, stop - 4)[0] != blen:
                raise _bad(chunks, pos, "block length mismatch")
            try:
                linktype, scale, mul, div, offset, _ = ifaces[iid]
            except IndexError:
                raise _undeclared(chunks, pos, iid, extra) from None
            if scale == 1:
                ts_ns = (hi << 32) | lo
            elif scale:
                ts_ns = ((hi << 32) | lo) * scale
            else:
                ts_ns = ((hi << 32) | lo) * mul // div + offset
            batch.append((ts_ns, linktype, pos + 28, pos + 28 + caplen))
            pos = stop
        # Any other block (or a damaged or incomplete one), then back to the fast path.
        if pos + 12 <= end:
            btype, blen = o.hdr(buf, pos)
            if btype == SHB:
                o = ORDERS.get(bytes(buf[pos + 8:pos + 12]))
                if o is None:
                    raise _bad(chunks, pos, "bad pcapng byte-order magic")
                u32, epb = o.u32, o.epb
                btype, blen = o.hdr(buf, pos)
            if blen < 12 or blen & 3:
                raise _bad(chunks, pos, f"bad block length {blen}")
            stop = pos + blen
            if stop <= end:
                if u32(buf, stop - 4)[0] != blen:
                    raise _bad(chunks, pos, "block length mismatch")
                if btype == SPB:
                    if blen < 16:
                        raise _bad(chunks, pos, "bad packet block")
                    if not ifaces:
                        raise _bad(chunks, pos, "packet on undeclared interface 0")
                    linktype, _, _, _, _, snaplen = ifaces[0]
                    caplen = min(u32(buf, pos + 8)[0], blen - 16)
                    if snaplen:
                        caplen = min(caplen, snaplen)
                    if caplen > MAX_RECORD:
                        raise _bad(chunks, pos, f"bad packet length {caplen}")
                    batch.append((ts_ns, linktype, pos + 12, pos + 12 + caplen))
                elif btype == IDB:
                    if blen < 20:
                        raise _bad(chunks, pos, "bad interface block")
                    iface = _interface(o, buf, pos, stop, chunks)  # checked even if not kept
                    if len(ifaces) < MAX_INTERFACES:
                        ifaces.append(iface)
                    else:
                        extra += 1
                elif btype == SHB:
                    if blen < 28 or o.u16(buf, pos + 12)[0] != 1:
                        raise _bad(chunks, pos, "unsupported pcapng section")
                    ifaces = []
                    extra = 0
                elif btype == EPB:  # the fast path took every good one
                    raise _bad(chunks, pos, "bad packet block")
                elif btype == DSB:
                    if blen < 20:
                        raise _bad(chunks, pos, "bad decryption secrets block")
                    if secrets is not None:
                        stype, slen = o.hdr(buf, pos + 8)
                        if batch or walked:   # the packets before it go first
                            yield batch[:]
                            batch.clear()
                            walked = False
                        secrets(stype, bytes(buf[pos + 16:pos + 16 + min(slen, blen - 20)]))
                elif btype == PB:
                    if blen < 32:
                        raise _bad(chunks, pos, "bad packet block")
                    iid, _drops, hi, lo, caplen, _orig = o.pb(buf, pos + 8)
                    if caplen > blen - 32 or caplen > MAX_RECORD:
                        raise _bad(chunks, pos, f"bad packet length {caplen}")
                    try:
                        linktype, _, mul, div, offset, _ = ifaces[iid]
                    except IndexError:
                        raise _undeclared(chunks, pos, iid, extra) from None
                    ts_ns = ((hi << 32) | lo) * mul // div + offset
                    batch.append((ts_ns, linktype, pos + 28, pos + 28 + caplen))
                pos = stop
                continue
            if btype not in PARSED:
                if batch or walked:
                    yield batch[:]
                    batch.clear()
                    walked = False
                chunks.skip(stop, chunks.base + pos)
                buf, end = chunks.buf, chunks.end
                pos = 0
                continue
            if blen > MAX_BLOCK:
                raise _bad(chunks, pos, f"block length {blen} too large")
        if batch or walked:
            yield batch[:]
            batch.clear()
            walked = False
        if not chunks.refill(pos):
            if pos < end:
                raise _bad(chunks, 0, "truncated block")
            return
        buf, end = chunks.buf, chunks.end
        pos = 0
