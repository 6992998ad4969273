"""TLS 1.3 KeyUpdate (RFC 8446 4.6.3), which Python's ssl cannot be asked to send: a real TLS 1.3
session from OpenSSL is re-encrypted here, record by record, with KeyUpdate messages spliced into
its application data and every later record protected with the next generation of traffic keys.
The key schedule and record protection below are written from the RFC for this test, on
`cryptography`'s primitives, apart from the dissector's."""
import struct


from dissector.pipeline import dissect

from tests.support import CAPTURES, require_module
from tests.tls.conftest import TLS_PORT

PLAIN = CAPTURES / "kafka_python.pcap"


def _expand_label(secret, label, length):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + b"\0"
    return HKDFExpand(hashes.SHA384(), length, info).derive(secret)


class Protection:
    """One direction's application traffic protection for TLS_AES_256_GCM_SHA384."""

    def __init__(self, secret):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        self.secret = secret
        self.aead = AESGCM(_expand_label(secret, b"key", 32))
        self.iv = _expand_label(secret, b"iv", 12)
        self.seq = 0

    def _nonce(self):
        return bytes(a ^ b for a, b in zip(self.iv, self.seq.to_bytes(12, "big")))

    def open(self, record):
        from cryptography.exceptions import InvalidTag
        try:
            return self.aead.decrypt(self._nonce(), record[5:], record[:5])
        except InvalidTag:
            return None

    def seal(self, inner):
        header = struct.pack(">BHH", 23, 0x0303, len(inner) + 16)
        out = header + self.aead.encrypt(self._nonce(), inner, header)
        self.seq += 1
        return out

    def update(self):
        return Protection(_expand_label(self.secret, b"traffic upd", len(self.secret)))


def _records(data):
    out, pos = [], 0
    while pos < len(data):
        n = struct.unpack_from(">H", data, pos + 3)[0]
        out.append(data[pos:pos + 5 + n])
        pos += 5 + n
    return out


KEY_UPDATE = b"\x18\x00\x00\x01\x00" + b"\x16"   # KeyUpdate(update_not_requested), type handshake


def with_key_updates(wire, secrets, every):
    """The wire with a KeyUpdate after every `every` application records of each direction."""
    old = [Protection(secrets[0]), Protection(secrets[1])]
    new = [Protection(secrets[0]), Protection(secrets[1])]
    started = [False, False]
    count = [0, 0]
    out = []
    for d, chunk in wire:
        pieces = []
        for rec in _records(chunk):
            inner = old[d].open(rec) if rec[0] == 23 else None
            if inner is None:
                if started[d] and rec[0] == 23:
                    raise AssertionError("a record under neither key")
                pieces.append(rec)   # handshake records, under handshake keys
                continue
            started[d] = True
            old[d].seq += 1
            pieces.append(new[d].seal(inner))
            count[d] += 1
            if count[d] % every == 0:
                pieces.append(new[d].seal(KEY_UPDATE))
                new[d] = new[d].update()
        out.append((d, b"".join(pieces)))
    return out, count


def test_key_update(tmp_path):
    require_module("cryptography")
    from tests.tls import tlsgen
    keys = tmp_path / "keys.txt"
    client, server = tlsgen.contexts(keys, "1.3", None, tmp_path)
    wires = [tlsgen.tls_wire(c, client, server) for c in tlsgen.conversations(PLAIN, 9092)]
    plain = tmp_path / "tls.pcap"
    tlsgen.write_pcap(plain, tlsgen.packets(wires, TLS_PORT))
    by_random = {}
    for line in keys.read_text().splitlines():
        if line and not line.startswith("#"):
            label, cr, secret = line.split()
            by_random.setdefault(cr, {})[label] = bytes.fromhex(secret)
    sessions = list(by_random.values())   # in handshake order, as the wires
    assert len(sessions) == len(wires)
    updated, counts = [], [0, 0]
    for wire, s in zip(wires, sessions):
        w, c = with_key_updates(wire, (s["CLIENT_TRAFFIC_SECRET_0"], s["SERVER_TRAFFIC_SECRET_0"]),
                                every=2)
        updated.append(w)
        counts = [counts[0] + c[0], counts[1] + c[1]]
    assert min(counts) >= 8   # several generations in each direction
    cap = tmp_path / "updated.pcap"
    tlsgen.write_pcap(cap, tlsgen.packets(updated, TLS_PORT))

    def rows(path):
        run = dissect(path, (TLS_PORT,), level="bodies", keylog=keys)
        return [(e.api_key, e.api_version, e.correlation_id, e.status, e.request.length,
                 e.response.length) for e in run], run
    want, _ = rows(plain)
    got, run = rows(cap)
    assert want and got == want and not run.issues
