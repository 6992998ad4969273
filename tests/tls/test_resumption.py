"""Resumed TLS sessions, as clients that reconnect make them (Java's session cache, librdkafka's
OpenSSL): each connection after the first resumes the one before it, an abbreviated TLS 1.2
handshake (no certificate, no key exchange: the master secret is the first session's, logged
again under the new client random) or a TLS 1.3 PSK handshake. OpenSSL says which resumed; the
plaintext capture is what every connection must give."""
import collections

import pytest

from dissector.pipeline import dissect
from tests.support import CAPTURES, require_module
from tests.tls.conftest import TLS_PORT

PLAIN = CAPTURES / "kafka_python.pcap"


def row(ex):
    return (ex.api_key, ex.api_version, ex.correlation_id, ex.client_id, ex.status,
            ex.request and ex.request.length, ex.response and ex.response.length, ex.error_code)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_resumed_sessions_decrypt(tmp_path, version):
    require_module("cryptography")
    from tests.tls import tlsgen
    keys = tmp_path / "keys.txt"
    client, server = tlsgen.contexts(keys, version, None, tmp_path)
    wires, resumed, session = [], [], None
    for conv in tlsgen.conversations(PLAIN, 9092):
        pair = tlsgen.Pair(client, server, session=session)
        pair.handshake()
        for d, payload in conv:
            pair.send(d, payload)
        resumed.append(pair.ends[0].session_reused)
        session = pair.ends[0].session
        pair.close()
        wires.append(pair.wire)
    assert resumed == [False] + [True] * (len(wires) - 1) and len(wires) > 3
    path = tmp_path / "resumed.pcap"
    tlsgen.write_pcap(path, tlsgen.packets(wires, TLS_PORT))
    run = dissect(path, (TLS_PORT,), keylog=[keys])
    got = collections.Counter(map(row, run))
    assert got == collections.Counter(map(row, dissect(PLAIN, (9092,))))
    assert not run.issues and run.dissector.tls.undecrypted == 0
    assert {c.tls.version_name for c in run.connections} == {f"TLS {version}"}
