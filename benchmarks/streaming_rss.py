"""Peak memory reading and exporting a capture of 1 GB or more: it must stay under 300 MB.

    python benchmarks/streaming_rss.py [--capture FILE | --size-mb 1074] [--quick] [--keep]

Without --capture it builds a 1 GiB corpus by replicating real connections (benchmarks/corpus.py;
deleted afterwards unless --keep). Then it runs, each as its own process, and measures that
process's peak RSS (os.wait4):

    read     kafka-dissect read --level records --format csv   (every body and record decoded)
    export   kafka-dissect export --out DIR                    (the analysis tables as Parquet)
    records  kafka-dissect records --format parquet            (every record as a Parquet row)

and prints one line per command with PASS or FAIL against the limit (300 MB), then an overall
PASS/FAIL line; the exit status is 1 when any command fails the limit or exits with an error.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import corpus as C  # noqa: E402
from benchmarks.measure import machine, run, warm_bytecode  # noqa: E402

LIMIT_MB = 300
GIB = 1 << 30


def commands(path, port, workdir):
    cli = [sys.executable, "-m", "dissector"]
    src = [str(path), "--port", str(port)]
    return {
        "read": cli + ["read", *src, "--level", "records", "--format", "csv", "--out", "/dev/null"],
        "export": cli + ["export", *src, "--out", str(workdir / "export")],
        "records": cli + ["records", *src, "--format", "parquet",
                          "--out", str(workdir / "records.parquet")],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", type=Path, help="an existing capture (default: build one)")
    ap.add_argument("--port", type=int, default=C.PORT, help="broker port (default 9092)")
    ap.add_argument("--size-mb", type=float, default=GIB / 1e6, help="corpus size (1 GiB)")
    ap.add_argument("--limit-mb", type=float, default=LIMIT_MB)
    ap.add_argument("--only", choices=("read", "export", "records"), action="append",
                    help="run only these commands (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the corpus that was built")
    ap.add_argument("--quick", action="store_true", help="prove it works: a 4 MB corpus")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mb = 4
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    ok = True
    path, built = args.capture, None
    with tempfile.TemporaryDirectory(dir=C.CORPUS_DIR) as tmp:
        work = Path(tmp)
        try:
            if path is None:
                path = C.CORPUS_DIR / "rss.pcap" if args.keep else work / "rss.pcap"
                built = C.build(path, int(args.size_mb * 1e6))
                print(f"built {built}")
            warm_bytecode()
            size = path.stat().st_size
            print(f"capture: {path} {size / 1e6:.1f} MB ({size / GIB:.2f} GiB)")
            print(f"machine: {machine()}")
            for name, cmd in commands(path, args.port, work).items():
                if args.only and name not in args.only:
                    continue
                r = run(cmd, stderr_path=work / f"{name}.err")
                verdict = "PASS" if r.status == 0 and r.rss_mb < args.limit_mb else "FAIL"
                ok &= verdict == "PASS"
                note = "" if r.status == 0 else f" (exit {r.status}: {r.stderr.strip()[-300:]})"
                print(f"{name:8} peak RSS {r.rss_mb:7.1f} MB  limit {args.limit_mb:.0f} MB  "
                      f"cpu {r.cpu:7.1f} s  wall {r.wall:7.1f} s  {verdict}{note}")
        finally:
            if built is not None and not args.keep:
                built.path.unlink(missing_ok=True)
    print(f"streaming RSS: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
