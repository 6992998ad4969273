"""What `kafka-dissect browse` costs on a large capture, beside `kafka-dissect read` of the same.

    python benchmarks/browse_open.py [--exchanges 100000] [--rounds 3]

Writes a capture of N small exchanges (tests/browse/synthetic.py), then alternates, each in its
own process: `read` (text to /dev/null: dissecting and formatting every exchange) and `browse`
headless (Textual's test driver, 100x30) until the whole capture is in the list, then the End key
(to the last exchange, its tree decoded) and a filter over every exchange. Prints medians: the
open time and its ratio to `read`, the time to the first rows shown, and the two interactions.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import ROOT, installed_env, run, warm_bytecode  # noqa: E402


def child(path) -> None:
    """In the measured process: open the browser on `path`, report the times as JSON."""
    import asyncio

    from dissector.browse.app import DECODE_DELAY_S
    from dissector.cli import build_parser
    from dissector.commands.browse import make_app

    async def go():
        start = time.perf_counter()
        app = make_app(build_parser(["browse"]).parse_args(["browse", path]))
        out = {}
        async with app.run_test(size=(100, 30)) as pilot:
            while not len(app.rows):
                await pilot.pause(0.01)
            out["first_rows_s"] = time.perf_counter() - start
            while app.loading:
                await pilot.pause(0.01)
            out["open_s"] = time.perf_counter() - start
            out["exchanges"] = len(app.rows)
            t = time.perf_counter()
            await pilot.press("end")
            while app._shown is None or app._shown.index != out["exchanges"]:
                await pilot.pause(0.005)
            out["end_key_s"] = time.perf_counter() - t - DECODE_DELAY_S
            t = time.perf_counter()
            app.rows.set_filter("error_code == 35")
            out["filter_s"] = time.perf_counter() - t
        return out
    print(json.dumps(asyncio.run(go())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", metavar="CAPTURE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    from tests.browse import synthetic
    warm_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic.write(Path(tmp) / "many.pcap", args.exchanges)
        reads, opens = [], []
        for _ in range(args.rounds):
            r = run([sys.executable, "-m", "dissector", "read", str(path)])
            assert r.status == 0, r.stderr
            reads.append(r.wall)
            proc = subprocess.run([sys.executable, __file__, "--child", str(path)], cwd=ROOT,
                                  capture_output=True, text=True, env=installed_env(),
                                  timeout=3600)
            assert proc.returncode == 0, proc.stderr
            opens.append(json.loads(proc.stdout.splitlines()[-1]))
    med = statistics.median
    read_s = med(reads)
    open_s = med(o["open_s"] for o in opens)
    print(f"{args.exchanges} exchanges, {args.rounds} rounds, medians:")
    print(f"  read (text to /dev/null)      {read_s:7.2f} s")
    print(f"  browse: whole list            {open_s:7.2f} s  ({open_s / read_s:.2f}x read)")
    print(f"  browse: first rows shown      {med(o['first_rows_s'] for o in opens):7.2f} s")
    print(f"  browse: End key, tree decoded {med(o['end_key_s'] for o in opens) * 1000:7.1f} ms")
    print(f"  browse: filter all exchanges  {med(o['filter_s'] for o in opens) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
