"""`kafka-dissect browse`, driven headless through Textual's test pilot: the filter box (and its
errors), selecting an exchange, expanding its tree, the bytes highlighted for a field (checked
against the wire layout and against dissector.protocol.tree's offsets), sorting, hostile
strings, and a capture of 100,000 exchanges."""
import asyncio
import time

import pytest

from dissector.cli import build_parser
from tests.analysis import scenario
from tests.analysis.build import Capture, ms, request_bytes, response_bytes
from tests.support import require_module

from . import synthetic

require_module("textual")


def _app(*argv):
    from dissector.commands.browse import make_app
    return make_app(build_parser(["browse"]).parse_args(["browse", *map(str, argv)]))


async def _loaded(app, pilot, timeout=120.0):
    deadline = time.monotonic() + timeout
    while app.loading:
        assert time.monotonic() < deadline, "capture not loaded in time"
        await pilot.pause(0.05)
    await pilot.pause(0.1)


async def _settle(pilot):
    from dissector.browse.app import DECODE_DELAY_S
    await pilot.pause(DECODE_DELAY_S + 0.1)


def _list_lines(app):
    from dissector.browse.exchange_list import ExchangeList
    lst = app.query_one(ExchangeList)
    return ["".join(s.text for s in lst.render_line(y)) for y in range(lst.size.height)]


def _status(app):
    return str(app.query_one("#status").render())


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return scenario.write(tmp_path_factory.mktemp("browse") / "scenario.pcap")


def test_filter_box_filters_and_shows_errors_without_crashing(capture):
    async def go():
        app = _app(capture)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(app, pilot)
            assert len(app.rows) == 12 and "12 exchanges" in _status(app)
            await pilot.press("slash", *'api_name == "Fetch"', "enter")
            await pilot.pause(0.1)
            assert len(app.rows) == 3 and "3 of 12 exchanges" in _status(app)
            lines = [line for line in _list_lines(app) if line.strip()]
            assert len(lines) == 3 and all("Fetch v12" in line for line in lines)
            # a bad expression is reported in the status line; the rows stay as they were
            await pilot.press("slash", "ctrl+a", "ctrl+k", *"os.system('x')", "enter")
            await pilot.pause(0.1)
            assert "not allowed in a filter: function calls" in _status(app)
            assert len(app.rows) == 3
            await pilot.press("slash", "ctrl+a", "ctrl+k", "enter")   # empty: everything
            await pilot.pause(0.1)
            assert len(app.rows) == 12 and app.is_running
    asyncio.run(go())


def test_select_expand_and_the_highlighted_bytes(capture):
    from dissector.browse.hex_view import HIGHLIGHT, HexView
    from dissector.protocol.tree import request_tree

    async def go():
        app = _app(capture)
        async with app.run_test(size=(120, 50)) as pilot:
            await _loaded(app, pilot)
            await _settle(pilot)
            ex = app._shown   # the first exchange is selected on opening: Produce v9
            assert ex.index == 1 and str(app.query_one("#tree").root.label).startswith(
                "Exchange 1: Produce v9")
            tree = app.query_one("#tree")
            hexv = app.query_one(HexView)
            await pilot.press("enter")   # list -> tree
            assert app.focused is tree

            async def cursor_to(label_start):
                for _ in range(200):
                    if tree.cursor_node is not None and \
                            str(tree.cursor_node.label).startswith(label_start):
                        return tree.cursor_node
                    await pilot.press("down")
                raise AssertionError(f"no tree line starts with {label_start!r}")

            # request header v1 on the wire: api_key 0+2, api_version 2+2, correlation_id
            # 4+4, client_id 8+(2 + len("producer"))
            node = await cursor_to("client_id")
            await pilot.pause(0.05)
            assert hexv.highlight == (8, 18)
            assert hexv.highlighted_bytes() == b"\x00\x08producer"
            # the hex pane draws exactly those bytes highlighted, in hex and as text
            # (offsets 8-15 end the first line, 16-17 start the second)
            top = round(hexv.scroll_y)
            lit = ["".join(s.text for s in hexv.render_line(y - top) if s.style == HIGHLIGHT)
                   for y in (0, 1)]
            assert lit == ["00 08 70 72 6f 64 75 63" + "..produc", "65 72" + "er"]
            # every field of the request: the highlight is the tree's [offset, offset+length)
            root = request_tree(ex.request.data)
            expected = [(n.name, n.offset, n.length) for _, n in root.walk() if n is not root]
            assert node.data[3].offset == 8 and node.data[3].length == 10
            # a deep level opens on demand: topic_data [0] holds the topic name (compact
            # string: length + 1 as a varint, then the bytes)
            for label in ("topic_data", "[0]"):   # closed, their fields not made yet
                item = await cursor_to(label)
                assert not item.is_expanded and not item.children
                await pilot.press("space")
                await pilot.pause(0.05)
                assert item.is_expanded and item.children
            await pilot.press("down")
            assert str(tree.cursor_node.label).startswith("name")
            assert hexv.highlighted_bytes() == b"\x07orders"
            # then every field of the request, each opened in turn: the highlight is exactly
            # the [offset, offset + length) of protocol.tree's node for it
            await pilot.press("home")
            assert str(tree.cursor_node.label) == \
                "Connection 1: 10.0.0.1:40001 \u2192 10.0.0.2:9092, correlation id 1, ok"
            await pilot.press("down")
            assert str(tree.cursor_node.label).startswith("Request: ")   # the whole message
            assert hexv.highlight == (0, len(ex.request.data))
            seen = []
            while True:
                await pilot.press("down")
                item = tree.cursor_node
                direction, offset, length, n = item.data
                if direction != "request":
                    break
                assert hexv.highlight == (offset, offset + length)
                assert (n.name, n.offset, n.length) in expected
                seen.append((n.name, n.offset, n.length))
                if item.allow_expand and not item.is_expanded:
                    await pilot.press("space")
            assert sorted(seen) == sorted(expected)
    asyncio.run(go())


def test_sort_by_latency_and_reverse(capture):
    async def go():
        app = _app(capture)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(app, pilot)
            header = app.query_one("#header")
            for _ in range(9):   # s: the next column on screen
                if "Latency ms \u25b2" in str(header.render()):
                    break
                await pilot.press("s")
            assert "Latency ms \u25b2" in str(header.render())
            shown = [app.rows.exchange(r).latency_ms for r in range(len(app.rows))]
            answered = [v for v in shown if v is not None]
            assert answered == sorted(answered) and shown[0] is None   # unanswered first
            await pilot.press("r")
            assert app.rows.exchange(0).latency_ms == max(answered)   # the 501 ms long poll
            # a click on a header sorts by its column; on the same one again, the other way
            api_x = str(header.render()).index("API")
            await pilot.click("#header", offset=(api_x + 1, 0))
            names = [app.rows.cells(r)[4] for r in range(len(app.rows))]
            assert names == sorted(names) and "API \u25b2" in str(header.render())
            await pilot.click("#header", offset=(api_x + 1, 0))
            assert [app.rows.cells(r)[4] for r in range(len(app.rows))][0] == max(names)
    asyncio.run(go())


def test_capture_strings_are_escaped_in_the_list(tmp_path):
    cap = Capture()
    c = cap.connection()
    c.request(ms(1), request_bytes(18, 0, 1, client_id="[/]x\x1b[2J"))
    c.response(ms(2), response_bytes(1, b"\x00\x00\x00\x00\x00\x00"))
    path = cap.write(tmp_path / "hostile.pcap")

    async def go():
        app = _app(path)
        async with app.run_test(size=(120, 20)) as pilot:
            await _loaded(app, pilot)
            line = _list_lines(app)[0]
            assert "[/]x\\x1b[2J" in line and "\x1b" not in line
    asyncio.run(go())


def test_a_capture_of_100000_exchanges_opens_and_scrolls(tmp_path):
    path = synthetic.write(tmp_path / "many.pcap", 100_000)

    async def go():
        app = _app(path)
        start = time.monotonic()
        async with app.run_test(size=(100, 30)) as pilot:
            while not len(app.rows):   # the first rows show while the rest is read
                await pilot.pause(0.05)
            first = time.monotonic() - start
            await _loaded(app, pilot)
            loaded = time.monotonic() - start
            assert len(app.rows) == 100_000
            await pilot.press("end")
            await _settle(pilot)
            assert app._shown.index == 100_000
            await pilot.press("slash", *"error_code == 35", "enter")
            await pilot.pause(0.1)
            assert len(app.rows) == 10_000
        return first, loaded

    first, loaded = asyncio.run(go())
    print(f"100k exchanges: first rows after {first:.2f} s, all after {loaded:.2f} s")
    assert first < loaded and loaded < 120


def test_secrets_are_masked_in_tree_and_bytes_unless_asked(tmp_path):
    from dissector.browse.hex_view import HexView
    from tests.safety.test_secrets import PASSWORD, write_secrets_capture
    path = write_secrets_capture(tmp_path / "secrets.pcap")

    def labels(node):
        out = [str(node.label)]
        for child in node.children:
            out += labels(child)
        return out

    async def shown(*extra):
        app = _app(path, *extra)
        async with app.run_test(size=(120, 40)) as pilot:
            await _loaded(app, pilot)
            await pilot.press("down")   # exchange 2: AlterConfigs setting ssl.key.password
            await _settle(pilot)
            assert app._shown.index == 2
            tree = app.query_one("#tree")

            def open_all(item):   # as if every level were opened
                if item.data is not None:
                    app._fill(item)
                item.expand()
                for child in item.children:
                    open_all(child)
            open_all(tree.root)
            await pilot.pause(0.05)
            hexv = app.query_one(HexView)
            frame, hidden = app._parts["request"]
            hexv.show(frame.data, hidden=hidden)
            dump = ["".join(s.text for s in hexv.render_line(y))
                    for y in range(hexv.virtual_size.height)]
            return "\n".join(labels(tree.root)), "\n".join(dump)

    labels_text, dump = asyncio.run(shown())
    assert PASSWORD not in labels_text and "<masked>" in labels_text
    assert PASSWORD.encode().hex(" ") not in dump and "*******" in dump and "hunter" not in dump
    labels_text, dump = asyncio.run(shown("--show-secrets"))
    assert PASSWORD in labels_text


def test_live_on_loopback(tmp_path):
    """browse --live: exchanges from the interface join the list as their responses arrive."""
    import socket
    import threading

    from tests.live.test_runner import api_versions_request
    from tests.live.test_view import _fake_broker
    from tests.support import require_root
    require_root()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    async def go():
        app = _app("--live", "-i", "lo", "--port", port)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause(0.5)   # the socket is open before the first packet
            broker = threading.Thread(target=_fake_broker, args=(srv, time.monotonic() + 10))
            broker.start()

            def client():
                with socket.create_connection(("127.0.0.1", port)) as c:
                    for corr in (1, 2, 3):
                        c.sendall(api_versions_request(corr))
                        c.recv(4096)
            await asyncio.get_running_loop().run_in_executor(None, client)
            deadline = time.monotonic() + 20
            while len(app.rows) < 3 and time.monotonic() < deadline:
                await pilot.pause(0.1)
            assert [app.rows.exchange(r).correlation_id for r in range(len(app.rows))] == \
                [1, 2, 3]
            assert "live on lo" in _status(app) and "3 exchanges" in _status(app)
            await _settle(pilot)
            assert str(app.query_one("#tree").root.label).startswith("Exchange 1: ApiVersions")
            broker.join(15)
        app.stop_source()
        assert app.source_finished.wait(5)   # the capture loop ends with the app
        app.close_source()
    try:
        asyncio.run(go())
    finally:
        srv.close()


def test_rows_coloured_by_status(capture):
    from dissector.browse.exchange_list import ExchangeList

    async def go():
        app = _app(capture)
        async with app.run_test(size=(120, 30)) as pilot:
            await _loaded(app, pilot)
            lst = app.query_one(ExchangeList)
            colours = {}
            for y in range(len(app.rows)):
                ex = app.rows.exchange(y)
                style = lst.render_line(y).__iter__().__next__().style
                colours[(ex.status, bool(ex.error_code))] = style.color.name if style.color \
                    else None
            assert colours == {("ok", False): None, ("ok", True): "red",
                               ("unanswered", False): "yellow"}
    asyncio.run(go())


class _Terminal:
    """The real command on a pseudo-terminal, in a session of its own: `pump` reads what it
    draws until a text shows, `text()` is what was drawn without the escape sequences."""

    def __init__(self, capture):
        import os
        import pty
        import subprocess
        import sys

        from tests.support import ROOT
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dissector", "browse", str(capture)], cwd=ROOT, stdin=slave,
            stdout=slave, stderr=slave, start_new_session=True,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"})
        os.close(slave)
        self.screen = b""

    def text(self):
        import re
        return re.sub(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b[@-_]", b"", self.screen)

    def pump(self, seconds, until):
        import os
        import select
        end = time.monotonic() + seconds
        while time.monotonic() < end and until not in self.text():
            if select.select([self.master], [], [], 0.1)[0]:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    return

    def drawn(self):
        self.pump(60, b"12 exchanges")
        self.pump(60, b"Produce v9")   # the rows may be painted after the status line counting them
        assert b"12 exchanges" in self.text() and b"Produce v9" in self.text(), \
            self.text()[-3000:]

    def close(self):
        import os
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.master is not None:
            os.close(self.master)


def test_runs_in_a_plain_terminal_and_quits_on_q(capture):
    """The real command on a pseudo-terminal, as over SSH: it draws, and q ends it cleanly."""
    import os
    term = _Terminal(capture)
    try:
        term.drawn()
        os.write(term.master, b"q")
        assert term.proc.wait(30) == 0
    finally:
        term.close()


def test_ends_when_its_terminal_goes_away(capture):
    """The terminal closed under a browser in a session of its own (no SIGHUP reaches it): it
    ends within seconds instead of reading the end of its input in a loop."""
    import os
    term = _Terminal(capture)
    try:
        term.drawn()
        os.close(term.master)
        term.master = None
        assert term.proc.wait(15) == 0
    finally:
        term.close()


def test_not_a_terminal_and_bad_arguments_are_usage_errors(capture, capsys):
    from dissector.cli import main
    assert main(["browse", str(capture)]) == 2          # pytest's stdout is not a terminal
    assert "browse needs a terminal" in capsys.readouterr().err
    from dissector.cli import UsageError
    for argv in ([], ["--live"], ["--live", "-i", "lo", str(capture)], ["nope.pcap"]):
        with pytest.raises(UsageError):
            _app(*argv)


def test_tls_capture_with_its_key_log(tmp_path):
    """A TLS capture (OpenSSL's bytes, tests/tls/tlsgen.py) browses as its plaintext twin with
    --keylog, and says what it could not decrypt without, and where the brokers are when the port
    is wrong."""
    from dissector.pipeline import dissect
    from tests.support import ROOT
    from tests.tls import tlsgen
    require_module("cryptography")
    require_module("dpkt")
    plain = ROOT / "captures" / "kafka_python.pcap"
    out, keys = tmp_path / "tls.pcap", tmp_path / "keys.log"
    tlsgen.make(str(plain), str(out), str(keys), 9092)
    # the same exchanges (tlsgen lays the connections out one after another: compared as sets)
    expected = sorted((ex.api_key, ex.correlation_id, ex.client_id) for ex in dissect(plain))

    async def go(*extra, port=("--port", "9093")):
        app = _app(out, *port, *extra)
        async with app.run_test(size=(120, 30)) as pilot:
            await _loaded(app, pilot)
            got = sorted((ex.api_key, ex.correlation_id, ex.client_id)
                         for ex in app.rows.exchanges)
            return got, _status(app)

    got, status = asyncio.run(go("--keylog", keys))
    assert got == expected and "not decrypted" not in status
    got, status = asyncio.run(go())
    assert got == [] and "not decrypted: pass --keylog FILE" in status
    got, status = asyncio.run(go("--keylog", keys, port=()))   # nothing on 9092: where to look
    assert got == [] and "no TCP on port 9092; TCP servers in the capture: 9093" in status


def test_issues_shown_in_the_list_and_the_tree(tmp_path):
    cap = Capture()
    c = cap.connection()
    # Metadata v1 whose topics array claims 5 entries and holds none: a truncated body
    c.request(ms(1), request_bytes(3, 1, 7, body=b"\x00\x00\x00\x05"))
    c.response(ms(2), response_bytes(7, b""))
    path = cap.write(tmp_path / "bad.pcap")

    async def go():
        app = _app(path)
        async with app.run_test(size=(200, 30)) as pilot:
            await _loaded(app, pilot)
            await _settle(pilot)
            ex = app.rows.exchange(0)
            assert ex.issues
            code = ex.issues[0].code
            n = len(ex.issues)
            assert f" [{n} issue{'s' if n > 1 else ''}: {code}]" in _list_lines(app)[0]
            leaves = [str(n.label) for n in app.query_one("#tree").root.children]
            assert any(label.startswith(f"Issue: {code} (") for label in leaves)
    asyncio.run(go())
