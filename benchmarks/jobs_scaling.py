"""`--jobs 1` against `--jobs N` on the same capture, alternating in one run: the scaling.

    python benchmarks/jobs_scaling.py [--quick] [--corpus FILE | --size-mb 400
                                      [--mix bulk|dense | --source CAPTURE] [--one-host]]
                                      [--jobs 2] [--rounds 5]
                                      [--levels bodies,records,table,parquet,export]

Each round runs `kafka-dissect read CORPUS --level L --format csv --jobs J` for every level, for
"table" and "parquet" the records table (`kafka-dissect records CORPUS --format csv|parquet`)
and for "export" the Parquet tables (`kafka-dissect export CORPUS --out DIR`, what stats and
report load too), one process then N, and checks that the two outputs are byte-identical.
Reported per level, medians over the rounds: wall and CPU time (user + system of the command and
its workers), the wall scaling (one process's wall over N's) and the CPU bound: one process's
CPU over the CPU on the critical path of N, which is the parent's CPU until its workers started
plus the larger of the busiest worker's CPU and the rest of the run's CPU shared by N CPUs (on N
idle CPUs the wall time cannot be less). Wall time is the measure; on a shared machine it is the
neighbours' as much as ours, so the bound is printed beside it, and the machine's own scaling:
each round also runs N copies of the one-process command side by side (independent work, nothing
to merge), and N times one process's wall over theirs is what the machine gives N processes: the
ceiling of any split of the work. The last line is the verdict on the target. The target is for
the levels of issue 20 (bodies, records, the records table); export's scaling is printed beside
them. Parquet is written on a thread of its own (analysis.parquet_sink), so one process's wall
time there is already less than its CPU time: its scaling is what workers add to the help of
that thread. Without --corpus, the corpus is built (benchmarks/corpus.py, as vs_tshark builds it, or
replicating another capture: --source) and deleted afterwards unless --keep is given; --quick
takes 2 rounds. More connections than the workers remember (parallel.part.MAX_FLOWS):
--source captures/librdkafka_produce_consume.pcap --size-mb 600 (~146,000 connections of
~13,000 client addresses).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import corpus as C  # noqa: E402
from benchmarks.measure import machine, run, settle, side_by_side, warm_bytecode  # noqa: E402

TARGET = 1.7   # with 2 workers on a 2-CPU machine (issue 20)


TABLE = "table"       # the records table: `records --format csv`
PARQUET = "parquet"   # and as Parquet: `records --format parquet`
EXPORT = "export"     # the Parquet tables: `export --out DIR`
TARGETED = ("bodies", "records", TABLE, PARQUET)
TWINS = "twins"       # N copies of the one-process run at once: the machine's own scaling


def read_cmd(path, port, level, jobs, out):
    script = Path(sys.executable).parent / "kafka-dissect"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "dissector"]
    if level == EXPORT:
        return cli + ["export", str(path), "--port", str(port), "--out", str(out),
                      "--jobs", str(jobs)]
    what = ["records"] if level in (TABLE, PARQUET) else ["read", "--level", level]
    return cli + what + [str(path), "--port", str(port), "--format",
                         "parquet" if level == PARQUET else "csv", "--out", str(out),
                         "--jobs", str(jobs)]


def _remove(out):
    if out.is_dir():
        shutil.rmtree(out)
    else:
        out.unlink(missing_ok=True)


def _same(a, b) -> bool:
    """Whether output files (or folders of them: export) hold the same bytes."""
    if not a.is_dir():
        return filecmp.cmp(a, b, shallow=False)
    names = sorted(p.name for p in a.iterdir())
    return (names == sorted(p.name for p in b.iterdir())
            and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names))


def measure(path, port, levels, jobs, rounds, tmp, log=print):
    """{(level, jobs): [(Run, CPU seconds on its critical path)]}: with one process all of it,
    with N see the module doc. Raises if a run fails or --jobs N writes other bytes."""
    runs = {}
    note = Path(tmp) / "cpu.json"
    os.environ["KAFKA_DISSECT_CPU_NOTE"] = str(note)   # measure.run passes it on
    for i in range(rounds):
        for level in levels:
            outs = {}
            for j in (1, jobs):
                out = Path(tmp) / (f"{level}-{j}" if level == EXPORT else f"{level}-{j}.out")
                # the last round's output goes first, untimed: truncating it as the command
                # opens it (the records table: 680 MB on the bulk corpus) took 0.3-0.5 s
                _remove(out)
                note.unlink(missing_ok=True)
                r = run(read_cmd(path, port, level, j, out))
                if r.status != 0:
                    raise SystemExit(f"{level} --jobs {j} failed ({r.status})")
                path_cpu, parts = r.cpu, ""
                if j != 1:
                    cpu = json.loads(note.read_text())
                    path_cpu = critical_path(cpu, r.cpu, j)
                    parts = (f" (parent to the start {cpu['parent_started']:.2f} s, workers "
                             f"{' '.join(f'{w:.2f}' for w in cpu['workers'])} s)")
                runs.setdefault((level, j), []).append((r, path_cpu))
                outs[j] = out
                log(f"round {i + 1}/{rounds} {level:8} --jobs {j}: wall {r.wall:6.2f} s  "
                    f"cpu {r.cpu:6.2f} s  peak RSS {r.rss_mb:5.0f} MB  "
                    f"critical path cpu {path_cpu:6.2f} s{parts}")
            if not _same(outs[1], outs[jobs]):
                raise SystemExit(f"{level}: --jobs {jobs} wrote other bytes than --jobs 1")
            twins = [Path(tmp) / f"{level}-twin{k}" for k in range(jobs)]
            for out in twins:
                _remove(out)
            wall = side_by_side([read_cmd(path, port, level, 1, out) for out in twins])
            runs.setdefault((level, TWINS), []).append(wall)
            log(f"round {i + 1}/{rounds} {level:8} {jobs} x --jobs 1 side by side: "
                f"wall {wall:6.2f} s")
            for out in twins:
                _remove(out)
    return runs


def critical_path(note, cpu, jobs):
    """The CPU seconds of a parallel run that no scheduling on `jobs` CPUs overlaps: the
    parent's until its workers started, then the busiest worker's or, if more, the rest of
    the run's CPU (`cpu`: the parent's and every worker's, exits included) over `jobs`."""
    started = note["parent_started"]
    return started + max(max(note["workers"]), (cpu - started) / jobs)


def report(path, runs, levels, jobs, log=print):
    """Print the table and the verdict; returns whether the target was met (wall time)."""
    log(f"corpus: {path} {path.stat().st_size / 1e6:.1f} MB; machine: {machine()}")
    log(f"rounds: {len(runs[levels[0], 1])}, alternating; medians; outputs byte-identical")
    twins = {level: statistics.median(runs.pop((level, TWINS))) for level in levels}
    runs = {k: ([r for r, _ in v], [c for _, c in v]) for k, v in runs.items()}
    log(f"{'level':8} {'jobs':>4} {'wall s':>7} {'cpu s':>7} {'scaling':>8} {'path cpu s':>10} "
        f"{'bound':>6} {'machine':>8}")
    verdicts, met = [], True
    for level in levels:
        one = statistics.median(r.wall for r in runs[level, 1][0])
        one_cpu = statistics.median(r.cpu for r in runs[level, 1][0])
        for j in (1, jobs):
            wall = statistics.median(r.wall for r in runs[level, j][0])
            cpu = statistics.median(r.cpu for r in runs[level, j][0])
            path_cpu = statistics.median(runs[level, j][1])
            scaling, bound = one / wall, one_cpu / path_cpu
            ceiling = j * one / twins[level]
            log(f"{level:8} {j:>4} {wall:7.2f} {cpu:7.2f} {scaling:7.2f}x {path_cpu:10.2f} "
                f"{bound:5.2f}x {ceiling if j != 1 else 1.0:7.2f}x")
        if level in TARGETED:
            met &= scaling >= TARGET
        verdicts.append(f"{level} {scaling:.2f}x wall ({bound:.2f}x CPU bound, "
                        f"{ceiling:.2f}x machine)")
    log("scaling: median wall with one process / with N; bound: median CPU with one process / "
        "median CPU on the critical path with N (the scaling idle CPUs allow); machine: N x "
        "median wall with one process / median wall of N one-process runs side by side (the "
        "scaling the machine gives N independent processes, the ceiling of any split)")
    target = (f"target {TARGET}x with 2 workers ({', '.join(TARGETED)}): "
              f"{'met' if met else 'MISSED'} on wall time"
              if jobs == 2 else "no target for this many workers")
    log(f"verdict: --jobs {jobs}: {', '.join(verdicts)}; {target}")
    return met


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="an existing capture (default: build one)")
    ap.add_argument("--port", type=int, default=C.PORT)
    ap.add_argument("--size-mb", type=float, default=400)
    ap.add_argument("--mix", choices=sorted(C.MIXES), default="bulk")
    ap.add_argument("--source", type=Path, help="build the corpus replicating this capture")
    ap.add_argument("--one-host", action="store_true",
                    help="build the corpus with every client on one address (corpus.build)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levels", default=f"bodies,records,{TABLE},{PARQUET},{EXPORT}",
                    help=f"read's levels, {TABLE} and {PARQUET} for the records table as CSV "
                         f"and as Parquet, {EXPORT} for the Parquet tables")
    ap.add_argument("--keep", action="store_true", help="keep the corpus that was built")
    ap.add_argument("--quick", action="store_true", help="2 rounds")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds = 2
    levels = args.levels.split(",")
    warm_bytecode()
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=C.CORPUS_DIR) as tmp:
        path = args.corpus
        if path is None:
            mix = args.mix if args.source is None else args.source.stem
            name = "corpus.pcap" if mix == "bulk" else f"corpus-{mix}.pcap"
            if args.one_host:
                name = name.replace(".pcap", "-one-host.pcap")
            path = (C.CORPUS_DIR if args.keep else Path(tmp)) / name
            built = C.build(path, int(args.size_mb * 1e6), str(args.source or args.mix),
                            one_host=args.one_host)
            print(f"built {built}")
        settle(path)
        runs = measure(path, args.port, levels, args.jobs, args.rounds, tmp)
        report(path, runs, levels, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
