"""Secrets in bodies beyond SASL (tests/protocol/test_real_sasl.py has SASL on real traffic):
delegation-token HMACs and ids, and sensitive config values, masked in `tree` (text, JSON, hex
dump) and `read --bodies` unless --show-secrets. Messages encoded by kio."""
import datetime
import json

import pytest

from dissector.cli import main
from dissector.secrets import sasl_secret_spans
from tests.analysis.build import Capture, kio_request, kio_response, ms
from tests.support import require_module

HMAC, TOKEN_ID, PASSWORD, JAAS = b"\x8f\x01hmac-bytes", "token-id-42", "hunter2", "jaas-secret"


def _exchanges():
    from kio.schema.alter_configs.v1 import request as aq
    from kio.schema.alter_configs.v1 import response as as_
    from kio.schema.create_delegation_token.v2 import request as cq
    from kio.schema.create_delegation_token.v2 import response as cs
    from kio.schema.describe_configs.v4 import request as dq
    from kio.schema.describe_configs.v4 import response as ds
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i8
    zero = datetime.timedelta(0)
    now = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    yield (cq.CreateDelegationTokenRequest(renewers=(), max_lifetime=datetime.timedelta(hours=1)),
           cs.CreateDelegationTokenResponse(error_code=ErrorCode(0), principal_type="User",
                                            principal_name="alice", issue_timestamp=now,
                                            expiry_timestamp=now, max_timestamp=now,
                                            token_id=TOKEN_ID, hmac=HMAC, throttle_time=zero))
    yield (aq.AlterConfigsRequest(resources=(aq.AlterConfigsResource(
        resource_type=i8(4), resource_name="0", configs=(
            aq.AlterableConfig(name="ssl.key.password", value=PASSWORD),
            aq.AlterableConfig(name="log.retention.ms", value="1000"))),), validate_only=False),
           as_.AlterConfigsResponse(throttle_time=zero, responses=()))
    yield (dq.DescribeConfigsRequest(resources=(), include_synonyms=True,
                                     include_documentation=False),
           ds.DescribeConfigsResponse(throttle_time=zero, results=(ds.DescribeConfigsResult(
               error_code=ErrorCode(0), error_message=None, resource_type=i8(4),
               resource_name="0", configs=(
                   ds.DescribeConfigsResourceResult(
                       name="listener.name.x.sasl.jaas.config", value=JAAS, read_only=False,
                       config_source=i8(1), is_sensitive=False, config_type=i8(2),
                       documentation=None, synonyms=(ds.DescribeConfigsSynonym(
                           name="sasl.jaas.config", value=JAAS, source=i8(1)),)),
                   ds.DescribeConfigsResourceResult(
                       name="custom.flagged", value=PASSWORD, read_only=False,
                       config_source=i8(1), is_sensitive=True, config_type=i8(2),
                       documentation=None, synonyms=()),
                   ds.DescribeConfigsResourceResult(
                       name="num.io.threads", value="8", read_only=False,
                       config_source=i8(1), is_sensitive=False, config_type=i8(3),
                       documentation=None, synonyms=()))),)))


def write_secrets_capture(path):
    """A capture of the exchanges above, one connection, written to path (needs kio)."""
    require_module("kio")
    cap = Capture()
    conn = cap.connection(ts=ms(0))
    for corr, (req, resp) in enumerate(_exchanges(), start=1):
        conn.request(ms(10 * corr), kio_request(req, corr))
        conn.response(ms(10 * corr + 1), kio_response(resp, corr))
    return cap.write(path)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return str(write_secrets_capture(tmp_path_factory.mktemp("secrets") / "secrets.pcap"))


SECRETS = [HMAC, TOKEN_ID.encode(), PASSWORD.encode(), JAAS.encode()]


def _out(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_tree_masks_and_shows(capture, capsys):
    for n in (1, 2, 3):
        text = _out(capsys, "tree", capture, "--exchange", str(n))
        js = _out(capsys, "tree", capture, "--exchange", str(n), "--format", "json")
        shown = _out(capsys, "tree", capture, "--exchange", str(n), "--format", "json",
                     "--show-secrets")
        for s in SECRETS:
            assert s.hex() not in js and s.decode("latin-1") not in text
        assert "<masked>" in text and '"value": "<masked>"' in js
        assert any(s.hex() in shown for s in SECRETS)
    text = _out(capsys, "tree", capture, "--exchange", "2")
    assert 'value: "1000"' in text and "value: <masked>" in text
    text = _out(capsys, "tree", capture, "--exchange", "3")
    assert text.count("value: <masked>") == 3 and 'value: "8"' in text


def test_read_bodies(capture, capsys):
    masked = _out(capsys, "read", capture, "--format", "jsonl", "--bodies")
    shown = _out(capsys, "read", capture, "--format", "jsonl", "--bodies", "--show-secrets")
    assert PASSWORD not in masked and JAAS not in masked and TOKEN_ID not in masked
    assert PASSWORD in shown and JAAS in shown and TOKEN_ID in shown
    rows = [json.loads(line) for line in masked.splitlines()]
    assert rows[0]["response"]["body"]["hmac"] == "<masked>"
    configs = rows[1]["request"]["body"]["resources"][0]["configs"]
    assert [c["value"] for c in configs] == ["<masked>", "1000"]


@pytest.mark.parametrize("token, spans", [
    (b"\0alice\0pencil", [(7, 13)]),
    (b"n,,n=alice,r=abc", []),
    (b"r=abcdef,s=c2FsdA==,i=4096", []),
    (b"c=biws,r=abcdef,p=cHJvb2Y=", [(18, 26)]),
    (b"v=c2lnbmF0dXJl", [(2, 14)]),
    (b"n,,\x01auth=Bearer tok.en\x01\x01", [(16, 22)]),
    (b"\x60\x82kerberos", [(0, 10)]),
    (b"", []),
])
def test_sasl_spans(token, spans):
    assert sasl_secret_spans(token) == spans
