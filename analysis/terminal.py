"""DataFrames as rich tables for the terminal."""
from __future__ import annotations

import math

import pandas as pd
from rich.table import Table


def fmt(value) -> str:
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.3f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%H:%M:%S.%f")[:-3]
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def rich_table(title: str, df: pd.DataFrame) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for col in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[col].dtype)
        table.add_column(str(col), justify="right" if numeric else "left")
    for row in df.itertuples(index=False):
        table.add_row(*(fmt(v) for v in row))
    return table
