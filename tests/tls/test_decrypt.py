"""Real TLS (OpenSSL through Python's ssl) carrying the Kafka conversations of a shipped plaintext
capture: decrypted with the key log OpenSSL wrote, the exchanges must be the plaintext capture's."""
import pytest

from dissector.pipeline import dissect

from tests.tls.conftest import PLAIN, PLAIN_PORT, TLS_PORT


def exchanges(path, port, **kw):
    run = dissect(path, (port,), level="bodies", **kw)
    rows = [(e.api_key, e.api_version, e.correlation_id, e.client_id, e.status, e.error_code,
             e.topics, e.partition_count, e.record_count,
             e.request.length if e.request else None, e.response.length if e.response else None)
            for e in run]
    # the TLS captures carry the connections one after the other, not interleaved as captured
    return sorted(rows, key=repr), run


@pytest.fixture(scope="module")
def truth():
    rows, run = exchanges(PLAIN, PLAIN_PORT)
    assert rows and not run.issues
    return rows


CASES = [
    ("1.3", None, "TLS_AES_256_GCM_SHA384"),
    ("1.3", None, "TLS_AES_256_GCM_SHA384", 100),   # records cut into many small segments
    ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
    # CBC suites (OpenSSL negotiates encrypt_then_mac)
    ("1.2", "ECDHE-ECDSA-AES128-SHA", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"),
    ("1.2", "ECDHE-ECDSA-AES256-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384"),
    ("1.2", "ECDHE-ECDSA-AES128-SHA256:@SECLEVEL=0", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"),


    # ... and MAC-then-encrypt, what Java clients negotiate
    ("1.2", "ECDHE-ECDSA-AES128-SHA", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 1448, False),
    ("1.2", "ECDHE-ECDSA-AES256-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", 1448, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c[:2] + c[3:]))
def test_decrypted_exchanges_are_the_plaintext_ones(make_tls, truth, case):
    version, ciphers, name = case[:3]
    mss = case[3] if len(case) > 3 else 1448
    etm = case[4] if len(case) > 4 else True
    cap, keys = make_tls(version, ciphers, mss=mss, etm=etm)
    rows, run = exchanges(cap, TLS_PORT, keylog=keys)
    assert rows == truth
    assert not run.issues
    conns = run.connections
    assert conns and all(c.tls is not None and c.tls.decrypted for c in conns)
    assert {c.tls.cipher_name for c in conns} == {name}
    assert {c.tls.version_name for c in conns} == {f"TLS {version}"}
    assert {c.tls.sni for c in conns} == {"kafka.test"}
    assert {c.tls.alpn for c in conns} == {"kafka"}
    assert all(c.tls.handshake_ms is not None and c.tls.handshake_ms > 0 for c in conns)
    assert run.dissector.tls.undecrypted == 0
    if "CBC" in name:
        assert {c.tls.etm for c in conns} == {etm}


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_without_keys_tls_is_recognised_not_framed(make_tls, version):
    cap, _keys = make_tls(version, "ECDHE-ECDSA-AES128-GCM-SHA256" if version == "1.2" else None)
    for ports, auto in (((TLS_PORT,), False), ((), True)):
        run = dissect(cap, ports, auto=auto, level="bodies")
        assert list(run) == []
        codes = [i.code for i in run.issues]
        assert set(codes) <= {"tls.no_keys"}
        if not auto:
            assert len(codes) == len(run.connections) == run.dissector.tls.undecrypted > 0
            assert all("SNI kafka.test" in i.detail for i in run.issues)
            tls = [c.tls for c in run.connections]
            assert not any(t.decrypted for t in tls)
            assert all((t.handshake_ms is not None) == (version == "1.2") for t in tls)
