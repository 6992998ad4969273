"""A capture of many small exchanges, written directly (Ethernet/IPv4/TCP headers packed by
hand, as fast as the file can be written): ApiVersions v0 on one connection, a response every
tenth of which carries error 35 (UNSUPPORTED_VERSION)."""
import struct

from dissector.capture.writer import PcapWriter
from tests.analysis.build import T0, request_bytes, response_bytes

CLIENT, BROKER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
CPORT, BPORT = 40000, 9092


def _packet(to_broker, seq, ack, flags, payload):
    src, dst = (CLIENT, BROKER) if to_broker else (BROKER, CLIENT)
    sport, dport = (CPORT, BPORT) if to_broker else (BPORT, CPORT)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, src, dst)
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    return eth + ip + tcp + payload


def write(path, n):
    """n exchanges, 1 ms apart, each answered 0.25 ms later."""
    seq = {True: 1000, False: 5000}
    with PcapWriter(str(path), 1) as w:
        w.write(T0, _packet(True, 999, 0, 0x02, b""))
        w.write(T0 + 1, _packet(False, 4999, 1000, 0x12, b""))
        w.write(T0 + 2, _packet(True, 1000, 5000, 0x10, b""))
        body_ok = b"\x00\x00\x00\x00\x00\x00"
        body_err = b"\x00\x23\x00\x00\x00\x00"
        for i in range(n):
            corr = i + 1
            req = request_bytes(18, 0, corr, client_id=f"client-{i % 7}")
            resp = response_bytes(corr, body_err if i % 10 == 9 else body_ok)
            t = T0 + 1_000_000 * (i + 1)
            w.write(t, _packet(True, seq[True], seq[False], 0x18, req))
            seq[True] += len(req)
            w.write(t + 250_000, _packet(False, seq[False], seq[True], 0x18, resp))
            seq[False] += len(resp)
    return path
