"""The records table side by side with tshark's record extraction (vs_tshark.py --records).

tshark prints every record's correlation id, offset, key and value
(`-T fields -E occurrence=a -e kafka.correlation_id -e kafka.offset -e kafka.message_key
-e kafka.message_value`, Kafka decoded on the corpus's broker port); ours writes the records
table as users get it: `kafka-dissect records --format parquet|csv|jsonl --out FILE`, and
`analysis.load(..., records=True)` into pandas (benchmarks/load_records.py). Each round runs
them one after the other; ratios are tshark's median CPU time over ours. The record counts must
agree: tshark's values (one per record: the corpus has no null values) against our rows. The
load's peak RSS is reported against the bytes of the resulting DataFrame's own buffers. The load
with the workers it takes by default (--jobs's default: every core for a capture over 64 MiB) is
run too and reported apart, in wall time against tshark's: what a user's script waits for, not
the target's measure (one process's CPU time).
"""
from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import vs_tshark as V
from benchmarks.measure import medians, run

HERE = Path(__file__).resolve().parent
TARGETS = {"parquet": 5.0, "csv": 2.0, "jsonl": 2.0, "load": 3.0}   # ratio to tshark (issue 20)
DEFAULT_JOBS = "load jobs"   # analysis.load with its default workers: wall time, no target
RSS_TARGET = 2.0   # the load's peak RSS over its DataFrame's buffers, at most
TSHARK_FIELDS = ("kafka.correlation_id", "kafka.offset", "kafka.message_key",
                 "kafka.message_value")


def tshark_cmd(path, port):
    return V.tshark_cmd(path, port, fields=TSHARK_FIELDS, every=True)


def ours_cmd(path, port, fmt, out):
    """The installed script, in one process where it could use more (CPU time is the measure)."""
    script = Path(sys.executable).parent / "kafka-dissect"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "dissector"]
    return cli + ["records", str(path), "--port", str(port), "--format", fmt, "--out", str(out)] \
        + (["--jobs", "1"] if _has_jobs(tuple(cli)) else [])


@functools.lru_cache(maxsize=None)
def _has_jobs(cli):
    return "--jobs" in subprocess.run([*cli, "records", "--help"], capture_output=True,
                                      text=True).stdout


def load_cmd(path, port, default_jobs=False):
    return [sys.executable, str(HERE / "load_records.py"), str(path), str(port)] \
        + (["--default-jobs"] if default_jobs else [])


def tshark_values(path):
    """Records in tshark's output: one kafka.message_value each."""
    return V.tshark_count(path, TSHARK_FIELDS.index("kafka.message_value"))


def our_rows(err_path):
    """The rows `records --out` reports on stderr ("N records -> FILE")."""
    for line in Path(err_path).read_text().splitlines():
        if " records -> " in line:
            return int(line.split()[0])
    raise RuntimeError(f"no record count in {err_path}")


def measure(path, port, rounds, workdir, log=print):
    """Alternate tshark and our five commands; returns {name: [Run]}, {name: records},
    the load's {rows, frame_bytes, jobs} (one process's) and the processes of the load with its
    default workers."""
    names = ("tshark records",) + tuple(TARGETS) + (DEFAULT_JOBS,)
    runs = {name: [] for name in names}
    counts, loaded, loaded_jobs = {}, {}, {}
    for i in range(rounds):
        for name in names:
            out = workdir / f"records-{name.replace(' ', '-')}.out"
            err = out.with_suffix(".err")
            if name == "tshark records":
                r = run(tshark_cmd(path, port), stdout=out, stderr_path=err)
            elif name in ("load", DEFAULT_JOBS):
                r = run(load_cmd(path, port, name == DEFAULT_JOBS), stdout=out, stderr_path=err)
            else:
                r = run(ours_cmd(path, port, name, out), stderr_path=err)
            if r.status != 0:
                raise RuntimeError(f"{name} failed ({r.status}): {r.stderr.strip()[-2000:]}")
            runs[name].append(r)
            if name == "tshark records":
                counts[name] = tshark_values(out)
            elif name == "load":
                loaded = json.loads(out.read_text())
                counts[name] = loaded["rows"]
            elif name == DEFAULT_JOBS:
                loaded_jobs = json.loads(out.read_text())
                counts[name] = loaded_jobs["rows"]
            else:
                counts[name] = our_rows(err)
            out.unlink(missing_ok=True)
            log(f"round {i + 1}/{rounds} {name:14} cpu {r.cpu:7.2f} s  wall {r.wall:7.2f} s  "
                f"peak RSS {r.rss_mb:6.0f} MB  records {counts[name]}")
    loaded["default_jobs"] = loaded_jobs.get("jobs")
    return runs, counts, loaded


def report(path, runs, counts, loaded, log=print):
    """Print the table; returns True when the record counts agree."""
    mb = path.stat().st_size / 1e6
    records = counts["tshark records"]
    base = statistics.median(r.cpu for r in runs["tshark records"])
    log(f"records table: {records} records (tshark's values), rounds: "
        f"{len(runs['tshark records'])}, medians; throughput from CPU time")
    log(f"{'tool':22} {'cpu s':>7} {'wall s':>7} {'MB/s':>7} {'records/s':>10} {'ratio':>7} "
        f"{'peak RSS MB':>11}  target")
    for name, rs in runs.items():
        if name == DEFAULT_JOBS:
            continue
        cpu, wall, rss = medians(rs)
        ratio = base / cpu
        if name in TARGETS:
            label = "ours analysis.load" if name == "load" else f"ours records {name}"
            target = (f">= {TARGETS[name]:.0f}x "
                      f"{'met' if ratio >= TARGETS[name] else 'MISSED'}")
        else:
            label, target = "tshark -e kafka.*", ""
        log(f"{label:22} {cpu:7.2f} {wall:7.2f} {mb / cpu:7.1f} {records / cpu:10,.0f} "
            f"{ratio:6.2f}x {rss:11.0f}  {target}")
    frame_mb = loaded["frame_bytes"] / 1e6 if loaded else 0
    if frame_mb:
        rss = max(r.rss_mb for r in runs["load"]) * 1.048576   # MiB -> MB
        log(f"load: DataFrame buffers {frame_mb:.0f} MB, peak RSS {rss:.0f} MB = "
            f"{rss / frame_mb:.2f}x ({'<' if rss / frame_mb < RSS_TARGET else 'NOT <'} "
            f"{RSS_TARGET:.0f}x)")
    if runs.get(DEFAULT_JOBS):
        cpu, wall, _ = medians(runs[DEFAULT_JOBS])
        tshark_wall = medians(runs["tshark records"])[1]
        log(f"analysis.load with its default jobs ({loaded.get('default_jobs')} processes here): "
            f"wall {wall:.2f} s, CPU {cpu:.2f} s: {tshark_wall / wall:.2f}x tshark's wall "
            f"{tshark_wall:.2f} s (what a script waits for; not the target's measure)")
    agree = all(n == records for n in counts.values())
    log(f"records: {', '.join(f'{k} {v}' for k, v in counts.items())}: "
        f"{'agree' if agree else 'DISAGREE'}")
    return agree
