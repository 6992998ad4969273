"""Spark scaling: the single-process CLI, Spark local[1] and Spark local[2] on one multi-file corpus.

    python benchmarks/spark_scaling.py [--size-mb 2048] [--file-mb 128] [--keep]
    python benchmarks/spark_scaling.py --small          # a few MB: proves it works (CI)

The corpus is built from the project's real captures (captures/*.pcap with the broker on 9092):
their connections are replicated, each replica with its own client address (so its own 5-tuples)
and its own time, replicas running in overlapping groups so many connections are in flight at
once; every packet is re-segmented to a 1448-byte MSS on Ethernet (captures/resegment.py), and the
packets are written to rotated files of --file-mb each, as `tcpdump -C` leaves them. It goes under
benchmarks/corpus/spark/ (git-ignored) and is deleted afterwards unless --keep.

Then, each as its own process on the same files:
    single    kafka-dissect export FILES... --out DIR      (bodies decoded, the analysis tables)
    local[1]  kafka-dissect spark CORPUS --out DIR --master local[1]
    local[2]  kafka-dissect spark CORPUS --out DIR --master local[2]
and prints wall time, MB/s and speed-up over the single process side by side (Spark's times
include starting the JVM), checks that every run wrote the same number of rows per table, and
says whether local[2] reaches the target of 1.5x the single process.
"""
from __future__ import annotations

import argparse
import heapq
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import machine, run  # noqa: E402
from captures.resegment import MSS, read_pcap, resegment  # noqa: E402
from dissector.capture.writer import PcapWriter  # noqa: E402

CORPUS = ROOT / "benchmarks" / "corpus" / "spark"
SOURCES = ["librdkafka_produce_consume.pcap", "codecs.pcap", "transactions.pcap",
           "kafka_python.pcap"]
PORT = 9092
PARALLEL = 16                  # replicas in flight at once
BASE_TS = 1_750_000_000 * 10**9
TABLES = ("exchanges", "partitions", "records", "issues", "connections")
TARGET = 1.5
LINKTYPE_ETHERNET = 1


def _sources():
    """Each source capture's packets with times starting at 0, and its span in ns."""
    out = []
    for name in SOURCES:
        packets = list(read_pcap(ROOT / "captures" / name))
        t0 = packets[0][0]
        out.append(([(ts - t0, lt, data) for ts, lt, data in packets],
                    packets[-1][0] - t0 + 1))
    return out


def _client_remap(replica):
    """Give replica r's client its own address 10.a.b.c; the broker stays where it is."""
    n = replica + 1
    client = bytes((10, 1 + (n >> 16) % 254, (n >> 8) & 0xFF, n & 0xFF))

    def remap(src, dst, sport, dport):
        if dport == PORT:
            return client, dst, sport, dport
        return src, client, sport, dport
    return remap


class _Rotating:
    """A pcap writer that starts a new file past `limit` bytes, like tcpdump -C."""

    def __init__(self, folder: Path, limit: int):
        self.folder, self.limit = folder, limit
        self.paths, self.bytes, self.total, self._f, self._w = [], 0, 0, None, None

    def write(self, ts, frame):
        if self._w is None or self.bytes >= self.limit:
            self.close()
            path = self.folder / f"kafka-{len(self.paths):04d}.pcap"
            self.paths.append(path)
            self._f = open(path, "wb", buffering=1 << 20)
            self._w = PcapWriter(self._f, LINKTYPE_ETHERNET)
            self.bytes = 24
        self._w.write(ts, frame)
        self.bytes += 16 + len(frame)
        self.total += 16 + len(frame)

    def close(self):
        if self._w is not None:
            self._w.close()
            self._f.close()
            self.total += 24
            self._w = None


def build(folder: Path, size: int, file_size: int) -> list[Path]:
    """Write rotated files of replicated connections until `size` bytes; their paths in order."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = _sources()
    out = _Rotating(folder, file_size)
    replica = 0
    start = BASE_TS
    while out.total < size:
        streams, span = [], 0
        for k in range(PARALLEL):
            packets, length = sources[(replica + k) % len(sources)]
            shift = start + k * 7_919_000          # replicas of a group overlap in time
            streams.append(resegment(((ts + shift, lt, d) for ts, lt, d in packets), MSS,
                                     remap=_client_remap(replica + k)))
            span = max(span, length + k * 7_919_000)
        for ts, frame in heapq.merge(*streams, key=lambda p: p[0]):
            out.write(ts, frame)
        replica += PARALLEL
        start += span + 10**9
    out.close()
    return out.paths


def _rows(out: Path) -> dict:
    import pyarrow.parquet as pq
    rows = {}
    for name in TABLES:
        path = out / f"{name}.parquet"
        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        rows[name] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=2048, help="corpus size (default 2048)")
    ap.add_argument("--file-mb", type=float, default=128, help="size of each rotated file")
    ap.add_argument("--small", action="store_true", help="a 6 MB corpus: proves it works")
    ap.add_argument("--keep", action="store_true", help="keep the corpus afterwards")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="where to build it")
    args = ap.parse_args(argv)
    if args.small:
        args.size_mb, args.file_mb = 6, 1.5
    cli = [sys.executable, "-m", "dissector"]
    spark_conf = ["--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=3g"]
    work = Path(tempfile.mkdtemp(prefix="spark-scaling-"))
    try:
        files = build(args.corpus, int(args.size_mb * 1e6), int(args.file_mb * 1e6))
        size = sum(p.stat().st_size for p in files)
        print(f"corpus: {len(files)} files, {size / 1e6:.1f} MB in {args.corpus}")
        print(f"machine: {machine()}")
        runs = [
            ("single", cli + ["export", *map(str, files), "--out", str(work / "single")]),
            ("local[1]", cli + ["spark", str(args.corpus), "--out", str(work / "local1"),
                                "--master", "local[1]"] + spark_conf),
            ("local[2]", cli + ["spark", str(args.corpus), "--out", str(work / "local2"),
                                "--master", "local[2]"] + spark_conf),
        ]
        results, rows, failed = {}, {}, False
        for name, cmd in runs:
            r = run(cmd, stderr_path=str(work / f"{name}.err"), timeout=7200)
            out = Path(cmd[cmd.index("--out") + 1])
            if r.status not in (0,) or not out.exists():
                print(f"{name}: exit status {r.status}\n{r.stderr[-2000:]}")
                failed = True
                continue
            results[name] = r
            rows[name] = _rows(out)
        single = results.get("single")
        print(f"\n{'run':<10}{'wall s':>9}{'MB/s':>9}{'x single':>10}")
        for name, r in results.items():
            ratio = single.wall / r.wall if single else float("nan")
            print(f"{name:<10}{r.wall:>9.1f}{size / 1e6 / r.wall:>9.1f}{ratio:>10.2f}")
        if len({tuple(sorted(v.items())) for v in rows.values()}) > 1:
            print(f"MISMATCH: rows per table differ: {rows}")
            failed = True
        elif rows:
            print(f"rows per table (all runs): {next(iter(rows.values()))}")
        if single and "local[2]" in results:
            ratio = single.wall / results["local[2]"].wall
            print(f"target local[2] >= {TARGET}x single: {'PASS' if ratio >= TARGET else 'FAIL'} "
                  f"({ratio:.2f}x)")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(args.corpus, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
