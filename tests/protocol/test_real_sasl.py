"""Raw SASL tokens after SaslHandshake v0 written by a real client: kafka-python authenticates
with SCRAM-SHA-512 against a minimal 0.10.0-era broker (scram_broker.py) on loopback, tcpdump
captures it, and the capture must dissect into the handshake, the SCRAM token rounds (as raw
SASL exchanges) and the Metadata request that follows, without an Issue. The broker first
refuses the client's ApiVersions version with Kafka's v0-shaped error 35 reply."""
import base64
import json
import re
import time

import pytest

from tests.support import require_module, require_root, require_tool
from dissector.cli import main
from dissector.pipeline import dissect
from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_row

from .scram_broker import BEARER, PASSWORD, USER, Broker, list_topics


def test_scram_sha_512_over_handshake_v0(tmp_path):
    require_root()
    require_tool("tcpdump")
    require_module("kafka")
    from tests.traffic import Capture
    path = tmp_path / "scram.pcap"
    with Broker() as broker, Capture(path, broker.port):
        topics = list_topics(broker.port, "SCRAM-SHA-512")
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


def _undump(text: str, start: int) -> list:
    """The bytes of the hex dump after line `start` of `tree` text output (None: masked)."""
    out = []
    for line in text.splitlines()[start:]:
        if not re.match(r"^[0-9a-f]{8}  ", line):
            break
        cells = line[10:10 + 49].split()
        out += [None if c == "**" else int(c, 16) for c in cells]
    return out


def _dumps(text: str) -> list[list]:
    lines = text.splitlines()
    return [_undump(text, i) for i, line in enumerate(lines)
            if re.match(r"^00000000  ", line)]


def _secrets_of(token: bytes) -> list[bytes]:
    """What must not be shown, found in the real token by hand (not by dissector.secrets)."""
    if token.startswith(b"c=") and b",p=" in token:
        return [token.rsplit(b",p=", 1)[1]]
    if token.startswith(b"v="):
        return [token[2:]]
    if token.count(b"\0") == 2:
        return [PASSWORD.encode()]
    if b"auth=Bearer " in token:
        return [BEARER.encode()]
    return []


@pytest.mark.parametrize("mechanism, authenticate", [
    ("SCRAM-SHA-512", False), ("PLAIN", False), ("OAUTHBEARER", False),
    ("SCRAM-SHA-512", True), ("PLAIN", True), ("OAUTHBEARER", True)])
def test_secrets_masked_in_real_sasl(tmp_path, capsys, mechanism, authenticate):
    require_root()
    require_tool("tcpdump")
    require_module("kafka")
    from tests.traffic import Capture
    path = tmp_path / "sasl.pcap"
    with Broker(mechanism, authenticate) as broker, Capture(path, broker.port):
        list_topics(broker.port, mechanism)
    assert broker.authenticated >= 1
    port = str(broker.port)
    exchanges = list(dissect(path, (broker.port,), level="bodies"))
    sasl = [e for e in exchanges if e.raw_sasl or e.api_key == 36]
    assert sasl and all(e.status == "ok" for e in sasl)
    # every secret the client and the broker sent, found in the real bytes
    wanted = []
    for e in sasl:
        for frame, msg in ((e.request, e.request_msg), (e.response, e.response_msg)):
            token = bytes(frame.data) if e.raw_sasl else bytes(msg.body.auth_bytes)
            wanted += [(frame, s) for s in _secrets_of(token)]
    kinds = {s for _, s in wanted}
    assert len(kinds) >= (2 if mechanism.startswith("SCRAM") else 1)   # proof and signature

    for e in sasl:
        assert main(["tree", str(path), "--port", port, "--exchange", str(e.index)]) == 0
        masked = capsys.readouterr().out
        assert main(["tree", str(path), "--port", port, "--exchange", str(e.index),
                     "--show-secrets"]) == 0
        shown = capsys.readouterr().out
        dumps = dict(zip((e.request, e.response), _dumps(masked)))
        for frame, secret in wanted:
            if frame in dumps:
                data = bytes(frame.data)
                at = data.index(secret)
                dump = dumps[frame]
                assert dump[at:at + len(secret)] == [None] * len(secret)
                assert all(b is not None for b in dump[:at])   # the rest stays
                assert secret.decode() not in masked
                assert _dumps(shown)[0 if frame is e.request else 1] == list(data)
        assert main(["tree", str(path), "--port", port, "--exchange", str(e.index),
                     "--format", "json"]) == 0
        as_json = capsys.readouterr().out
        assert not any(s.hex() in as_json for _, s in wanted)
        if not e.raw_sasl and any(f in (e.request, e.response) for f, _ in wanted):
            assert "<masked>" in masked and "<masked>" in as_json

    assert main(["read", str(path), "--port", port, "--format", "jsonl", "--bodies"]) == 0
    masked = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["read", str(path), "--port", port, "--format", "jsonl", "--bodies",
                 "--show-secrets"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    strip = [{k: v for k, v in r.items() if k not in ("request", "response")} for r in masked]
    assert strip == [{k: v for k, v in r.items() if k not in ("request", "response")}
                     for r in shown]   # the columns and the pairing do not change
    text = json.dumps(masked)
    assert not any(base64.b64encode(s).decode() in text or s.decode() in text for _, s in wanted)
    if authenticate:
        tokens = [r["request"]["body"]["auth_bytes"] for r in masked if r["api_key"] == 36]
        assert "<masked>" in tokens
        assert any(PASSWORD.encode() in base64.b64decode(r["request"]["body"]["auth_bytes"])
                   or BEARER.encode() in base64.b64decode(r["request"]["body"]["auth_bytes"])
                   or b",p=" in base64.b64decode(r["request"]["body"]["auth_bytes"])
                   for r in shown if r["api_key"] == 36)
