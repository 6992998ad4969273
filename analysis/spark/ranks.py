"""Global ranks (1, 2, 3... in sort order) over a DataFrame without moving it to one partition.

Sort (range-partitioned), number rows within each partition, then add the sizes of the partitions
before: the same numbers a single machine gives by counting in order. The sorted, numbered rows
are checkpointed so the counts and the numbers come from one evaluation of the sort.
"""
from __future__ import annotations

from pyspark.sql import functions as F

_ROW_BITS = 33   # monotonically_increasing_id() = partition index << 33 | row within partition


def global_rank(df, cols, name: str):
    """The rows of `cols` (unique in `df`) with their 1-based rank in ascending order."""
    spark = df.sparkSession
    s = (df.select(*cols).orderBy(*cols)
         .withColumn("_mid", F.monotonically_increasing_id()).localCheckpoint(eager=True))
    part = F.shiftright(F.col("_mid"), _ROW_BITS)
    counts = sorted((r[0], r[1]) for r in s.groupBy(part.alias("p")).count().collect())
    starts, start = [], 0
    for p, n in counts:
        starts.append((p, start))
        start += n
    if not starts:
        starts.append((0, 0))
    offsets = spark.createDataFrame(starts, "_p long, _start long")
    row = F.col("_mid").bitwiseAND((1 << _ROW_BITS) - 1)
    return (s.join(F.broadcast(offsets), part == F.col("_p"))
            .select(*cols, (F.col("_start") + row + 1).alias(name)))
