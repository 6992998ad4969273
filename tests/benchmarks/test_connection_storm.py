"""benchmarks/connection_storm.py: the capture it builds holds what its doc says (read back with
dpkt), and a short run ends with both tools counting the conversation's Kafka messages alike."""
import re
import subprocess
import sys
from collections import Counter

import dpkt

from tests.support import ROOT, require_tool

sys.path.insert(0, str(ROOT))
from benchmarks import connection_storm as storm  # noqa: E402


def _kinds(path):
    """Per client address of the storm, its packets' TCP flags in order."""
    flows = {}
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = ip.data
            client = ip.src if tcp.dport == storm.PORT else ip.dst
            if client[0] == 10:
                flows.setdefault(client, []).append(tcp.flags)
    return flows


def test_the_storm_is_floods_refusals_and_probes(tmp_path):
    path = tmp_path / "storm.pcap"
    packets = storm.build(path, 300)
    flows = _kinds(path)
    assert len(flows) == 300   # an address each
    S, A, F, R = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_FIN, dpkt.tcp.TH_RST
    kinds = Counter(tuple(flags) for flags in flows.values())
    assert kinds == {(S,): 100, (S, R | A): 100, (S, S | A, A, F | A, F | A, A): 100}
    with open(storm.CONVERSATION, "rb") as f:
        conversation = sum(1 for _ in dpkt.pcap.Reader(f))
    assert packets == 100 * 9 + conversation
    with open(path, "rb") as f:
        times = [ts for ts, _ in dpkt.pcap.Reader(f)]
    assert times == sorted(times) and len(times) == packets


def test_a_short_run_counts_alike(tmp_path):
    require_tool("tshark")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "connection_storm.py"),
                           "--attempts", "600", "--rounds", "1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"x tshark; Kafka messages (\d+)", proc.stdout)
    assert m and int(m[1]) > 20, proc.stdout
    assert "capture: 600 attempts" in proc.stdout
