"""A Parquet file written row group by row group in a thread of its own.

pyarrow encodes and compresses a row group without the GIL, so while the thread writes one the
caller makes the next (decodes records, gathers a parallel run's columns) on another core:
`records --format parquet --jobs 1` of the bulk 400 MB benchmark capture took 1.8-2.2 s of wall
time instead of 3.0-3.4 s, for 0-7% more CPU. At most AHEAD batches wait for the thread, so
memory stays bounded by them, and the file is byte for byte what writing in the caller's thread
makes (the same batches, in the same order, to one writer).
"""
from __future__ import annotations

import threading
from queue import SimpleQueue

import pyarrow as pa

from .parquet_codec import DEFAULT as DEFAULT_CODEC

AHEAD = 2   # batches handed over and not yet written, at most


class ParquetSink:
    """Writes each batch it is given as one row group of a Parquet file, compressed with
    `codec` (analysis.parquet_codec). A batch must not change once given. An error writing
    (a full disk) is raised by the next call, close() included. The thread starts at the first
    batch, so a sink made before dissector.parallel forks its workers is not forked mid-write."""

    def __init__(self, path, schema: pa.Schema, codec=DEFAULT_CODEC):
        self._path, self._schema, self._codec = path, schema, codec
        self._thread = None
        self._open()

    def _open(self):
        import pyarrow.parquet as pq
        self._writer = pq.ParquetWriter(self._path, self._schema, compression=self._codec)
        self.rows = 0
        self._failed = False   # the file is written no further
        self._error = None     # what failed, until raised

    def __call__(self, batch: pa.RecordBatch) -> None:
        self._raise()
        if self._thread is None:
            self._queue, self._room = SimpleQueue(), threading.Semaphore(AHEAD)
            self._thread = threading.Thread(target=self._write, name="parquet-sink", daemon=True)
            self._thread.start()
        self._room.acquire()
        self._queue.put(batch)
        self.rows += batch.num_rows

    def _write(self):
        """The thread: every batch handed over, until None; after an error the rest are taken
        and dropped, so that the caller never waits for room."""
        pool = pa.default_memory_pool()
        while (batch := self._queue.get()) is not None:
            if not self._failed:
                try:
                    self._writer.write_batch(batch)
                except BaseException as exc:   # raised in the caller (_raise)
                    self._error, self._failed = exc, True
            batch = None
            # the encoder's memory is in this thread's own heap of the pool (mimalloc): kept,
            # it was 15-40 MB more at the peak of export on a 60 MB capture
            pool.release_unused()
            self._room.release()

    def _drain(self) -> None:
        """Wait for every batch handed over to be written."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def reset(self) -> None:
        """Start the file again, empty."""
        self.close()
        self._open()

    def close(self, failing=False) -> None:
        """Write what was handed over and close the file; `failing`: the caller is raising
        already, so an error writing is not raised over it."""
        try:
            self._drain()
        finally:
            self._writer.close()
        if not failing:
            self._raise()

    def __enter__(self):
        return self

    def __exit__(self, kind, *_) -> None:
        self.close(failing=kind is not None)
