"""The clients table on many clients: analysis.clients.clients beside the per-client loop it
replaced (analysis/clients.py at commit BEFORE, read from git), side by side in one run.

    python benchmarks/clients_table.py [--clients 10000] [--rounds 3]

Builds the synthetic tables of tests/analysis/synthetic_clients.py (producers, consumers,
admins and followers over one to three connections each; ~18 exchanges a client), then per
round times both on them in alternation (CPU time, user + system), checks they give the same
rows, and prints medians and the ratio.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.clients import clients  # noqa: E402
from analysis.terminal import plain_values  # noqa: E402
from tests.analysis import synthetic_clients  # noqa: E402

BEFORE = "fce7183"   # the last commit with the per-client loop


def before():
    """The clients() of commit BEFORE, as a module inside the analysis package."""
    source = subprocess.run(["git", "show", f"{BEFORE}:analysis/clients.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("analysis._clients_before")
    module.__package__ = "analysis"
    exec(compile(source, f"{BEFORE}:analysis/clients.py", "exec"), module.__dict__)
    return module.clients


def cpu(fn, t):
    start = time.process_time()
    out = fn(t)
    return time.process_time() - start, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t = synthetic_clients.tables(args.clients)
    old = before()
    times = {"before (per client)": [], "now (columns)": []}
    for _ in range(args.rounds):
        s_old, rows_old = cpu(old, t)
        s_new, rows_new = cpu(clients, t)
        times["before (per client)"].append(s_old)
        times["now (columns)"].append(s_new)
        assert plain_values(rows_old) == plain_values(rows_new), "the rows differ"
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.clients:,} clients, {len(t.exchanges):,} exchanges, "
          f"{len(t.partitions):,} partition rows, {args.rounds} rounds, CPU s medians "
          "(same rows):")
    for k, v in med.items():
        print(f"  {k:20} {v:8.3f} s")
    print(f"  ratio {med['before (per client)'] / med['now (columns)']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
