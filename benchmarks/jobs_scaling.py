"""`--jobs 1` against `--jobs N` on the same capture, alternating in one run: the wall-time scaling.

    python benchmarks/jobs_scaling.py [--corpus FILE | --size-mb 400 [--mix bulk|dense]]
                                      [--jobs 2] [--rounds 5] [--levels bodies,records] [--quick]

Each round runs `kafka-dissect read CORPUS --level L --format csv --jobs J` for every level, one
process then N, and checks that the two outputs are byte-identical. Reported per level: median
wall and CPU time (user + system of the command and its workers) over the rounds, and the
scaling (median wall with one process / median wall with N). Wall time is the measure (the
workers run side by side), so neighbours on a shared machine make it noisy: several rounds,
medians. Without --corpus, a corpus is built (benchmarks/corpus.py, as vs_tshark builds it) and
deleted afterwards unless --keep is given.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import corpus as C  # noqa: E402
from benchmarks.measure import machine, run, settle, warm_bytecode  # noqa: E402

TARGET = 1.7   # with 2 workers on a 2-CPU machine (issue 20)


def read_cmd(path, port, level, jobs, out):
    script = Path(sys.executable).parent / "kafka-dissect"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "dissector"]
    return cli + ["read", str(path), "--port", str(port), "--level", level, "--format", "csv",
                  "--out", str(out), "--jobs", str(jobs)]


def measure(path, port, levels, jobs, rounds, tmp, log=print):
    """{(level, jobs): [(Run, CPU seconds on its critical path)]}: with one process all of it,
    with N the parent's before the workers started and the busiest worker's. Raises if a run
    fails or --jobs N writes other bytes."""
    runs = {}
    note = Path(tmp) / "cpu.json"
    os.environ["KAFKA_DISSECT_CPU_NOTE"] = str(note)   # measure.run passes it on
    for i in range(rounds):
        for level in levels:
            outs = {}
            for j in (1, jobs):
                out = Path(tmp) / f"{level}-{j}.csv"
                note.unlink(missing_ok=True)
                r = run(read_cmd(path, port, level, j, out))
                if r.status != 0:
                    raise SystemExit(f"{level} --jobs {j} failed ({r.status})")
                path_cpu = r.cpu
                if j != 1:
                    cpu = json.loads(note.read_text())
                    path_cpu = cpu["parent_before"] + max(cpu["workers"])
                runs.setdefault((level, j), []).append((r, path_cpu))
                outs[j] = out
                log(f"round {i + 1}/{rounds} {level:8} --jobs {j}: wall {r.wall:6.2f} s  "
                    f"cpu {r.cpu:6.2f} s  critical path cpu {path_cpu:6.2f} s  "
                    f"peak RSS {r.rss_mb:5.0f} MB")
            if not filecmp.cmp(outs[1], outs[jobs], shallow=False):
                raise SystemExit(f"{level}: --jobs {jobs} wrote other bytes than --jobs 1")
    return runs


def report(path, runs, levels, jobs, log=print):
    log(f"corpus: {path} {path.stat().st_size / 1e6:.1f} MB; machine: {machine()}")
    log(f"rounds: {len(runs[levels[0], 1])}, alternating; medians; outputs byte-identical")
    runs = {k: ([r for r, _ in v], [c for _, c in v]) for k, v in runs.items()}
    log(f"{'level':8} {'jobs':>4} {'wall s':>7} {'cpu s':>7} {'scaling':>8} {'path cpu s':>10} "
        f"{'bound':>6}  target")
    met = True
    for level in levels:
        one = statistics.median(r.wall for r in runs[level, 1][0])
        one_cpu = statistics.median(r.cpu for r in runs[level, 1][0])
        for j in (1, jobs):
            wall = statistics.median(r.wall for r in runs[level, j][0])
            cpu = statistics.median(r.cpu for r in runs[level, j][0])
            path_cpu = statistics.median(runs[level, j][1])
            scaling = one / wall
            target = ""
            if j != 1 and jobs == 2:
                ok = scaling >= TARGET
                met &= ok
                target = f">= {TARGET}x {'met' if ok else 'MISSED'}"
            log(f"{level:8} {j:>4} {wall:7.2f} {cpu:7.2f} {scaling:7.2f}x {path_cpu:10.2f} "
                f"{one_cpu / path_cpu:5.2f}x  {target}")
    log("scaling: median wall with one process / with N; bound: median CPU with one process / "
        "median CPU on the critical path with N (the scaling an idle machine allows)")
    return met


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="an existing capture (default: build one)")
    ap.add_argument("--port", type=int, default=C.PORT)
    ap.add_argument("--size-mb", type=float, default=400)
    ap.add_argument("--mix", choices=sorted(C.MIXES), default="bulk")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--levels", default="bodies,records")
    ap.add_argument("--keep", action="store_true", help="keep the corpus that was built")
    ap.add_argument("--quick", action="store_true", help="a 4 MB corpus, one round")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb, args.rounds = 4, 1
    levels = args.levels.split(",")
    warm_bytecode()
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=C.CORPUS_DIR) as tmp:
        path = args.corpus
        if path is None:
            name = "corpus.pcap" if args.mix == "bulk" else f"corpus-{args.mix}.pcap"
            path = (C.CORPUS_DIR if args.keep else Path(tmp)) / name
            print(f"built {C.build(path, int(args.size_mb * 1e6), args.mix)}")
        settle(path)
        runs = measure(path, args.port, levels, args.jobs, args.rounds, tmp)
        report(path, runs, levels, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
