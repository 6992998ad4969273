"""Typed column builders: values go into one Python list per column, then into Arrow arrays.

No row dicts and no temporary files: a row is appended value by value to its column lists, and
`table()` converts each list once with its Arrow type (names in CATEGORICAL are dictionary-encoded,
which pandas shows as categories).
"""
from __future__ import annotations

import pandas as pd
import pyarrow as pa

from .schema import CATEGORICAL, arrow_type


class ColumnBuilder:
    def __init__(self, columns):
        self.columns = tuple(columns)
        self.names = tuple(name for name, _ in self.columns)
        self._lists = [[] for _ in self.columns]
        self._appends = tuple(lst.append for lst in self._lists)

    def __len__(self):
        return len(self._lists[0]) if self._lists else 0

    def append(self, row) -> None:
        """Append one row given as a sequence of values in column order."""
        for add, value in zip(self._appends, row, strict=True):
            add(value)

    def table(self) -> pa.Table:
        arrays = []
        for (name, kind), values in zip(self.columns, self._lists):
            arr = _array(values, arrow_type(kind))
            if name in CATEGORICAL:
                arr = arr.dictionary_encode()
            arrays.append(arr)
        return pa.Table.from_arrays(arrays, names=list(self.names))


def _array(values, typ) -> pa.Array:
    """The column as one Arrow array; a value of the wrong type (from a damaged body) becomes
    null instead of failing the whole table."""
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return pa.array([_scalar(v, typ) for v in values], type=typ)


def _scalar(value, typ):
    try:
        pa.scalar(value, type=typ)
        return value
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow-backed pandas frame (pd.ArrowDtype for every column)."""
    return table.to_pandas(types_mapper=pd.ArrowDtype)
