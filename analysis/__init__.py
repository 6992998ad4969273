"""Kafka traffic analysis in pandas: tables from captures, latency, errors, consumers, producers,
terminal and HTML reports. `load()` and `load_parquet()` are the entry points."""
from .load import TABLES, Tables, load, load_parquet

__all__ = ["TABLES", "Tables", "load", "load_parquet"]
