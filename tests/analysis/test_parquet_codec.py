"""--parquet-codec (analysis.parquet_codec): every Parquet file a command writes is compressed as
asked, snappy unless asked: `records --format parquet` in one process and with workers, `export`
(its tables and the derived ones) and Tables.write_parquet; the files read back the same rows
whatever the codec. The Spark job's files: tests/spark/test_cli.py."""
import json

import pyarrow.parquet as pq
import pytest

import analysis
from analysis import parquet_codec
from dissector.cli import main
from tests.support import CAPTURES

NAME = "codecs"
PORT = str(json.loads((CAPTURES / f"{NAME}.truth.json").read_text())["broker_port"])
CAPTURE = str(CAPTURES / f"{NAME}.pcap")


def codecs(path) -> set:
    """The compression of every column chunk of the Parquet file at `path`."""
    meta = pq.ParquetFile(path).metadata
    return {meta.row_group(g).column(c).compression
            for g in range(meta.num_row_groups) for c in range(meta.num_columns)}


def assert_compressed(paths, codec):
    """Every file of `paths` that holds rows (an empty table's has no column chunk) compressed
    with `codec`."""
    paths = [p for p in paths if pq.ParquetFile(p).metadata.num_rows]
    assert paths
    for path in paths:
        assert codecs(path) == {"UNCOMPRESSED" if codec == "none" else codec.upper()}, path


def codec_args(codec):
    return [] if codec is None else ["--parquet-codec", codec]


@pytest.fixture(scope="module")
def snappy_records(tmp_path_factory):
    """The records table written with snappy, once, to compare the others with."""
    plain = tmp_path_factory.mktemp("snappy") / "plain.parquet"
    assert main(["records", CAPTURE, "--port", PORT, "--format", "parquet", "--out", str(plain),
                 "--parquet-codec", "snappy"]) == 0
    return pq.read_table(plain)


@pytest.mark.parametrize("codec", [None, "zstd", "none"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_records_table(tmp_path, codec, jobs, snappy_records):
    out = tmp_path / "records.parquet"
    assert main(["records", CAPTURE, "--port", PORT, "--format", "parquet", "--out", str(out),
                 "--jobs", jobs] + codec_args(codec)) == 0
    assert_compressed([out], codec or parquet_codec.DEFAULT)
    assert pq.read_table(out).equals(snappy_records)


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_export_and_write_parquet(tmp_path, codec):
    out = tmp_path / "export"
    assert main(["export", CAPTURE, "--port", PORT, "--out", str(out), "--level", "records"]
                + codec_args(codec)) == 0
    codec = codec or parquet_codec.DEFAULT
    written = list(out.glob("*.parquet"))
    assert {p.stem for p in written} >= {"exchanges", "partitions", "records", "issues",
                                         "connections", "deliveries", "clients"}
    assert_compressed(written, codec)
    tables = analysis.load(CAPTURE, int(PORT), records=True)
    assert_compressed(tables.write_parquet(tmp_path / "tables", codec), codec)
    assert repr(analysis.load_parquet(out)) == repr(tables)


def test_an_unknown_codec_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["records", CAPTURE, "--format", "parquet", "--out", "x.parquet",
              "--parquet-codec", "lzo"])
    assert stop.value.code == 2
    assert "--parquet-codec: invalid choice: 'lzo'" in capsys.readouterr().err
