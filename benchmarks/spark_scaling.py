"""Spark scaling: the single-process CLI, Spark local[1] and Spark local[2] on one multi-file corpus.

    python benchmarks/spark_scaling.py [--size-mb 2048] [--file-mb 128] [--keep]
    python benchmarks/spark_scaling.py --small          # a few MB: proves it works (CI)

A corpus kept with --keep is reused by the next run with the same --size-mb and --file-mb.

The corpus is built from the project's real captures (captures/*.pcap with the broker on 9092):
their connections are replicated, each replica with its own client address (so its own 5-tuples)
and its own time, replicas running in overlapping groups so many connections are in flight at
once; every packet is re-segmented to a 1448-byte MSS on Ethernet (captures/resegment.py), and the
packets are written to rotated files of --file-mb each, as `tcpdump -C` leaves them. It goes under
benchmarks/corpus/spark/ (git-ignored) and is deleted afterwards unless --keep.

Then, each as its own process on the same files, alternating for --repeat rounds:
    single    kafka-dissect export FILES... --out DIR      (bodies decoded, the analysis tables)
    local[1]  analysis.spark.run(CORPUS, DIR, "local[1]")  (what `kafka-dissect spark` runs)
    local[2]  analysis.spark.run(CORPUS, DIR, "local[2]")
and prints median wall time, MB/s, speed-up over the single process and CPU seconds side by side
(Spark's times include starting the JVM; its CPU is the JVM's, its Python workers' and the
driver's, per stage from Result.stages), checks that every run wrote the same number of rows per
table, and says whether local[2] reaches the target of 1.5x the single process.
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
    """Write rotated files of replicated connections until `size` bytes; their paths in order.
    A corpus kept (--keep) with the same sizes is reused as it is."""
    made = folder / ".built"   # hidden: the Spark job skips it
    settings = f"{size} {file_size}"
    if made.exists() and made.read_text() == settings:
        return sorted(folder.glob("kafka-*.pcap"))
    shutil.rmtree(folder, ignore_errors=True)
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
    made.write_text(settings)
    return out.paths


def _rows(out: Path) -> dict:
    import pyarrow.parquet as pq
    rows = {}
    for name in TABLES:
        path = out / f"{name}.parquet"
        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        rows[name] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return rows


def _job(master, out, corpus) -> int:
    """One Spark run in this process (the --job mode): its stages as JSON on stdout."""
    import json

    from analysis.spark import run
    result = run([corpus], out, master,
                 conf={"spark.ui.enabled": "false", "spark.driver.memory": "3g"})
    print(json.dumps({"stages": result.stages, "errors": result.errors}))
    return 0


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=2048, help="corpus size (default 2048)")
    ap.add_argument("--file-mb", type=float, default=128, help="size of each rotated file")
    ap.add_argument("--small", action="store_true", help="a 6 MB corpus: proves it works")
    ap.add_argument("--keep", action="store_true", help="keep the corpus afterwards")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="where to build it")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the three runs, alternating (medians are printed)")
    ap.add_argument("--job", nargs=3, metavar=("MASTER", "OUT", "CORPUS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.job:
        return _job(*args.job)
    if args.small:
        args.size_mb, args.file_mb = 6, 1.5
    import json
    cli = [sys.executable, "-m", "dissector"]
    work = Path(tempfile.mkdtemp(prefix="spark-scaling-"))
    try:
        files = build(args.corpus, int(args.size_mb * 1e6), int(args.file_mb * 1e6))
        size = sum(p.stat().st_size for p in files)
        print(f"corpus: {len(files)} files, {size / 1e6:.1f} MB in {args.corpus}")
        print(f"machine: {machine()}")
        runs = [
            ("single", cli + ["export", *map(str, files), "--out", str(work / "single")]),
            ("local[1]", [sys.executable, __file__, "--job", "local[1]", str(work / "local1"),
                          str(args.corpus)]),
            ("local[2]", [sys.executable, __file__, "--job", "local[2]", str(work / "local2"),
                          str(args.corpus)]),
        ]
        walls, cpus, stages, rows, failed = {}, {}, {}, {}, False
        for _ in range(args.repeat):
            for name, cmd in runs:
                out = Path(cmd[cmd.index("--out") + 1] if "--out" in cmd else cmd[-2])
                shutil.rmtree(out, ignore_errors=True)
                r = run(cmd, stdout=str(work / f"{name}.out"),
                        stderr_path=str(work / f"{name}.err"), timeout=7200)
                if r.status != 0 or not out.exists():
                    print(f"{name}: exit status {r.status}\n{r.stderr[-2000:]}")
                    failed = True
                    continue
                walls.setdefault(name, []).append(r.wall)
                if name == "single":
                    cpus.setdefault(name, []).append(r.cpu)
                else:   # the JVM is not the child's waited child: the job's own accounting
                    job = json.loads((work / f"{name}.out").read_text().strip().splitlines()[-1])
                    cpus.setdefault(name, []).append(sum(c or 0 for _, _, c in job["stages"]))
                    stages.setdefault(name, []).append(job["stages"])
                rows[name] = _rows(out)
        single = _median(walls["single"]) if "single" in walls else None
        print(f"\n{'run':<10}{'wall s':>9}{'MB/s':>9}{'x single':>10}{'CPU s':>9}"
              f"   (medians of {args.repeat})")
        for name in walls:
            wall = _median(walls[name])
            ratio = single / wall if single else float("nan")
            print(f"{name:<10}{wall:>9.1f}{size / 1e6 / wall:>9.1f}{ratio:>10.2f}"
                  f"{_median(cpus[name]):>9.1f}")
        for name, runs_stages in stages.items():   # the last round's stages
            print(f"{name} stages: " + ", ".join(
                f"{stage} {wall:.1f} s wall / {'?' if cpu is None else f'{cpu:.1f}'} s CPU"
                for stage, wall, cpu in runs_stages[-1]))
        if len({tuple(sorted(v.items())) for v in rows.values()}) > 1:
            print(f"MISMATCH: rows per table differ: {rows}")
            failed = True
        elif rows:
            print(f"rows per table (all runs): {next(iter(rows.values()))}")
        if single and "local[2]" in walls:
            ratio = single / _median(walls["local[2]"])
            print(f"target local[2] >= {TARGET}x single: {'PASS' if ratio >= TARGET else 'FAIL'} "
                  f"({ratio:.2f}x)")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(args.corpus, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
