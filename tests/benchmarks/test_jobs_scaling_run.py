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


def test_jobs_scaling_builds_from_another_capture():
    """--source: the corpus replicates that capture (here on one client host, as the run of
    clients that reconnect does with librdkafka's)."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "jobs_scaling.py"),
                           "--source", str(ROOT / "captures" / "codecs.pcap"), "--one-host",
                           "--size-mb", "3", "--levels", "records", "--rounds", "1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^built .*corpus-codecs-one-host\.pcap: [\d.]+ MB, \d+ packets, \d+ "
                     r"replicas of the source", proc.stdout, re.M), proc.stdout
    assert re.search(r"^records +2 +[\d.]+ ", proc.stdout, re.M), proc.stdout
