"""The partitions table built in columns against the row-by-row path it replaced, side by side.

    python benchmarks/partitions_table.py [--corpus FILE --port N | --size-mb 60 [--mix bulk|dense]]
                                          [--rounds 5]

The capture is dissected once at the bodies level (as `analysis.load` and `export` do) and its
exchanges kept; each round then builds the partitions table from them three ways, one after the
other (after one uncounted build: the imports), CPU time of this process each:

- "rows": analysis.partitions.partition_rows (the specification: a list and a tuple per row)
  appended to analysis.columns.ColumnBuilder (a Python append per value), as before;
- "columns": analysis.partition_columns.PartitionTable with the compiled walk
  (dissector/_partition_walk.c) as analysis.load, export, Spark and --jobs use it;
- "columns (Python walk)": the same with its pure-Python twin (where the extension is not built).

Every round's tables must be equal (Arrow's equals). Printed: medians, the ratio to "rows", and
for context the whole `analysis.load(level="bodies")` of the capture (CPU, one run after the
rounds): the share of it the table takes. Without --corpus a corpus of --size-mb is built by
benchmarks/corpus.py from the --mix source and deleted afterwards.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus as C  # noqa: E402


def _columns(walk):
    def build(exs):
        from analysis import partition_columns as PC
        PC.walk_exchange = walk
        table = PC.PartitionTable()
        for ex in exs:
            table.add_exchange(ex)
        return table.table()
    return build


def measure(path, port, rounds, log=print):
    """{way: [CPU seconds]} of `rounds` alternating rounds, and the rows."""
    from dissector import partition_walk
    from dissector.pipeline import dissect
    exs = list(dissect([str(path)], (port,), level="bodies"))
    from analysis.partitions import row_by_row_table
    ways = {"rows": row_by_row_table, "columns": _columns(partition_walk.walk_exchange),
            "columns (Python walk)": _columns(partition_walk.py_walk_exchange)}
    times = {name: [] for name in ways}
    expected = ways["rows"](exs)   # a first round, not counted: imports (pa.array: pandas)
    for i in range(rounds):
        for name, build in ways.items():
            start = time.process_time()
            table = build(exs)
            times[name].append(time.process_time() - start)
            if not table.equals(expected):
                raise SystemExit(f"{name}: a different table")
        log(f"round {i + 1}/{rounds}: " + ", ".join(f"{n} {t[-1]:.3f} s" for n, t in
                                                      times.items()))
    return times, len(exs), expected.num_rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument("--size-mb", type=float, default=60)
    ap.add_argument("--mix", choices=sorted(C.MIXES), default="dense")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.corpus
        if path is None:
            path = Path(tmp) / "corpus.pcap"
            C.main(["--size-mb", str(args.size_mb), "--mix", args.mix, "--out", str(path)])
        times, exchanges, rows = measure(path, args.port, args.rounds)
        import analysis
        from analysis import partition_columns as PC
        from dissector import partition_walk
        PC.walk_exchange = partition_walk.walk_exchange
        start = time.process_time()
        analysis.load(str(path), args.port, level="bodies", jobs=1)
        load = time.process_time() - start
        size = path.stat().st_size / 1e6
    base = statistics.median(times["rows"])
    print(f"partitions table: {path.name} {size:.1f} MB, {exchanges} exchanges, {rows} rows; "
          f"{args.rounds} rounds, CPU medians")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:24} {med:7.3f} s {rows / med:11,.0f} rows/s {base / med:6.2f}x")
    cols = statistics.median(times["columns"])
    print(f"analysis.load(level='bodies'): {load:.2f} s of CPU; the table's share: rows "
          f"{base / (load - cols + base):.0%} before, columns {cols / load:.0%} now")

if __name__ == "__main__":
    main()
