"""How the Parquet files the tool writes are compressed: `--parquet-codec` on records, export and
spark, `codec=` in Python (pyarrow's names). Snappy, the usual default, unless asked: zstd makes
the records table half the size or less for 4-8% more CPU, lz4 (LZ4_RAW, which Spark reads from
3.5 on) 13% less CPU on bulk traffic (benchmarks/README.md, the ninth session). Imports nothing
heavy: the records command's parser uses it."""
from __future__ import annotations

CODECS = ("snappy", "zstd", "lz4", "gzip", "none")
DEFAULT = "snappy"


def add_option(p) -> None:
    """--parquet-codec on an argparse parser."""
    p.add_argument("--parquet-codec", choices=CODECS, default=DEFAULT,
                   help=f"how the Parquet files are compressed (default {DEFAULT}; zstd: half "
                        "the size or less, for a little more CPU)")
