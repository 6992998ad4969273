"""`kafka-dissect records` against what the clients recorded producing (captures/*.truth.json)."""
import json

import pyarrow.parquet as pq
import pytest

from dissector.cli import main
from tests.support import CAPTURES


def produced(name):
    truth = json.loads((CAPTURES / f"{name}.truth.json").read_text())
    # offsets are left out: a Produce request carries batch-relative ones, the broker assigns
    return truth, sorted(((r["topic"], r["partition"], r["key"], r["value"],
                           [list(h) for h in r["headers"]])
                          for c in truth["clients"] for r in c["produced"]), key=repr)


@pytest.mark.parametrize("name", ["codecs", "librdkafka_produce_consume"])
def test_jsonl_produce_rows_are_what_the_clients_sent(capsys, name):
    truth, want = produced(name)
    code = main(["records", str(CAPTURES / f"{name}.pcap"), "--port", str(truth["broker_port"]),
                 "--format", "jsonl"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    got = sorted(((r["topic"], r["partition"], r["key"], r["value"],
                   [[h["key"], h["value"]] for h in r["headers"]])
                  for r in rows if r["direction"] == 0), key=repr)
    assert got == want
    assert {r["compression"] for r in rows} >= ({"gzip", "snappy", "lz4", "zstd", "none"}
                                                if name == "codecs" else {"gzip", "lz4"})


def test_parquet_keeps_bytes(tmp_path, capsys):
    truth, want = produced("codecs")
    out = tmp_path / "records.parquet"
    assert main(["records", str(CAPTURES / "codecs.pcap"), "--format", "parquet",
                 "--out", str(out)]) == 0
    t = pq.read_table(out).to_pylist()
    keys = sorted(r["key"] for r in t if r["direction"] == 0 and r["key"] is not None)
    import base64
    assert keys == sorted(base64.b64decode(w[2]) for w in want if w[2] is not None)


def test_text_shows_printable_values(capsys):
    assert main(["records", str(CAPTURES / "codecs.pcap")]) == 0
    out = capsys.readouterr().out
    assert "codec-zstd[" in out and "key='key-" in out and "value=" in out


def _loaded(tmp_path, fmt, package):
    """The modules of `package` loaded by `records --format fmt` (in a fresh interpreter)."""
    import subprocess
    import sys
    code = ("import sys; from dissector.cli import main; "
            f"main(['records', {str(CAPTURES / 'codecs.pcap')!r}, '--format', {fmt!r}, "
            f"'--out', {str(tmp_path / 'out')!r}]); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] == {package!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (tmp_path / "out").stat().st_size > 1000
    return out.stdout.strip()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_no_pandas_on_the_streaming_paths(tmp_path, fmt):
    assert _loaded(tmp_path, fmt, "pandas") == "[]"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "text"])
def test_no_pyarrow_on_the_text_paths(tmp_path, fmt):
    """Records as text need no tables: the command starts without pyarrow (0.2 s of a run)."""
    assert _loaded(tmp_path, fmt, "pyarrow") == "[]"


def test_the_analysis_entry_points_load_on_first_use():
    """`analysis.load` is the function however the package was first imported (its submodule
    of the same name imported first included)."""
    import subprocess
    import sys
    for first in ("import analysis.load", "from analysis.load import collect", "import analysis",
                  "from analysis import Tables"):
        code = (f"{first}; import analysis; from analysis import load, load_parquet, TABLES; "
                "print(callable(load), callable(analysis.load), analysis.load is load, "
                "load.__module__, TABLES[0], callable(load_parquet))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
        assert out.stdout.split() == ["True", "True", "True", "analysis.load", "exchanges",
                                      "True"], first
