"""SASL_SSL: a real client (kafka-python) authenticating with SCRAM-SHA-512, PLAIN and OAUTHBEARER
(raw tokens after SaslHandshake v0, or inside SaslAuthenticate) against the minimal broker of
tests/protocol/scram_broker.py, its conversation recorded by a relay on loopback (no root needed),
then carried over real TLS: decrypted, it must dissect as the same conversation in the clear."""
import socket
import threading

import pytest

from dissector.pipeline import dissect

from tests.support import require_module
from tests.protocol.scram_broker import Broker, list_topics
from tests.tls.conftest import TLS_PORT


class Relay:
    """Forwards each connection to `port`, recording (direction, bytes) per connection."""

    def __init__(self, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conversations = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                a, _ = self.sock.accept()
            except socket.timeout:
                continue
            b = socket.create_connection(("127.0.0.1", self.target))
            conv = []
            self.conversations.append(conv)
            for d, src, dst in ((0, a, b), (1, b, a)):
                t = threading.Thread(target=self._pump, args=(d, src, dst, conv), daemon=True)
                self._threads.append(t)
                t.start()

    def _pump(self, d, src, dst, conv):
        src.settimeout(0.2)
        while not self._stop.is_set():
            try:
                data = src.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            with self._lock:   # recorded before it is passed on: the order on the wire
                conv.append((d, data))
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self.sock.close()


def conversation(mechanism, authenticate):
    with Broker(mechanism, authenticate) as broker:
        relay = Relay(broker.port)
        try:
            list_topics(relay.port, mechanism)
        finally:
            relay.close()
    return [c for c in relay.conversations if c]


@pytest.mark.parametrize("mechanism, authenticate", [
    ("SCRAM-SHA-512", False), ("PLAIN", True), ("OAUTHBEARER", False)])
def test_sasl_inside_tls(tmp_path, mechanism, authenticate):
    require_module("kafka")
    require_module("cryptography")
    from tests.tls import tlsgen
    convs = conversation(mechanism, authenticate)
    assert convs
    clear = tmp_path / "clear.pcap"
    tlsgen.write_pcap(clear, tlsgen.packets(convs, TLS_PORT))
    keys = tmp_path / "keys.txt"
    client, server = tlsgen.contexts(keys, "1.3", None, tmp_path)
    cap = tmp_path / "tls.pcap"
    tlsgen.write_pcap(cap, tlsgen.packets([tlsgen.tls_wire(c, client, server) for c in convs],
                                          TLS_PORT))

    def rows(path, **kw):
        run = dissect(path, (TLS_PORT,), level="bodies", **kw)
        out = [(e.raw_sasl, e.api_key, e.api_version, e.correlation_id, e.status, e.error_code,
                bytes(e.request.data), bytes(e.response.data)) for e in run]
        return out, run
    want, run = rows(clear)
    assert not run.issues
    assert any(r[0] or r[1] == 36 for r in want)   # SASL tokens, raw or in SaslAuthenticate
    got, run = rows(cap, keylog=keys)
    assert got == want and not run.issues
