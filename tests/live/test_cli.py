"""`kafka-dissect live` as a user runs it: refusals with exit status 2, timed stops."""
import os
import subprocess
import sys
from pathlib import Path

from dissector.capture.files import read_packets
from tests.support import ROOT, require_root, require_tool


def live(*args, timeout=60, prefix=()):
    return subprocess.run([*prefix, sys.executable, "-m", "dissector", "live", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _refused(proc):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka-dissect: error: ")
    return lines[0]


def test_unknown_interface_names_the_ones_there_are():
    line = _refused(live("-i", "nosuchif0", "--duration", "1"))
    assert "nosuchif0" in line
    for name in os.listdir("/sys/class/net"):     # the kernel's own list of interfaces
        assert name in line


def test_without_cap_net_raw_says_what_is_needed():
    require_root()
    setpriv = require_tool("setpriv")
    # root without CAP_NET_RAW (dropped from the bounding set): the capability is what matters
    line = _refused(live("-i", "lo", "--duration", "1",
                         prefix=(setpriv, "--bounding-set", "-net_raw", "--inh-caps", "-net_raw")))
    assert "CAP_NET_RAW" in line and "root" in line


def test_bad_bpf_expression_is_refused():
    require_root()
    line = _refused(live("-i", "lo", "--bpf", "tcp port port", "--duration", "1"))
    assert "--bpf" in line


def test_bad_numbers_are_refused():
    for args in (("--count", "0"), ("--duration", "-1"), ("--port", "http")):
        _refused(live("-i", "lo", *args))


def test_duration_stops_with_summary_and_a_valid_file(tmp_path):
    require_root()
    out = tmp_path / "idle.pcapng"
    # a port nothing listens on: no packets, but the file must still be a whole pcapng
    proc = live("-i", "lo", "--port", "9", "--duration", "1", "--write", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "listening on lo" in proc.stderr
    assert "stopped (duration)" in proc.stderr
    assert "0 dropped" in proc.stderr
    assert list(read_packets(str(out))) == []
    assert Path(out).stat().st_size > 0
