"""analysis.parquet_sink: row groups written in a thread of their own must make the file the
caller's thread makes, raise what failed, and hold at most AHEAD batches."""
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.parquet_sink import AHEAD, ParquetSink

SCHEMA = pa.schema([("n", pa.int64()), ("s", pa.string())])


def _batches(count=7):
    return [pa.record_batch([pa.array(range(i * 100, i * 100 + 50 + i)),
                             pa.array([f"v{i}-{j}" for j in range(50 + i)])], schema=SCHEMA)
            for i in range(count)]


@pytest.mark.parametrize("codec", ["snappy", "zstd", "none"])
def test_the_file_is_byte_for_byte_what_pyarrow_writes_in_the_callers_thread(tmp_path, codec):
    with pq.ParquetWriter(tmp_path / "direct.parquet", SCHEMA, compression=codec) as writer:
        for batch in _batches():
            writer.write_batch(batch)
    with ParquetSink(tmp_path / "sink.parquet", SCHEMA, codec) as sink:
        for batch in _batches():
            sink(batch)
    assert sink.rows == sum(b.num_rows for b in _batches())
    assert (tmp_path / "sink.parquet").read_bytes() == (tmp_path / "direct.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "sink.parquet").metadata.num_row_groups == 7


def test_no_thread_until_the_first_batch(tmp_path):
    """dissector.parallel forks its workers after the sinks are made: no thread to fork then."""
    sink = ParquetSink(tmp_path / "t.parquet", SCHEMA)
    assert sink._thread is None
    sink.close()
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 0


def test_an_error_writing_is_raised_by_the_next_call_and_the_rest_is_dropped(tmp_path):
    other = pa.record_batch([pa.array([1])], names=["x"])   # not the file's schema
    sink = ParquetSink(tmp_path / "e.parquet", SCHEMA)
    sink(_batches(1)[0])
    sink(other)
    with pytest.raises(ValueError, match="schema"):
        for batch in _batches(50):   # fails at the latest once the thread reached `other`
            sink(batch)
        sink.close()
    sink.close()   # closing again after the error: nothing more to raise
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 50


def test_close_while_failing_does_not_raise_over_the_callers_error(tmp_path):
    other = pa.record_batch([pa.array([1])], names=["x"])
    with pytest.raises(KeyError):
        with ParquetSink(tmp_path / "f.parquet", SCHEMA) as sink:
            sink(other)
            raise KeyError("the caller's")


def test_at_most_ahead_batches_wait_for_the_thread(tmp_path, monkeypatch):
    written, go = [], threading.Event()
    sink = ParquetSink(tmp_path / "w.parquet", SCHEMA)

    def slow(batch):
        go.wait()
        written.append(batch.num_rows)
    monkeypatch.setattr(sink._writer, "write_batch", slow)
    handed = []

    def caller():
        for batch in _batches(AHEAD + 3):
            sink(batch)
            handed.append(batch)
    t = threading.Thread(target=caller, daemon=True)
    t.start()
    t.join(0.5)
    # one batch in the thread's hands, AHEAD - 1 queued behind it: the caller waits for room
    assert t.is_alive() and len(handed) == AHEAD
    go.set()
    t.join(10)
    sink.close()
    assert written == [b.num_rows for b in _batches(AHEAD + 3)]


def test_reset_starts_the_file_again(tmp_path):
    path = tmp_path / "r.parquet"
    sink = ParquetSink(path, SCHEMA)
    for batch in _batches(3):
        sink(batch)
    sink.reset()
    assert sink.rows == 0
    sink(_batches(1)[0])
    sink.close()
    assert pq.read_table(path).to_pylist() == _batches(1)[0].to_pylist()

