"""The rolling view: redrawn in place on a terminal, pinned under the exchanges."""
import io
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from dissector.live.view import PeriodicStats, TerminalView
from tests.live.test_runner import api_versions_request, api_versions_response
from tests.support import ROOT, require_root


def test_terminal_view_redraws_in_place_and_gets_out_of_the_way():
    err = io.StringIO()
    view = TerminalView(err, shares_output=True, refresh=0)
    view.show(["first", "table"])
    assert err.getvalue() == "first\ntable\n"
    view.show(["second", "table", "row"])
    # cursor up over the two drawn lines, clear to the end of the screen, draw anew
    assert err.getvalue().endswith("\x1b[2F\x1b[Jsecond\ntable\nrow\n")
    before = len(err.getvalue())
    view.before_output()        # exchanges are about to be written to the same terminal
    assert err.getvalue()[before:] == "\x1b[3F\x1b[J"
    view.after_output()         # and the view comes back under them
    assert err.getvalue().endswith("\x1b[3F\x1b[Jsecond\ntable\nrow\n")
    view.close()
    assert err.getvalue().endswith("row\n\x1b[3F\x1b[J")


def test_view_on_another_stream_is_not_erased_for_output():
    err = io.StringIO()
    view = TerminalView(err, shares_output=False, refresh=0)
    view.show(["x"])
    view.before_output()
    view.after_output()
    assert err.getvalue() == "x\n"


def test_periodic_stats_are_plain_text():
    err = io.StringIO()
    stats = PeriodicStats(err, every=0)
    stats.show(["a", "b"])
    assert err.getvalue() == "a\nb\n" and "\x1b" not in err.getvalue()


def _fake_broker(srv, stop_at):
    """Answer ApiVersions v0 requests on one connection until stop_at."""
    conn, _ = srv.accept()
    with conn:
        conn.settimeout(0.2)
        while time.monotonic() < stop_at:
            try:
                data = conn.recv(4096)
            except socket.timeout:
                continue
            if not data:
                return
            corr = int.from_bytes(data[8:12], "big")
            conn.sendall(api_versions_response(corr))


def test_live_on_a_terminal_keeps_the_view_under_the_exchanges():
    require_root()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dissector", "live", "-i", "lo", "--port",
                             str(port), "--stats-every", "5"],
                            cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
                            env={**os.environ, "COLUMNS": "150"}, start_new_session=True)
    os.close(slave)
    screen = b""

    def pump(seconds, until=None):
        nonlocal screen
        end = time.monotonic() + seconds
        while time.monotonic() < end and (until is None or until not in screen):
            if select.select([master], [], [], 0.1)[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    return

    try:
        pump(30, until=b"listening on lo")
        broker = threading.Thread(target=_fake_broker, args=(srv, time.monotonic() + 10))
        broker.start()
        with socket.create_connection(("127.0.0.1", port)) as client:
            for corr in (1, 2, 3):
                client.sendall(api_versions_request(corr))
                client.recv(4096)
        broker.join(15)
        pump(2, until=b"ApiVersions                  ")
        pump(1)
        proc.send_signal(signal.SIGINT)
        pump(10, until=b"exchanges: 3")
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        srv.close()
    text = screen.decode(errors="replace")
    assert text.count("ApiVersions v0") == 3                      # each exchange printed once
    assert "\x1b[J" in text                                         # the view was redrawn in place
    last_view = text.rindex("live on lo")
    assert text.rindex("corr=3") < last_view                        # exchanges above the view
    view_row = text[last_view:].split("ApiVersions", 1)[1].split()
    assert view_row[0] == "3"                                       # 3 requests in the window
    assert "stopped (interrupted)" in text and "exchanges: 3 (ok 3)" in text


def test_rows_fit_the_terminal_without_cutting_names():
    from dissector.live.rolling import Row
    from dissector.live.view import format_rows
    rows = [Row("DescribeUserScramCredentials", 123456, 1234.5, [0.21, 0.5, 3003.3], 3003.3, 12,
                0),
            Row("Produce", 5, 0.5, [None, None, None], None, 0, 5),
            Row("x\x1b[2J", 1, 0.1, [1.0, 2.0, 3.0], 4.0, 0, 0)]
    wide = format_rows(rows)                     # not a terminal: as wide as the content
    assert wide[0].split() == ["api", "requests", "req/s", "p50", "ms", "p90", "ms", "p99", "ms",
                               "max", "ms", "errors", "no", "reply"]
    assert wide[1].split()[:4] == ["DescribeUserScramCredentials", "123456", "1234", "0.210"]
    assert "x\\x1b[2J" in wide[3] and "\x1b" not in "".join(wide)
    narrow = format_rows(rows, 79)
    assert max(map(len, narrow)) <= 79
    assert "p90" not in narrow[0]                # the detail column made room first
    # the long name wraps onto the next line, whole
    first = narrow[1].split()[0]
    assert first + narrow[2].strip() == "DescribeUserScramCredentials"
