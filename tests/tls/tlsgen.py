"""Real TLS bytes for the tests: the Kafka conversations of a plaintext capture re-sent through
Python's ssl (OpenSSL) over memory BIOs, written as a capture with the key log OpenSSL wrote.

Nothing here uses the dissector: the conversations are read from the plaintext capture with dpkt,
the TLS bytes come from OpenSSL, the packets are packed with struct. The plaintext capture is then
the truth the decrypted capture must match.

    python tests/tls/tlsgen.py PLAIN.pcap OUT.pcap KEYS --version 1.3 [--ciphers ...]

(run as a script by tests that need OpenSSL configured through OPENSSL_CONF, e.g. TLS 1.3
ChaCha20, which Python's ssl cannot choose otherwise).
"""
from __future__ import annotations

import argparse
import datetime
import ssl
import struct
import tempfile
from pathlib import Path

import dpkt

MSS = 1448
NO_ENCRYPT_THEN_MAC = 0x00080000   # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not in Python's ssl)
CLIENT_IP, SERVER_IP = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
_CERT = None


def conversations(pcap_path, port):
    """[[ (direction, payload) ]] per TCP connection to `port`, in capture order (0: client to
    broker). The shipped loopback captures are clean: no loss, no reordering."""
    convs = {}
    order = []
    with open(pcap_path, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            payload = bytes(tcp.data)[:max(ip.len - ip.hl * 4 - tcp.off * 4, 0)]
            if tcp.dport == port:
                key, d = (ip.src, tcp.sport), 0
            elif tcp.sport == port:
                key, d = (ip.dst, tcp.dport), 1
            else:
                continue
            if tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK:
                if key in convs:   # a reused tuple: a new connection
                    key = key + (len(order),)
                convs[key] = []
                order.append(key)
            if key not in convs:
                convs[key] = []
                order.append(key)
            if payload:
                c = convs[key]
                if c and c[-1][0] == d:
                    c[-1] = (d, c[-1][1] + payload)
                else:
                    c.append((d, payload))
    return [convs[k] for k in order if convs[k]]


def certificate(directory):
    """A self-signed EC certificate and key (PEM files in `directory`), made once."""
    global _CERT
    if _CERT is not None and Path(_CERT[0]).exists():
        return _CERT
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .sign(key, hashes.SHA256()))
    d = Path(directory)
    cpath, kpath = d / "cert.pem", d / "key.pem"
    cpath.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kpath.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    _CERT = (str(cpath), str(kpath))
    return _CERT


def contexts(keylog, version="1.3", ciphers=None, directory=None, etm=True):
    """Client and server contexts: one TLS version, optionally one cipher list; etm=False
    turns encrypt_then_mac off (CBC suites then MAC before encrypting, as Java clients do)."""
    cert, key = certificate(directory or tempfile.mkdtemp())
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.keylog_filename = str(keylog)
    v = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    for ctx in (server, client):
        ctx.minimum_version = ctx.maximum_version = v
        if ciphers:
            ctx.set_ciphers(ciphers)
        if not etm:
            ctx.options |= NO_ENCRYPT_THEN_MAC
    client.set_alpn_protocols(["kafka"])
    server.set_alpn_protocols(["kafka"])
    return client, server


class Pair:
    """A client and a server SSLObject joined by memory BIOs; `wire` collects what each sends,
    as (direction, bytes) chunks in the order they were sent."""

    def __init__(self, client_ctx, server_ctx, sni="kafka.test", session=None):
        """session: an earlier Pair's client `ends[0].session`, to resume."""
        self.bios = [(ssl.MemoryBIO(), ssl.MemoryBIO()), (ssl.MemoryBIO(), ssl.MemoryBIO())]
        self.ends = [client_ctx.wrap_bio(*self.bios[0], server_hostname=sni, session=session),
                     server_ctx.wrap_bio(*self.bios[1], server_side=True)]
        self.wire = []

    def _move(self):
        moved = False
        for d in (0, 1):
            data = self.bios[d][1].read()
            if data:
                moved = True
                self.wire.append((d, data))
                self.bios[1 - d][0].write(data)
        return moved

    def handshake(self):
        done = [False, False]
        for _ in range(100):
            for d in (0, 1):
                if not done[d]:
                    try:
                        self.ends[d].do_handshake()
                        done[d] = True
                    except ssl.SSLWantReadError:
                        pass
            if not self._move() and all(done):
                break
        assert all(done)

    def send(self, d, payload):
        """`payload` written by side d, read whole by the other side."""
        self.ends[d].write(payload)
        self._move()
        got = b""
        while len(got) < len(payload):
            got += self.ends[1 - d].read(1 << 20)
        assert got == payload
        self._move()

    def close(self):
        for d in (0, 1):
            try:
                self.ends[d].unwrap()
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass
            self._move()


def tls_wire(conv, client_ctx, server_ctx, sni="kafka.test"):
    """The TLS chunks (direction, bytes) carrying a conversation."""
    p = Pair(client_ctx, server_ctx, sni)
    p.handshake()
    for d, payload in conv:
        p.send(d, payload)
    p.close()
    return p.wire


# -- packets --------------------------------------------------------------------------------------


def _ipv4_tcp(src, dst, sport, dport, seq, ack, flags, payload):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4,
                      flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    return eth + ip + tcp + payload


FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10


def packets(wires, port=9093, mss=MSS, start_ns=1_700_000_000 * 10**9, step_ns=50_000):
    """(ts_ns, frame) of TCP connections carrying `wires` (lists of (direction, bytes)): the
    three-way handshake, each chunk cut into segments of at most `mss` bytes, FINs."""
    out = []
    ts = start_ns
    for i, wire in enumerate(wires):
        cport = 40000 + i
        ends = [(CLIENT_IP, SERVER_IP, cport, port), (SERVER_IP, CLIENT_IP, port, cport)]
        seq = [1000 + i * 7919, 5000 + i * 104729]

        def emit(d, flags, payload=b""):
            nonlocal ts
            ts += step_ns
            src, dst, sp, dp = ends[d]
            out.append((ts, _ipv4_tcp(src, dst, sp, dp, seq[d], seq[1 - d], flags, payload)))
            seq[d] += len(payload) + (1 if flags & (SYN | FIN) else 0)

        emit(0, SYN)
        emit(1, SYN | ACK)
        emit(0, ACK)
        for d, data in wire:
            for k in range(0, len(data), mss):
                emit(d, ACK | PSH, data[k:k + mss])
        emit(0, FIN | ACK)
        emit(1, FIN | ACK)
        emit(0, ACK)
    return out


def write_pcap(path, pkts):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, frame in pkts:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(frame), len(frame)))
            f.write(frame)


def write_pcapng(path, pkts, secrets=None):
    """pcapng with a Decryption Secrets Block of TLS key log text `secrets` first, if given."""
    def block(btype, body):
        body += b"\0" * (-len(body) & 3)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)
    with open(path, "wb") as f:
        f.write(block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
        if secrets is not None:
            f.write(block(0x0A, struct.pack("<II", 0x544C534B, len(secrets)) + secrets))
        f.write(block(1, struct.pack("<HHI", 1, 0, 262144)
                      + struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)))
        for ts, frame in pkts:
            f.write(block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(frame),
                                         len(frame)) + frame))


def make(plain, out, keylog, port, version="1.3", ciphers=None, mss=MSS, tls_port=9093,
         etm=True):
    """A TLS capture of `plain`'s conversations on `port`; returns the TLS wires."""
    client, server = contexts(keylog, version, ciphers, Path(out).parent, etm)
    wires = [tls_wire(c, client, server) for c in conversations(plain, port)]
    write_pcap(out, packets(wires, tls_port, mss))
    return wires


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plain")
    ap.add_argument("out")
    ap.add_argument("keylog")
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument("--version", default="1.3")
    ap.add_argument("--ciphers")
    args = ap.parse_args()
    make(args.plain, args.out, args.keylog, args.port, args.version, args.ciphers)


if __name__ == "__main__":
    main()
