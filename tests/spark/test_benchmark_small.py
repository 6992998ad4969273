"""benchmarks/spark_scaling.py --small does its whole job (not a timed test: the numbers are not
checked, only that the three runs finish and write the same rows)."""
from __future__ import annotations

import re
import subprocess
import sys

from tests.support import ROOT, require_module, require_path, require_tool


def test_spark_scaling_small(tmp_path):
    require_module("pyspark")
    require_tool("java")
    require_path(ROOT / "captures" / "codecs.pcap")
    corpus = tmp_path / "corpus"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spark_scaling.py"),
                           "--small", "--corpus", str(corpus)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert re.search(r"corpus: [2-9] files", out), out
    for run in ("single", r"local\[1\]", r"local\[2\]"):
        assert re.search(rf"^{run}\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+$", out, re.M), out
    for run in (r"local\[1\]", r"local\[2\]"):   # CPU per stage
        assert re.search(rf"^{run} stages: start .* decode [\d.]+ s wall / [\d.]+ s CPU", out,
                         re.M), out
    rows = re.search(r"rows per table \(all runs\): \{'exchanges': (\d+)", out)
    assert rows and int(rows[1]) > 1000, out
    assert "target local[2] >= 1.5x single:" in out
    assert not corpus.exists()   # deleted afterwards
