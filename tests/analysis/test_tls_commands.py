"""--keylog (and $SSLKEYLOGFILE) on records, stats, report and export, and keylog= on
analysis.load, on the shipped TLS capture (captures/tls/kafka_tls.pcap: its TLS leg on 9093 and
the same Kafka messages in the clear on 19092, captured at once; captures/README.md). What the
key log decrypts must equal what the plaintext leg carries; without keys nothing is read as
Kafka and the TLS connections are counted as not decrypted."""
import json
from collections import Counter

import pytest
from pandas.testing import assert_frame_equal

import analysis
from analysis.load import TABLES
from dissector.cli import main
from tests.support import CAPTURES

FOLDER = CAPTURES / "tls"
PCAP = FOLDER / "kafka_tls.pcap"
KEYS = FOLDER / "kafka_tls.keys.log"
TLS, PLAIN = "9093", "19092"
CONNECTIONS = 7   # TLS connections in the capture (its truth file's terminator map)


@pytest.fixture(autouse=True)
def no_default_keylog(monkeypatch):
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)


def _requests(t):
    """What the client sent, the same on both legs: (client id, api, version, correlation id,
    request bytes) of each exchange."""
    ex = t.exchanges
    return Counter(zip(ex["client_id"].astype(str), ex["api_key"], ex["api_version"],
                       ex["correlation_id"], ex["request_bytes"]))


def _records(t):
    r = t.records
    return Counter(zip(r["direction"], r["topic"].astype(str), r["partition"], r["offset"],
                       r["key"], r["value"], r["headers"].map(repr)))


def test_load_with_keylog_is_the_plaintext_leg():
    tls = analysis.load(PCAP, port=int(TLS), records=True, keylog=KEYS)
    plain = analysis.load(PCAP, port=int(PLAIN), records=True)
    assert len(tls.exchanges) == len(plain.exchanges) >= 30
    assert _requests(tls) == _requests(plain)
    assert _records(tls) == _records(plain) and len(tls.records) >= 24
    c = tls.connections
    assert len(c) == CONNECTIONS and c["tls_decrypted"].all()
    assert set(c["tls_version"].astype(str)) == {"TLS 1.3"}
    assert set(tls.exchanges["tls_cipher"].astype(str)) == {"TLS_AES_128_GCM_SHA256"}
    assert plain.exchanges["tls_version"].isna().all()


def test_load_takes_sslkeylogfile_by_default(monkeypatch):
    without = analysis.load(PCAP, port=int(TLS))
    assert len(without.exchanges) == 0
    assert len(without.connections) == CONNECTIONS
    assert not without.connections["tls_decrypted"].any()
    assert set(without.issues["code"].astype(str)) == {"tls.no_keys"}
    monkeypatch.setenv("SSLKEYLOGFILE", str(KEYS))
    default = analysis.load(PCAP, port=int(TLS))
    assert_frame_equal(default.exchanges, analysis.load(PCAP, port=int(TLS),
                                                        keylog=[KEYS]).exchanges)
    assert len(default.exchanges) >= 30


def _jsonl_records(capsys, *args):
    assert main(["records", str(PCAP), "--format", "jsonl", *args]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    return Counter(json.dumps({k: r[k] for k in ("direction", "topic", "partition", "offset",
                                                 "key", "value", "headers")}, sort_keys=True)
                   for r in rows), err


def test_records(capsys, monkeypatch):
    plain, _ = _jsonl_records(capsys, "--port", PLAIN)
    tls, err = _jsonl_records(capsys, "--port", TLS, "--keylog", str(KEYS))
    assert tls == plain and sum(plain.values()) >= 24 and "not decrypted" not in err
    none, err = _jsonl_records(capsys, "--port", TLS)
    assert not none
    assert f"{CONNECTIONS} TLS connections not decrypted: pass --keylog FILE" in err
    monkeypatch.setenv("SSLKEYLOGFILE", str(KEYS))
    default, _ = _jsonl_records(capsys, "--port", TLS)
    assert default == plain


def _stats(capsys, *args):
    assert main(["stats", str(PCAP), "--port", TLS, "--format", "json", *args]) == 0
    out, err = capsys.readouterr()
    sections = {s["title"]: s["rows"] for s in json.loads(out)["sections"]}
    overview = {r["what"]: r["value"] for r in sections["Overview"]}
    tls = next(rows for title, rows in sections.items() if title.startswith("TLS connections"))
    return overview, tls, err


def test_stats_counts_tls_connections(capsys):
    overview, tls, err = _stats(capsys, "--keylog", str(KEYS))
    assert overview["TLS connections"] == str(CONNECTIONS)
    assert overview["TLS connections not decrypted"] == "0"
    assert int(overview["exchanges"]) >= 30
    assert [(r["tls_version"], r["tls_cipher"], r["connections"], r["decrypted"],
             r["not_decrypted"]) for r in tls] == \
        [("TLS 1.3", "TLS_AES_128_GCM_SHA256", CONNECTIONS, CONNECTIONS, 0)]
    assert 0 < tls[0]["handshake_ms_p50"] <= tls[0]["handshake_ms_max"] < 1000
    assert "not decrypted" not in err

    overview, tls, err = _stats(capsys)
    assert overview["exchanges"] == "0"
    assert overview["TLS connections not decrypted"] == str(CONNECTIONS)
    assert [(r["connections"], r["decrypted"], r["not_decrypted"]) for r in tls] == \
        [(CONNECTIONS, 0, CONNECTIONS)]
    assert f"{CONNECTIONS} TLS connections not decrypted" in err


def test_report(tmp_path, capsys):
    html = tmp_path / "report.html"
    assert main(["report", str(PCAP), "--port", TLS, "--keylog", str(KEYS),
                 "--html", str(html)]) == 0
    text = html.read_text()
    assert "TLS connections" in text and "TLS_AES_128_GCM_SHA256" in text
    assert "Produce" in text


def test_export(tmp_path, capsys):
    out = tmp_path / "parquet"
    assert main(["export", str(PCAP), "--port", TLS, "--keylog", str(KEYS), "--level", "records",
                 "--out", str(out)]) == 0
    back = analysis.load_parquet(out)
    direct = analysis.load(PCAP, port=int(TLS), records=True, keylog=KEYS)
    for name in TABLES:
        assert_frame_equal(getattr(back, name), getattr(direct, name))
    assert len(back.exchanges) >= 30 and back.connections["tls_decrypted"].all()


@pytest.mark.parametrize("command", ["records", "stats", "report", "export"])
def test_unreadable_keylog_is_a_usage_error(command, tmp_path, capsys):
    extra = {"report": ["--html", str(tmp_path / "r.html")],
             "export": ["--out", str(tmp_path / "out")]}.get(command, [])
    assert main([command, str(PCAP), "--port", TLS, "--keylog", str(tmp_path / "nope.log"),
                 *extra]) == 2
    assert "nope.log" in capsys.readouterr().err
