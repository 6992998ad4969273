"""`kafka-dissect read` end to end on small constructed captures (scapy-built packets)."""
import csv
import io
import json
import struct
import subprocess
import sys

import pytest

from dissector.cli import main
from dissector.tables import EXCHANGE_COLUMN_NAMES
from tests.analysis.build import Capture, ms, request_bytes, response_bytes

CONTRACT = ("connection_id client_ip client_port broker_ip broker_port api_key api_name "
            "api_version correlation_id client_id request_ts request_end_ts response_ts "
            "response_end_ts latency_ms total_ms request_bytes response_bytes error_code "
            "error_name error_count throttle_time_ms topics partition_count record_count status "
            "issue_count").split()


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def api_versions_v0_response(corr):
    # error_code 0, one api key entry (Produce 0..9)
    return response_bytes(corr, struct.pack(">hihhh", 0, 1, 0, 0, 9))


def metadata_v1_request(corr):
    return request_bytes(3, 1, corr, struct.pack(">i", -1), client_id="meta-client")


def metadata_v1_response(corr):
    # brokers [], controller_id, topics []
    return response_bytes(corr, struct.pack(">iii", 0, 1, 0))


@pytest.fixture
def simple_capture(tmp_path):
    cap = Capture()
    c = cap.connection(broker_port=19092, ts=ms(0))
    c.request([ms(10), ms(11)], request_bytes(18, 0, 1, client_id="app"))
    c.response(ms(15), api_versions_v0_response(1))
    c.request(ms(20), metadata_v1_request(2))
    c.response([ms(27), ms(28), ms(30)], metadata_v1_response(2))
    return cap.write(tmp_path / "simple.pcap")


def test_csv_has_the_contract_columns_and_hand_computed_times(capsys, simple_capture):
    code, out, err = run_cli(capsys, "read", simple_capture, "--port", "19092", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0].keys())[:len(CONTRACT)] == CONTRACT
    assert [(r["api_name"], r["api_version"], r["correlation_id"], r["status"]) for r in rows] == [
        ("ApiVersions", "0", "1", "ok"), ("Metadata", "1", "2", "ok")]
    first, second = rows
    assert first["client_id"] == "app" and second["client_id"] == "meta-client"
    assert (first["client_ip"], first["client_port"], first["broker_port"]) == ("10.0.0.1", "40000", "19092")
    # request spans packets at 10 and 11 ms, response at 15 ms: latency 4 ms, total 5 ms
    assert float(first["latency_ms"]) == pytest.approx(4.0)
    assert float(first["total_ms"]) == pytest.approx(5.0)
    # response spans 27..30 ms, request at 20 ms: latency 7 ms, total 10 ms
    assert float(second["latency_ms"]) == pytest.approx(7.0)
    assert float(second["total_ms"]) == pytest.approx(10.0)
    assert int(first["request_bytes"]) == len(request_bytes(18, 0, 1, client_id="app"))
    assert int(second["response_bytes"]) == len(metadata_v1_response(2))
    assert first["request_ts"].endswith("Z") and first["request_ts"] < first["request_end_ts"]


def test_port_auto_finds_kafka_on_a_non_standard_port(capsys, simple_capture):
    code, out, _ = run_cli(capsys, "read", simple_capture, "--port", "auto", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(r["api_key"], r["correlation_id"], r["broker_port"]) for r in rows] == [
        (18, 1, 19092), (3, 2, 19092)]
    code, out, _ = run_cli(capsys, "read", simple_capture, "--format", "jsonl")
    assert out == ""   # nothing on the default port 9092


def test_text_lines(capsys, simple_capture):
    code, out, _ = run_cli(capsys, "read", simple_capture, "--port", "19092")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert "ApiVersions v0" in lines[0] and "10.0.0.1:40000 \u2192 10.0.0.2:19092" in lines[0]
    assert "4.000 ms" in lines[0] and lines[0].rstrip().endswith("ok")


def test_bodies_in_jsonl(capsys, simple_capture):
    code, out, _ = run_cli(capsys, "read", simple_capture, "--port", "19092", "--format", "jsonl",
                           "--bodies")
    first = json.loads(out.splitlines()[0])
    assert first["response"]["body"]["api_keys"][0] == {
        "api_key": 0, "min_version": 0, "max_version": 9, "unknown_tags": None} or \
        first["response"]["body"]["api_keys"][0]["max_version"] == 9


def test_acks0_and_reused_correlation_ids_through_the_pipeline(capsys, tmp_path):
    cap = Capture()
    c = cap.connection(ts=ms(0))
    produce_acks0 = struct.pack(">hii", 0, 1000, 0)                # v2: acks, timeout, no topics
    c.request(ms(1), request_bytes(0, 2, 6, produce_acks0))
    c.request(ms(2), metadata_v1_request(7))                      # the same id, reused
    c.response(ms(3), metadata_v1_response(7))
    c.request(ms(4), metadata_v1_request(7))
    c.response(ms(6), metadata_v1_response(7))
    path = cap.write(tmp_path / "acks0.pcap")
    code, out, _ = run_cli(capsys, "read", path, "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["api_name"], r["status"], r["latency_ms"]) for r in rows] == [
        ("Produce", "no_response_expected", None), ("Metadata", "ok", pytest.approx(1.0)),
        ("Metadata", "ok", pytest.approx(2.0))]


def test_sasl_handshake_v0_raw_tokens_do_not_derail_pairing(capsys, tmp_path):
    cap = Capture()
    c = cap.connection(ts=ms(0))
    mech = struct.pack(">h", 5) + b"PLAIN"
    c.request(ms(1), request_bytes(17, 0, 1, mech))
    c.response(ms(2), response_bytes(1, struct.pack(">hi", 0, 1) + mech))
    token = b"\x00alice\x00secret"
    c.request(ms(3), struct.pack(">i", len(token)) + token)
    c.response(ms(4), struct.pack(">i", 0))
    c.request(ms(5), metadata_v1_request(2))
    c.response(ms(6), metadata_v1_response(2))
    path = cap.write(tmp_path / "sasl.pcap")
    code, out, _ = run_cli(capsys, "read", path, "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["api_name"], r["correlation_id"], r["status"], r["issue_count"]) for r in rows] == [
        ("SaslHandshake", 1, "ok", 0), ("SaslToken", None, "ok", 0), ("Metadata", 2, "ok", 0)]


def test_missing_file_and_not_a_capture(capsys, tmp_path):
    code, out, err = run_cli(capsys, "read", tmp_path / "nope.pcap")
    assert code == 2 and "nope.pcap" in err and len(err.strip().splitlines()) == 1
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture at all" * 10)
    code, out, err = run_cli(capsys, "read", junk)
    assert code == 2 and "junk.pcap" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_truncated_capture_keeps_the_exchanges_before_the_damage(capsys, tmp_path, simple_capture):
    data = simple_capture.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-7])           # the last packet record is cut short
    code, out, err = run_cli(capsys, "read", cut, "--port", "19092", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and "cut.pcap" in err and "Traceback" not in err
    assert rows[0]["api_name"] == "ApiVersions" and rows[0]["status"] == "ok"
    assert rows[1]["correlation_id"] == 2      # the request is still reported


def test_python_dash_m_is_the_same_command(simple_capture):
    a = subprocess.run([sys.executable, "-m", "dissector", "read", str(simple_capture), "--port",
                        "19092", "--format", "csv"], capture_output=True, text=True, check=True)
    b = subprocess.run([sys.executable, "-c", "import sys; from dissector.cli import main; "
                        "sys.exit(main())", "read", str(simple_capture), "--port", "19092",
                        "--format", "csv"], capture_output=True, text=True, check=True)
    assert a.stdout == b.stdout and a.stdout.count("\n") == 3


def test_apis_json_covers_368_pairs(capsys):
    code, out, _ = run_cli(capsys, "apis", "--json")
    table = json.loads(out)
    assert code == 0 and len(table) == 95
    assert sum(len(v["versions"]) for v in table.values()) == 368
    assert table["0"]["name"] == "Produce" and table["18"]["name"] == "ApiVersions"


def test_exchange_columns_start_with_the_contract():
    assert EXCHANGE_COLUMN_NAMES[:len(CONTRACT)] == tuple(CONTRACT)


def test_filter_keeps_times_relative_to_the_first_exchange(capsys):
    """As tshark -Y: a filtered line is the unfiltered line of the same exchange, its time
    still counted from the capture's first exchange (not the first match)."""
    from pathlib import Path
    capture = str(Path(__file__).resolve().parents[2] / "captures" / "kafka_python.pcap")
    assert main(["read", capture]) == 0
    every = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert main(["read", capture, "--filter", 'api_name == "Fetch"']) == 0
    kept = capsys.readouterr().out.splitlines()
    assert kept and all(line == every[line.split()[0]] for line in kept)
    assert float(kept[0].split()[1]) > 0
