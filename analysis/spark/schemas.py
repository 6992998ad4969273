"""The Spark job's schemas, all derived from the analysis layer's own table builders.

The decode stage hands its tables to the write stage as opaque Arrow IPC blobs (rows of PARTS,
stored as files: BLOBS): Spark only moves their names, so the rows keep the exact Arrow types of
the pandas path (nanosecond UTC timestamps, dictionary-encoded names) and never turn into JVM
rows. Each blob holds one table's
rows for one part (a range of emission packets) with the provisional keys the write stage turns
into global ids. `target_schema()` is the exact Arrow schema the Parquet files get, the one the
pandas path writes.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import pyarrow as pa

from ..load import TABLES, _Collector

__all__ = ["TABLES", "target_schema"]

# Provisional keys of the rows fed by exchanges: the exchange's emission key (global packet
# number that completed it, then its rank among that packet's exchanges) and the row's position
# among its exchange's rows of that table; -1 on rows of no exchange.
EMIT_PACKET = "emit_packet"
EMIT_SEQ = "emit_seq"
EMIT_ROW = "emit_row"
EMIT_KEYS = (EMIT_PACKET, EMIT_SEQ, EMIT_ROW)
# exchanges and partitions: (decode bucket << 32) + the exchange's index in its bucket
LOCAL_EXCHANGE = "local_exchange"

PARTS = pa.schema([
    ("part", pa.int32()),
    ("table", pa.string()),
    ("rows", pa.int64()),
    ("ids", pa.binary()),    # connections: the provisional connection ids (int64s)
    ("data", pa.binary()),   # the rows: an Arrow IPC stream
])
# what a decode task hands to Spark: PARTS with the file the data was stored in (write.spill)
BLOBS = pa.schema([field for field in PARTS if field.name != "data"] + [("path", pa.string())])


@functools.cache
def _empty_tables() -> dict:
    col = _Collector(records=True)
    col.finish(SimpleNamespace(issues=(), connections=()), "")
    return col.arrow()


def target_schema(name: str) -> pa.Schema:
    """The Arrow schema of table `name` as the pandas path (analysis.load) builds and writes it:
    taken from its own column builders."""
    return _empty_tables()[name].schema
