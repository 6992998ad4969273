"""benchmarks/decode_bodies.py runs end to end on the real captures (not a timed test: only that
it compares the same messages with kio and prints its ratio and the body stage)."""
import re
import subprocess
import sys

from tests.support import ROOT, require_module


def test_decode_bodies_runs():
    require_module("kio")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "decode_bodies.py"),
                           "--repeat", "1", "--copies", "1", "--stage"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    head = re.search(r"(\d+) messages from (\d+) captures; (\d+) that kio also reads", proc.stdout)
    assert head, proc.stdout
    total, captures, comparable = map(int, head.groups())
    assert captures >= 6 and 0 < comparable <= total
    assert re.search(r"ratio ours/kio: [\d.]+x", proc.stdout)
    stage = re.search(rf"body stage .*: {total} messages, ([\d.]+) us per message", proc.stdout)
    assert stage and float(stage.group(1)) > 0
