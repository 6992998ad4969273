"""`kafka-dissect` as a user runs it, on mutated real captures: exit status 0 or 2, never a
traceback or an internal error, and a status-2 run says what is wrong in one line per file."""
import gzip
import random
import subprocess
import sys

from hypothesis import given, strategies as st

from tests.support import ROOT

from .support import REAL, fuzz_settings, mutate, packets, write_pcap, write_pcapng

COMMANDS = [
    ["read"],
    ["read", "--format", "jsonl", "--bodies", "--level", "records"],
    ["read", "--format", "csv", "--level", "headers"],
    ["records", "--format", "jsonl"],
    ["stats"],
    ["tree", "--exchange", "1"],
    ["tree", "--exchange", "3"],
]


@fuzz_settings(12)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32), fmt=st.sampled_from(
    ["pcap", "pcapng"]), zipped=st.booleans(), damage_file=st.booleans(),
    command=st.sampled_from(COMMANDS))
def test_cli_on_mutated_captures(tmp_path_factory, which, seed, fmt, zipped, damage_file, command):
    rnd = random.Random(seed)
    pkts = list(packets(which))
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(len(pkts))
        ts, lt, data = pkts[i]
        pkts[i] = (ts, lt, mutate(data, rnd, 3))
    raw = write_pcap(pkts) if fmt == "pcap" else write_pcapng(pkts)
    if damage_file:
        raw = mutate(raw, rnd, 2)
    path = tmp_path_factory.mktemp("cli") / "fuzzed.cap"
    path.write_bytes(gzip.compress(raw) if zipped else raw)
    argv = [sys.executable, "-m", "dissector", *command, str(path), "--port", "auto"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "internal error" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr[-3000:])
    if proc.returncode == 2:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("kafka-dissect:")]
        assert errors and all(str(path) in line for line in errors), proc.stderr


@fuzz_settings(6)
@given(which=st.sampled_from(REAL), tsresol=st.integers(0, 255),
       tsoffset=st.integers(-2**63, 2**63 - 1), base=st.integers(0, 2**64 - 1000),
       command=st.sampled_from([c for c in COMMANDS if c[0] != "stats"]))
def test_cli_on_hostile_timestamps(tmp_path_factory, which, tsresol, tsoffset, base, command):
    """pcapng timestamps of any resolution and offset (found: years past 9999 crashed jsonl)."""
    from tests.capture import build
    pkts = packets(which)[:40]
    raw = build.shb("<") + build.idb("<", 1, tsresol=tsresol, tsoffset=tsoffset) + b"".join(
        build.epb("<", 0, base + i, data) for i, (_, _, data) in enumerate(pkts))
    path = tmp_path_factory.mktemp("ts") / "ts.pcapng"
    path.write_bytes(raw)
    argv = [sys.executable, "-m", "dissector", *command, str(path), "--port", "auto"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr)
