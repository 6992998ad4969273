"""Every capture string that reaches a terminal, through every command, byte for byte: control
characters and invalid UTF-8 escaped (dissector.text_safety's scheme), never markup.

The expected text is written out by hand in hostile.py (SHOWN, BAD_SHOWN), not computed by the
escape function under test."""
import io
import re
import time

import pytest

from dissector.cli import main
from tests.support import require_module

from . import hostile
from .hostile import BAD_SHOWN, SHOWN

# what must never reach the terminal: C0 controls but the newline, DEL, C1, bidi overrides
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    require_module("kio")
    require_module("kafka")
    return str(hostile.write(tmp_path_factory.mktemp("hostile") / "hostile.pcap"))


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert not _RAW.search(out) and not _RAW.search(err), (out, err)
    return status, out, err


def test_read(capture, capsys):
    status, out, _ = run(capsys, "read", capture)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == ("     1      0.000000  10.0.0.1:40001 \u2192 10.0.0.2:9092  SaslHandshake v1"
                        f"            corr=1  client={SHOWN}c  2.000 ms  ok  "
                        "UNSUPPORTED_SASL_MECHANISM")
    assert lines[5] == ("     6      0.055000  10.0.0.1:40002 \u2192 10.0.0.2:9092  Metadata v0"
                        f"                 corr=99  client={BAD_SHOWN}  2.000 ms  ok")


@pytest.mark.parametrize("exchange, fields", [
    (1, [f'client_id: "{SHOWN}c" [8+31]', f'mechanism: "{SHOWN}s" [39+31]',
         f'[0]: "{SHOWN}s" [10+31]']),
    (2, [f'transactional_id: "{SHOWN}x" [40+30]']),
    (3, [f'transactional_id: "{SHOWN}x" [40+30]', f'name: "{SHOWN}t" [77+30]',
         f'error_message: "{SHOWN}" [68+29]']),
    (4, [f'group_id: "{SHOWN}g" [40+30]', f'member_id: "{SHOWN}m" [',
         f'leader: "{SHOWN}m" [']),
    (5, [f'topic: "{SHOWN}t" [']),
    (6, [f'client_id: "{BAD_SHOWN}" [8+8]']),
])
def test_tree(capture, capsys, exchange, fields):
    status, out, _ = run(capsys, "tree", capture, "--exchange", str(exchange))
    assert status == 0
    lines = [line.strip() for line in out.splitlines()]
    for field in fields:
        assert any(line.startswith(field) for line in lines), field


def test_records_text(capture, capsys):
    status, out, _ = run(capsys, "records", capture)
    assert status == 0
    key_hex = hostile.KEY.hex()
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["produce", "fetch"]
    for line in lines:
        assert line.startswith(("produce ", "fetch   ")) and line[8:].startswith(f"{SHOWN}t[0]@0  ")
        assert f"  key=0x{key_hex}  " in line
        assert f"  headers[{SHOWN}h=0x" in line


def test_stats(capture, capsys):
    status, out, _ = run(capsys, "stats", capture, "--width", "400")
    assert status == 0
    words = {w for line in out.splitlines() for w in line.split()}
    for shown in (f"{SHOWN}c", f"{SHOWN}t", f"{SHOWN}g", f"{SHOWN}m"):
        assert shown in words, shown
    # the exports' and tables' text: U+FFFD for each bad sequence, as Wireshark shows it
    assert "bad\ufffd\ufffd\\x1b" in words


def test_live(capture):
    from dissector.capture.files import read_packets
    from dissector.live.rolling import RollingStats
    from dissector.live.runner import LiveCapture
    from dissector.live.stop import StopConditions
    from dissector.live.view import format_rows
    from dissector.output import make_writer
    from dissector.pipeline import Dissector
    from tests.live.test_runner import FakeSource

    # at the wall clock's time, as a live capture sees them (else they would be idle at once)
    packets = [(ts, bytes(data)) for _, ts, _, data in read_packets(capture)]
    shift = time.time_ns() - packets[0][0]
    packets = [(ts + shift, data) for ts, data in packets]
    out, err = io.StringIO(), io.StringIO()
    live = LiveCapture(FakeSource(packets), Dissector((9092,), level="bodies"),
                       make_writer("text", out), out, err, StopConditions(count=len(packets)),
                       label="test", stats=RollingStats(10.0))
    live.run()
    text = out.getvalue() + err.getvalue()
    assert not _RAW.search(text)
    assert f"  client={SHOWN}c  " in out.getvalue()
    assert f"  client={BAD_SHOWN}  " in out.getvalue()

    class Row:
        api, requests, rate, p50, p90, p99, max, errors, unanswered = (
            hostile.H, 1, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0)
    assert format_rows([Row()])[1].startswith(SHOWN[:28])


def test_error_messages(tmp_path, capsys):
    bad = tmp_path / f"{hostile.H.replace('/', '')}.pcap"   # a path has no "/" in a name
    bad.write_bytes(b"not a capture at all")
    status, _, err = run(capsys, "read", str(bad))
    assert status == 2
    assert f"{SHOWN.replace('/', '')}.pcap" in err
