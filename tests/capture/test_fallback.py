"""Without the compiled loops (no C compiler where it was installed) the tool picks their Python
twins and reads captures to the same result: the CLI run with the extension modules hidden
writes what the compiled run writes."""
import subprocess
import sys

import pytest

from tests.support import CAPTURES, ROOT, walker_class

# hides the extension modules from the import system, then runs the CLI
HIDE = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name in ("dissector.capture._walk", "dissector.records._check",
                    "dissector.records._headers", "dissector._csvrow", "dissector._framebuf",
                    "dissector.protocol._reader", "dissector.records._columns",
                    "dissector.records._text", "dissector.protocol._reqhead",
                    "dissector._decoding"):
            raise ImportError(name)
sys.meta_path.insert(0, Hide())
from dissector import framebuf, output
from dissector.capture import fast
from dissector.records import record_batch, record_set
assert not fast.COMPILED and record_batch.check_records is record_batch._check_records
assert output.csv_line is output.plain_line and record_set.v2_headers is None
assert record_set.walk_set is record_set.py_walk_set
assert record_set.set_sums is record_set.py_set_sums
from dissector.protocol import headers, readers
assert not framebuf.COMPILED and not readers.COMPILED and not headers.COMPILED
from dissector.records import columns, text
assert columns.append_v2 is columns.py_append_v2 and text.csv_text is text.py_csv_text
assert columns.append_sets is columns.py_append_sets
assert columns.batch_buffers is columns.py_batch_buffers
assert text.batch_texts is text.py_batch_texts
from dissector import decoding
assert not decoding.COMPILED and decoding.BodyDecoder.request is decoding.BodyDecoder.py_request
from dissector.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("level", ["headers", "bodies", "records"])
@pytest.mark.parametrize("capture", ["codecs.mss1448.pcap", "transactions.pcap"])
def test_the_python_loops_read_alike(tmp_path, capture, level):
    walker_class("compiled")   # the comparison needs the compiled run too
    outs = []
    for code in ("from dissector.cli import main; import sys; sys.exit(main(sys.argv[1:]))", HIDE):
        out = tmp_path / f"{len(outs)}.csv"
        subprocess.run([sys.executable, "-c", code, "read", str(CAPTURES / capture), "--level",
                        level, "--format", "csv", "--out", str(out)], check=True, cwd=ROOT)
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert outs[0].count("\n") > 10


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_the_python_records_table_is_written_alike(tmp_path, fmt):
    outs = []
    for code in ("from dissector.cli import main; import sys; sys.exit(main(sys.argv[1:]))", HIDE):
        out = tmp_path / f"{len(outs)}.{fmt}"
        subprocess.run([sys.executable, "-c", code, "records", str(CAPTURES / "codecs.pcap"),
                        "--format", fmt, "--out", str(out)], check=True, cwd=ROOT)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    if fmt == "parquet":
        import pyarrow.parquet as pq
        assert pq.read_metadata(tmp_path / "0.parquet").num_rows > 100
    else:
        assert outs[0].count(b"\n") > 100
