"""A terminal whose encoding cannot show every character (a latin-1 or ASCII locale): every
command prints every line, our arrow as "->" and a capture's printable non-ASCII text as its
escape (text_safety's \\uNNNN), never a UnicodeEncodeError. A UTF-8 terminal shows them as
they are."""
import os
import struct
import subprocess
import sys

import pytest

from tests.analysis.build import Capture, ms, request_bytes, response_bytes

CLIENT = "caf\u00e9-\u2615"   # é is latin-1, the cup is in no 8-bit code page


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    cap = Capture()
    c = cap.connection(ts=ms(0))
    c.request(ms(1), request_bytes(3, 1, 7, struct.pack(">i", -1), client_id=CLIENT))
    c.response(ms(2), response_bytes(7, struct.pack(">iii", 0, 1, 0)))
    return str(cap.write(tmp_path_factory.mktemp("ascii") / "cafe.pcap"))


def run(encoding, *argv):
    env = dict(os.environ, PYTHONIOENCODING=encoding)
    proc = subprocess.run([sys.executable, "-m", "dissector", *argv], capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    return proc.stdout.decode(encoding)


@pytest.mark.parametrize("encoding, shown, arrow", [
    ("ascii", "caf\\u00e9-\\u2615", "->"), ("latin-1", "caf\u00e9-\\u2615", "->"),
    ("utf-8", CLIENT, "\u2192")])
def test_every_line_in_any_encoding(capture, encoding, shown, arrow):
    line = run(encoding, "read", capture).splitlines()[0]
    assert f"10.0.0.1:40000 {arrow} 10.0.0.2:9092  Metadata v1" in line
    assert f"client={shown}  1.000 ms  ok" in line
    tree = run(encoding, "tree", capture, "--exchange", "1")
    assert f"40000 {arrow} 10.0.0.2" in tree and f'client_id: "{shown}"' in tree
    assert shown in run(encoding, "stats", capture, "--format", "markdown")
