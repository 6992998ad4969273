"""Table comparison for the Spark tests: the pandas path's tables against the Spark job's.

Rows are compared in a stable order: exchanges, partitions and records in the order both paths
write them (the order exchanges complete in, which is what the `exchange` number counts);
issues and connections sorted by their own keys (the job writes them grouped by bucket).
Types, connection ids, exchange numbers and packet numbers must all be equal.
"""
from __future__ import annotations

import pandas as pd

SORT = {
    "issues": ["connection_id", "frame", "stream_offset", "code", "detail"],
    "connections": ["connection_id"],
}


def assert_tables_equal(expected, actual):
    for name in ("exchanges", "partitions", "records", "issues", "connections"):
        a = getattr(expected, name)
        b = getattr(actual, name)
        assert list(a.columns) == list(b.columns), name
        assert a.dtypes.to_dict() == b.dtypes.to_dict(), name
        if name in SORT:
            a = a.sort_values(SORT[name], key=_lexical, na_position="first")
            b = b.sort_values(SORT[name], key=_lexical, na_position="first")
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                      obj=name)


def _lexical(column):
    """Dictionary-encoded columns sort by their dictionary's order, which differs between two
    tables holding the same values: sort those by their strings."""
    return column.astype("string") if isinstance(column.dtype, pd.ArrowDtype) and \
        str(column.dtype).startswith("dictionary") else column
