"""tshark and kafka-dissect side by side on the same capture, alternating in one process.

    python benchmarks/vs_tshark.py [--corpus FILE | --size-mb 400 [--mix bulk|dense|small]] [--rounds 3]
                                   [--quick] [--no-settle]

Each round runs, one after the other: tshark printing the Kafka header fields (api key, api
version, correlation id: `-T fields`, single pass, Kafka decoded on the corpus's broker port), then
our CLI at each level (`read --level headers|bodies|records --format csv`), then the pure-Python
floor (benchmarks/read_floor.py: each packet's headers unpacked and its payload kept, nothing
else: the ratio no interpreted per-packet loop can pass on the corpus). tshark and our CLI write
their output to files, from which the Kafka messages each tool saw are counted: tshark's
correlation ids (one per Kafka PDU it dissected) against our requests plus responses; the two
counts must agree. Before the first round the corpus is dropped from the page cache and read
back once (measure.settle), so that both tools read it as the kernel caches a capture read from
disk, whatever its writer left; --no-settle measures it as the page cache holds it (for example
a capture tcpdump has just written, in 4 KiB pages: README, Performance).

Reported per tool: median CPU time (user + system of the child) and wall time over the rounds,
throughput (MB/s, packets/s, Kafka messages/s) from the CPU time, the ratio of tshark's CPU time
to ours, and the child's peak RSS. CPU time is the measure because the machine is shared (wall
times include the neighbours' load); wall times are printed too. Without --corpus, a corpus of
--size-mb is built (benchmarks/corpus.py) from the --mix source traffic (bulk: ~20 kB a Kafka
message; dense: ~1.7 kB, where the per-message costs dominate) and deleted afterwards unless
--keep is given.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import corpus as C  # noqa: E402
from benchmarks.measure import machine, medians, run, settle, warm_bytecode  # noqa: E402

LEVELS = ("headers", "bodies", "records")
# ratio to tshark per mix: bulk (issue 9), dense (issue 20: headers and bodies); small (many
# small records) has none of its own: the records table's targets (records_table.py) hold on it
TARGETS = {"bulk": {"headers": 30.0, "bodies": 15.0, "records": 5.0},
           "dense": {"headers": 15.0, "bodies": 8.0}, "small": {}}
TSHARK_FIELDS = ("kafka.request_key", "kafka.api_version", "kafka.correlation_id")


def tshark_cmd(path, port, keylog=None, fields=TSHARK_FIELDS, every=False):
    """tshark printing `fields` (every occurrence of each when `every`, else the first),
    decoding Kafka on `port`; with `keylog`, TLS on that port decrypted with it and Kafka inside
    (as tshark's users configure it)."""
    if keylog is None:
        decode = ["-d", f"tcp.port=={port},kafka"]
    else:
        decode = ["-o", f"tls.keylog_file:{keylog}", "-d", f"tcp.port=={port},tls",
                  "-d", f"tls.port=={port},kafka"]
    cmd = ["tshark", "-n", "-r", str(path), *decode, "-T", "fields"]
    if every:
        cmd += ["-E", "occurrence=a"]
    for field in fields:
        cmd += ["-e", field]
    return cmd


def ours_cmd(path, port, level, out, keylog=None):
    """Our CLI as users run it: the installed `kafka-dissect` script (python -m dissector where
    it is not installed, which also loads runpy: about 4 ms more at every start)."""
    script = Path(sys.executable).parent / "kafka-dissect"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "dissector"]
    # one process: CPU time is the measure here (benchmarks/jobs_scaling.py measures --jobs)
    return cli + ["read", str(path), "--port", str(port), "--level", level, "--format", "csv",
                  "--out", str(out), "--jobs", "1"] + (["--keylog", str(keylog)] if keylog else [])


def tshark_count(path, column):
    """Values in field `column` of tshark's field output: several in one line (several PDUs in
    one packet, every occurrence) come out comma-separated."""
    n = 0
    with open(path) as f:
        for line in f:
            values = line.rstrip("\n").split("\t")[column]
            if values:
                n += values.count(",") + 1
    return n


def tshark_messages(path):
    """Kafka PDUs in tshark's field output: one correlation id each."""
    return tshark_count(path, TSHARK_FIELDS.index("kafka.correlation_id"))


def our_messages(path):
    """Requests plus responses in our exchanges table."""
    n = 0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            n += bool(row["request_ts"]) + bool(row["response_ts"])
    return n


def floor_cmd(path):
    return [sys.executable, str(HERE / "read_floor.py"), str(path)]


def measure(path, port, rounds, workdir, log=print, keylog=None, extra=None):
    """Alternate the five commands for `rounds` rounds; returns {tool: [Run]} and {tool: count}
    (Kafka messages; the floor counts none). `keylog`: the capture is TLS, opened with it (by
    both tools). `extra`: {name: command} run in each round after ours, counted as ours."""
    extra = extra or {}
    runs = {name: [] for name in ("tshark",) + LEVELS + tuple(extra) + ("floor",)}
    counts = {}
    for i in range(rounds):
        for name in runs:
            out = workdir / f"{name}.out"
            err = workdir / f"{name}.err"
            if name == "tshark":
                cmd = tshark_cmd(path, port, keylog)
            elif name == "floor":
                cmd = floor_cmd(path)
            elif name in extra:
                cmd = extra[name](out)
            else:
                cmd = ours_cmd(path, port, name, out, keylog)
            ours = name not in ("tshark", "floor")
            r = run(cmd, stdout=os.devnull if ours else out, stderr_path=err)
            if r.status != 0:
                raise RuntimeError(f"{name} failed ({r.status}): {r.stderr.strip()[-2000:]}")
            runs[name].append(r)
            if name != "floor":
                counts[name] = (tshark_messages if name == "tshark" else our_messages)(out)
            log(f"round {i + 1}/{rounds} {name:8} cpu {r.cpu:7.2f} s  wall {r.wall:7.2f} s  "
                f"peak RSS {r.rss_mb:6.0f} MB  messages {counts.get(name, '-')}")
    return runs, counts


def kernels():
    """Which hot loops run compiled in this install (pure-Python fallbacks otherwise)."""
    from dissector import decoding, framebuf, output, session, tables
    from dissector.capture import fast
    from dissector.protocol import readers
    from dissector.records import record_batch, record_set
    from dissector.tcp import flows

    def how(compiled):
        return "compiled" if compiled else "pure Python (not built)"
    return (f"packet walker {how(fast.COMPILED)}, frame buffers {how(framebuf.COMPILED)}, body "
            f"readers {how(readers.COMPILED)}, records check "
            f"{how(record_batch.check_records is not record_batch._check_records)}, batch "
            f"headers {how(record_set.v2_headers is not None)}, CSV rows {how(output.COMPILED)}, "
            f"flow handler {how(flows.compiled_handler is not None)}, exchange rows "
            f"{how(tables.exchange_row is not tables.py_exchange_row)}, pairing "
            f"{how(session.PAIRING_COMPILED)}, body decoder {how(decoding.COMPILED)}")


def report(path, runs, counts, packets, log=print, targets=TARGETS["bulk"], labels=None):
    """Print the table; returns True when the message counts agree (tshark's and each level's;
    the extra commands of `measure` are named by `labels` and not counted)."""
    size = path.stat().st_size
    mb = size / 1e6
    messages = counts["tshark"]
    base = statistics.median(r.cpu for r in runs["tshark"])
    log(f"corpus: {path} {mb:.1f} MB, {packets} packets, {messages} Kafka messages (tshark)")
    log(f"machine: {machine()}")
    log(f"ours: {kernels()}")
    log(f"rounds: {len(runs['tshark'])}, alternating {', '.join(runs)}; "
        "medians; throughput from CPU time")
    log(f"{'tool':17} {'cpu s':>7} {'wall s':>7} {'MB/s':>7} {'packets/s':>10} {'messages/s':>10} "
        f"{'ratio':>7} {'peak RSS MB':>11}  target")
    for name, rs in runs.items():
        cpu, wall, rss = medians(rs)
        ratio = base / cpu
        label = {"tshark": "tshark", "floor": "pure-Python floor", **(labels or {})}.get(
            name, f"ours {name}")
        if name not in targets:
            target = ""
        else:
            verdict = "met" if ratio >= targets[name] else "MISSED"
            target = f">= {targets[name]:.0f}x {verdict}"
        log(f"{label:17} {cpu:7.2f} {wall:7.2f} {mb / cpu:7.1f} {packets / cpu:10,.0f} "
            f"{messages / cpu:10,.0f} {ratio:6.2f}x {rss:11.0f}  {target}")
    ours = {name: counts[name] for name in LEVELS}
    agree = all(n == messages for n in ours.values())
    detail = ", ".join(f"{k} {v}" for k, v in ours.items())
    log(f"messages: tshark {messages}, ours {detail}: {'agree' if agree else 'DISAGREE'}")
    return agree


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="an existing capture (default: build one)")
    ap.add_argument("--port", type=int, default=C.PORT, help="broker port (default 9092)")
    ap.add_argument("--size-mb", type=float, default=400, help="size of the corpus to build")
    ap.add_argument("--mix", choices=sorted(C.MIXES), default="bulk",
                    help="the source traffic of the corpus to build, and whose targets "
                         "apply (default bulk; with --corpus, the corpus's mix)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the corpus that was built")
    ap.add_argument("--quick", action="store_true",
                    help="prove the benchmark works: a 4 MB corpus, one round")
    ap.add_argument("--records", action="store_true",
                    help="then the records table against tshark's record extraction "
                         "(benchmarks/records_table.py)")
    ap.add_argument("--no-settle", action="store_true",
                    help="read the corpus as the page cache holds it now (by default it is "
                         "dropped and read back once, as a capture on disk is cached)")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb, args.rounds = 4, 1
    path, built = args.corpus, None
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=C.CORPUS_DIR) as tmp:
        try:
            if path is None:
                name = "corpus.pcap" if args.mix == "bulk" else f"corpus-{args.mix}.pcap"
                path = (C.CORPUS_DIR if args.keep else Path(tmp)) / name
                built = C.build(path, int(args.size_mb * 1e6), args.mix)
                print(f"built {built}")
                checked = C.check_checksums(path)
                print(f"tshark checksums (IPv4 and TCP, every packet): {checked['good']} good, "
                      f"{checked['bad']} bad, {checked['unverified']} unverified")
                if checked["bad"] or checked["unverified"]:
                    return 1
            warm_bytecode()
            if args.no_settle:
                print("corpus: read as the page cache holds it (--no-settle)")
            elif settle(path):
                print("corpus: dropped from the page cache and read back once (as a capture on "
                      "disk is cached)")
            packets = built.packets if built else C.count_packets(path)
            runs, counts = measure(path, args.port, args.rounds, Path(tmp))
            agree = report(path, runs, counts, packets, targets=TARGETS[args.mix])
            if args.records:
                from benchmarks import records_table as R
                agree = R.report(path, *R.measure(path, args.port, args.rounds, Path(tmp))) \
                    and agree
        finally:
            if built is not None and not args.keep:
                built.path.unlink(missing_ok=True)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
