"""`kafka-dissect spark`: writes the tables, reports damaged files with exit status 2, and refuses
bad input in one line."""
from __future__ import annotations

import pyarrow.parquet as pq

from analysis import load
from analysis.spark import load_output
from dissector.cli import main
from tests.analysis.test_parquet_codec import assert_compressed
from tests.support import require_module, require_path, require_tool

from .compare import assert_tables_equal
from .inputs import CAPTURES
from .rotate import rotate


def test_spark_command(tmp_path, capsys):
    require_module("pyspark")
    require_tool("java")
    require_path(CAPTURES / "kafka_python.pcap")
    files = rotate(CAPTURES / "kafka_python.pcap", tmp_path / "in", 3)
    (tmp_path / "in" / "junk.pcap").write_bytes(b"junk")
    out = tmp_path / "out"
    status = main(["spark", str(tmp_path / "in" / "*.pcap"), "--out", str(out), "--master",
                   "local[2]", "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.sql.shuffle.partitions=4", "--parquet-codec", "zstd"])
    err = capsys.readouterr().err
    assert status == 2   # junk.pcap is not a capture
    assert f"kafka-dissect: error: {tmp_path / 'in' / 'junk.pcap'}: not a pcap" in err
    assert "4 files:" in err
    for table in ("exchanges", "partitions", "records", "issues", "connections"):
        assert list((out / f"{table}.parquet").glob("part-*.parquet"))
    assert_compressed(out.glob("*.parquet/part-*.parquet"), "zstd")
    assert {p.parent.stem for p in out.glob("*.parquet/part-*.parquet")} >= {"deliveries",
                                                                            "clients"}
    written = pq.read_table(out / "exchanges.parquet")
    assert written.num_rows > 10
    assert str(written.schema.field("request_ts").type) == "timestamp[ns, tz=UTC]"
    assert_tables_equal(load(files + [tmp_path / "in" / "junk.pcap"]), load_output(out))


def test_refusals_are_one_line(tmp_path, capsys):
    status = main(["spark", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert err == [f"kafka-dissect: error: {tmp_path / 'missing'}: no such file or directory"]
    status = main(["spark", str(tmp_path), "--out", str(tmp_path / "out"), "--conf", "novalue"])
    assert status == 2
    assert capsys.readouterr().err.strip() == \
        "kafka-dissect: error: --conf takes KEY=VALUE, not 'novalue'"


def test_nothing_on_the_port_names_the_servers(spark, tmp_path, capsys):
    """A TLS capture of brokers on 9093 and 19092 read on the default port: the command names
    them, as the single-process commands do (tests/cli/test_capture_survey.py)."""
    from tests.support import CAPTURES as SHIPPED
    status = main(["spark", str(SHIPPED / "tls" / "kafka_tls.pcap"), "--out",
                   str(tmp_path / "out"), "--master", "local[2]"])
    err = capsys.readouterr().err
    assert status == 0 and "0 exchanges" in err
    assert "no TCP on port 9092; TCP servers in the capture: 9093 (7 connections), 19092" in err
