"""benchmarks/jobs_scaling.py runs end to end on a shipped capture (its numbers are not checked:
only that it compares the outputs, measures both levels, the records table and export, the
machine's own scaling, and says its verdict)."""
import re
import subprocess
import sys

from tests.support import ROOT


def test_jobs_scaling_runs():
    capture = ROOT / "captures" / "codecs.mss1448.pcap"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "jobs_scaling.py"),
                           "--corpus", str(capture), "--rounds", "1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "outputs byte-identical" in out
    for level in ("bodies", "records", "table", "parquet", "export"):
        assert re.search(rf"^{level} +2 +[\d.]+ +[\d.]+ +[\d.]+x +[\d.]+ +[\d.]+x +[\d.]+x$",
                         out, re.M), out
        assert re.search(rf"^round 1/1 {level} +2 x --jobs 1 side by side: wall +[\d.]+ s$",
                         out, re.M), out
    each = r"[\d.]+x wall \([\d.]+x CPU bound, [\d.]+x machine\)"
    assert re.search(rf"^verdict: --jobs 2: bodies {each}, records {each}, table {each}, "
                     rf"parquet {each}, export {each}; target 1.7x with 2 workers \(bodies, "
                     r"records, table, parquet\): (met|MISSED) on wall time$", out, re.M), out
