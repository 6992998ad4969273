"""The Spark pipeline: capture files bigger than one machine -> the analysis tables in Parquet.

`run(inputs, out, master=None, ...)` is `kafka-dissect spark INPUT... --out DIR`; `load_output(out)`
reads what it wrote as analysis.Tables; `summaries` computes the latency and error summaries in
Spark SQL from that Parquet output.
"""
from .job import Result, load_output, run

__all__ = ["Result", "load_output", "run"]
