"""Raw SASL tokens after SaslHandshake v0 written by a real client: kafka-python authenticates
with SCRAM-SHA-512 against a minimal 0.10.0-era broker (scram_broker.py) on loopback, tcpdump
captures it, and the capture must dissect into the handshake, the SCRAM token rounds (as raw
SASL exchanges) and the Metadata request that follows, without an Issue. The broker first
refuses the client's ApiVersions version with Kafka's v0-shaped error 35 reply."""
import time

from tests.support import require_module, require_root, require_tool
from dissector.pipeline import dissect
from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_row

from .scram_broker import PASSWORD, USER, Broker


def test_scram_sha_512_over_handshake_v0(tmp_path):
    require_root()
    require_tool("tcpdump")
    require_module("kafka")
    from kafka import KafkaConsumer
    from tests.traffic import Capture
    path = tmp_path / "scram.pcap"
    with Broker() as broker, Capture(path, broker.port):
        consumer = KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{broker.port}", client_id="scram-client",
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=USER, sasl_plain_password=PASSWORD, request_timeout_ms=5000)
        try:
            topics = consumer.topics()
        finally:
            consumer.close()
        deadline = time.monotonic() + 5
        while broker.authenticated == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert broker.authenticated >= 1 and topics == set()
    run = dissect(path, (broker.port,), level="bodies")
    exchanges = list(run)
    rows = [dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(e))) for e in exchanges]
    assert run.issues == [] and all(r["issue_count"] == 0 for r in rows)
    assert all(r["status"] == "ok" for r in rows)
    first_conn = [r for r in rows if r["connection_id"] == rows[0]["connection_id"]]
    names = [r["api_name"] for r in first_conn]
    # ApiVersions refused (error 35, v0-shaped), retried at v0; SaslHandshake v0; SCRAM's
    # client-first/server-first and client-final/server-final rounds as raw tokens; Metadata
    assert names[:6] == ["ApiVersions", "ApiVersions", "SaslHandshake", "SaslToken", "SaslToken",
                         "Metadata"], names
    assert (first_conn[0]["error_code"], first_conn[0]["error_name"]) == (35, "UNSUPPORTED_VERSION")
    assert first_conn[0]["api_version"] > 0 and first_conn[1]["api_version"] == 0
    assert first_conn[2]["api_version"] == 0 and first_conn[2]["error_code"] == 0
    first, final = exchanges[3], exchanges[4]
    assert first.raw_sasl and bytes(first.request.data).startswith(f"n,,n={USER},r=".encode())
    assert bytes(first.response.data).startswith(b"r=")
    assert bytes(final.request.data).startswith(b"c=biws,r=") and bytes(final.response.data).startswith(b"v=")
