"""tshark and kafka-dissect side by side on a TLS capture, both given the same key log.

    python benchmarks/vs_tshark_tls.py [--size-mb 150] [--rounds 3] [--setting SETTING]
                                       [--quick] [--no-settle] [--keep]

The corpus is real Kafka traffic over TLS (benchmarks/tls_corpus.py: the bulk mix's clients
through the lab's TLS terminator, replicated like the plaintext corpus), opened with the
terminator's key log. Each round alternates, as benchmarks/vs_tshark.py does (whose machinery
this reuses): tshark with `-o tls.keylog_file:KEYS -d tcp.port==9092,tls -d tls.port==9092,kafka`
printing the Kafka header fields, our `read --keylog KEYS --format csv` at each level, our bodies
level on the plaintext twin (the same traffic as the terminator's broker leg saw it, replicated
the same way: what decrypting costs us, in CPU and peak RSS), and the pure-Python floor. Both
tools must count the same Kafka messages. Reported: median CPU and wall time, throughput, the
ratio of tshark's CPU time to ours, peak RSS.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import corpus as C  # noqa: E402
from benchmarks import tls_corpus  # noqa: E402
from benchmarks import vs_tshark as V  # noqa: E402
from benchmarks.measure import settle, warm_bytecode  # noqa: E402

TARGETS = {"bodies": 10.0}   # ratio to tshark (issue 19, part 8)
PLAIN = "plain"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=150, help="corpus size (default 150 MB)")
    ap.add_argument("--setting", default=tls_corpus.DEFAULT_SETTING,
                    help=f"TLS version and cipher of the source (tests/tls_lab.py SETTINGS; "
                         f"default {tls_corpus.DEFAULT_SETTING})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the corpora that were built")
    ap.add_argument("--quick", action="store_true",
                    help="prove the benchmark works: a 4 MB corpus, one round")
    ap.add_argument("--no-settle", action="store_true",
                    help="read the corpora as the page cache holds them now")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb, args.rounds = 4, 1
    size = int(args.size_mb * 1e6)
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=C.CORPUS_DIR) as tmp:
        where = C.CORPUS_DIR if args.keep else Path(tmp)
        path = where / f"corpus-{args.setting}.pcap"
        twin = where / f"corpus-{args.setting}.plain.pcap"
        built, keylog = tls_corpus.build(path, size, args.setting)
        print(f"built {built}")
        plain = tls_corpus.build_plain(twin, size, args.setting)
        print(f"plaintext twin {plain}")
        print(f"key log: {keylog}")
        for p in (path, twin):
            checked = C.check_checksums(p)
            print(f"tshark checksums (IPv4 and TCP, every packet) of {p.name}: "
                  f"{checked['good']} good, {checked['bad']} bad, {checked['unverified']} "
                  f"unverified")
            if checked["bad"] or checked["unverified"]:
                return 1
        warm_bytecode()
        if args.no_settle:
            print("corpora: read as the page cache holds them (--no-settle)")
        elif settle(path) and settle(twin):
            print("corpora: dropped from the page cache and read back once")
        extra = {PLAIN: lambda out: V.ours_cmd(twin, C.PORT, "bodies", out)}
        runs, counts = V.measure(path, C.PORT, args.rounds, Path(tmp), keylog=keylog,
                                 extra=extra)
        agree = V.report(path, runs, counts, built.packets, targets=TARGETS,
                         labels={PLAIN: "ours plain bodies"})
        tls_cpu = statistics.median(r.cpu for r in runs["bodies"])
        plain_cpu = statistics.median(r.cpu for r in runs[PLAIN])
        print(f"plaintext twin: {plain.bytes / 1e6:.1f} MB, {counts[PLAIN]} Kafka messages; "
              f"bodies over TLS cost {tls_cpu / plain_cpu:.2f}x the plaintext twin's CPU, "
              f"peak RSS {max(r.rss_mb for r in runs['bodies']):.0f} MB against "
              f"{max(r.rss_mb for r in runs[PLAIN]):.0f} MB")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
