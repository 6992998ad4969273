"""The Spark job with TLS key material: on the shipped TLS capture (captures/tls/, its TLS leg
on 9093 and its plaintext leg on 19092) split into rotated files, the job given the key log
writes the single-machine tables row for row (the key log is read on the driver and shipped to
the decode tasks), and from a pcapng file's Decryption Secrets Blocks. $SSLKEYLOGFILE as the
default is analysis.load's (tests/analysis)."""
from __future__ import annotations

import subprocess

from analysis import load
from analysis.spark import load_output, run
from dissector.cli import main
from tests.support import CAPTURES, require_path, require_tool

from .compare import assert_tables_equal
from .rotate import rotate

PCAP = CAPTURES / "tls" / "kafka_tls.pcap"
KEYS = CAPTURES / "tls" / "kafka_tls.keys.log"


def test_keylog_gives_the_single_machine_tables(spark, tmp_path, monkeypatch):
    """...with two malformed lines in the key log: one issue, as the single process has."""
    require_path(PCAP)
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    files = rotate(PCAP, tmp_path / "in", 2)
    keys = tmp_path / "keys.log"
    keys.write_bytes(b"CLIENT_RANDOM nothex\n" + KEYS.read_bytes() + b"GARBAGE\n")
    run(files, tmp_path / "out", ports=(9093, 19092), records=True, keylog=keys, spark=spark)
    expected = load(files, port=[9093, 19092], records=True, keylog=keys)
    actual = load_output(tmp_path / "out")
    assert_tables_equal(expected, actual)
    assert list(actual.issues["code"].astype(str)) == ["tls.keylog_malformed"]
    # both legs there, the TLS one decrypted: every exchange twice (but a response the broker
    # sent after its client closed, which the terminator no longer relayed)
    tls = actual.exchanges["tls_version"].notna()
    assert tls.sum() >= 30 and abs(tls.sum() - (~tls).sum()) <= 2
    assert actual.connections["tls_decrypted"].fillna(True).all()


def test_unreadable_keylog_is_refused_before_spark_starts(tmp_path, capsys):
    assert main(["spark", str(PCAP), "--out", str(tmp_path / "out"), "--keylog",
                 str(tmp_path / "nope.log")]) == 2
    assert "nope.log" in capsys.readouterr().err


def test_decryption_secrets_blocks_reach_the_decode_tasks(spark, tmp_path, monkeypatch):
    """A pcapng with the key log inside (editcap --inject-secrets): the extract tasks collect
    its Decryption Secrets Blocks, the decode tasks get them, as the single process reads them."""
    require_path(PCAP)
    editcap = require_tool("editcap")
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    inside = tmp_path / "in" / "kafka_tls.pcapng"
    inside.parent.mkdir()
    subprocess.run([editcap, "-F", "pcapng", "--inject-secrets", f"tls,{KEYS}", str(PCAP),
                    str(inside)], check=True, capture_output=True, timeout=60)
    run([inside], tmp_path / "out", ports=(9093,), spark=spark)
    expected = load(inside, port=9093)
    actual = load_output(tmp_path / "out")
    assert_tables_equal(expected, actual)
    assert len(actual.exchanges) >= 30 and actual.connections["tls_decrypted"].all()
