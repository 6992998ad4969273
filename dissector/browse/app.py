"""The browser's screen: filter box, exchange list, field tree and bytes, stacked as in
Wireshark, all driven from the keyboard (the footer lists the keys)."""
from __future__ import annotations

import select
import sys
import threading

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Input, Static, Tree

from ..commands.tree import _label, exchange_trees
from ..protocol.names import api_name
from ..text_safety import escape
from .exchange_list import ExchangeList, column_at, header_text, layout
from .hex_view import HexView
from .rows import ExchangeRows

DECODE_DELAY_S = 0.05   # a tree is decoded once the cursor rests, not for every row passed
EXPANDED_DEPTH = 2      # tree levels open when an exchange is selected
TERMINAL_CHECK_S = 1.0  # how often the browser looks whether its terminal is still there


class BrowseApp(App):
    """feed(app) runs in a thread and hands exchanges over with app.add_exchanges and ends with
    app.source_done(message), both callable from that thread."""

    TITLE = "kafka-dissect browse"
    CSS = """
    #filter { height: 1; border: none; padding: 0 1; }
    #status { height: 1; background: $panel; padding: 0 1; }
    #header { height: 1; text-style: bold; }
    ExchangeList { height: 2fr; }
    #tree { height: 2fr; border-top: solid $primary; }
    HexView { height: 1fr; border-top: solid $primary; }
    """
    BINDINGS = [
        Binding("/", "focus_filter", "Filter"),
        Binding("escape", "focus_list", "List", show=False),
        Binding("enter", "focus_tree", "Tree", show=False),
        Binding("s", "sort", "Sort"),
        Binding("r", "reverse", "Reverse"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, feed, description: str, show_secrets: bool = False):
        super().__init__()
        self.show_secrets = show_secrets
        self.rows = ExchangeRows()
        self.feed = feed
        self.description = description
        self.loading = True
        self.note = ""
        self._parts = {}   # direction -> (frame, hidden bytes) of the exchange in the tree
        self._shown = None
        self._decode_timer = None
        self.stop_source = lambda: None    # set by a live feed: ends its capture loop
        self.close_source = lambda: None   # set by the command: releases the interface
        self.source_finished = threading.Event()

    def compose(self) -> ComposeResult:
        yield Input(placeholder='filter, e.g. api_name == "Fetch" and latency_ms > 100  '
                                '(Enter applies, empty shows all)', id="filter")
        yield Static(id="status")
        yield Static(id="header")
        yield ExchangeList(self.rows, id="list")
        tree = Tree(Text("no exchange selected"), id="tree")
        tree.show_root = False
        yield tree
        yield HexView(id="hex")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ExchangeList).focus()
        self._update_status()
        self.run_worker(self._run_feed, thread=True, exclusive=True, name="source")
        if not self.is_headless:
            self.set_interval(TERMINAL_CHECK_S, self._check_terminal)

    def _check_terminal(self) -> None:
        """Quit once the terminal is gone. Its hang-up reaches a browser that is in the
        terminal's session as SIGHUP; one started in a session of its own (a harness, a
        service) would go on, Textual's input thread reading the end of the file in a loop
        (most of a CPU)."""
        if terminal_gone(sys.__stdin__):
            self.exit()

    def _run_feed(self) -> None:
        try:
            self.feed(self)
        finally:
            self.source_finished.set()

    def on_unmount(self) -> None:
        self.stop_source()

    def on_resize(self, event) -> None:
        self._update_header()

    # -- rows arriving (from the source's thread) ------------------------------------------

    class Arrived(Message):
        def __init__(self, exchanges=None, done=None) -> None:
            super().__init__()
            self.exchanges = exchanges
            self.done = done   # the source ended: "" or a message to show

    # post_message is thread-safe and never waits: a source still running when the app has
    # closed hands over to nobody instead of hanging
    def add_exchanges(self, exchanges) -> None:
        self.post_message(self.Arrived(exchanges=list(exchanges)))

    def source_done(self, message: str = "") -> None:
        self.post_message(self.Arrived(done=message))

    def on_browse_app_arrived(self, event: Arrived) -> None:
        if event.exchanges is not None:
            self._add(event.exchanges)
        if event.done is not None:
            self._done(event.done)

    def _add(self, exchanges) -> None:
        first = not len(self.rows)
        self.rows.add(exchanges)
        lst = self.query_one(ExchangeList)
        lst.rows_changed(lst.selected())
        if first and len(self.rows):
            lst.cursor = 0
        self._update_status()

    def _done(self, message: str) -> None:
        self.loading = False
        self.note = message
        self._update_status()

    # -- status line and header ---------------------------------------------------------------

    def _update_status(self) -> None:
        total = len(self.rows.exchanges)
        text = Text(f"{escape(self.description)}  ")
        text.append(f"{len(self.rows)} of {total} exchanges" if self.rows.keep else
                    f"{total} exchanges")
        if self.loading:
            text.append("  (reading\u2026)")
        if self.note:
            text.append("  ")
            text.append(escape(self.note), style="bold red")
        self.query_one("#status", Static).update(text)
        self._update_header()

    def _update_header(self) -> None:
        width = self.query_one(ExchangeList).scrollable_content_region.width or self.size.width
        self.query_one("#header", Static).update(
            Text(header_text(width, self.rows.sort_column, self.rows.descending)))

    # -- filter and sort ---------------------------------------------------------------------

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_list(self) -> None:
        self.query_one(ExchangeList).focus()

    def action_focus_tree(self) -> None:
        if self.focused is self.query_one(ExchangeList):
            self.query_one("#tree", Tree).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        lst = self.query_one(ExchangeList)
        keep = lst.selected()
        try:
            self.rows.set_filter(event.value)
            self.note = ""
        except ValueError as exc:   # shown, the rows stay as they were
            self.note = str(exc)
        lst.rows_changed(keep)
        self._update_status()
        lst.focus()

    def on_click(self, event) -> None:
        """A click on a column's header sorts by it (again: the other way round)."""
        if event.widget is not self.query_one("#header", Static):
            return
        col = column_at(self.query_one(ExchangeList).scrollable_content_region.width, event.x)
        if col is not None:
            same = col == self.rows.sort_column
            self._resort(col, not self.rows.descending if same else False)

    def action_sort(self) -> None:
        """Sort by the next column on screen (narrow terminals leave some out)."""
        lst = self.query_one(ExchangeList)
        shown = [col for col, _ in layout(lst.scrollable_content_region.width or self.size.width)]
        later = [col for col in shown if col > self.rows.sort_column]
        self._resort(later[0] if later else shown[0], self.rows.descending)

    def action_reverse(self) -> None:
        self._resort(self.rows.sort_column, not self.rows.descending)

    def _resort(self, column: int, descending: bool) -> None:
        lst = self.query_one(ExchangeList)
        keep = lst.selected()
        self.rows.sort_by(column, descending)
        lst.rows_changed(keep)
        self._update_header()

    # -- the selected exchange's tree and bytes -----------------------------------------------

    def on_exchange_list_highlighted(self, event: ExchangeList.Highlighted) -> None:
        if self._decode_timer is not None:
            self._decode_timer.stop()
        self._decode_timer = self.set_timer(DECODE_DELAY_S, lambda: self.show_exchange(
            event.exchange))

    def show_exchange(self, ex) -> None:
        """Decode the exchange's request and response into the tree (the first levels open)."""
        if ex is self._shown:
            return
        self._shown = ex
        tree = self.query_one("#tree", Tree)
        tree.clear()
        title = "SASL token (raw)" if ex.raw_sasl else (
            f"{api_name(ex.api_key)} v{ex.api_version}" if ex.api_key is not None else "unknown")
        tree.root.set_label(Text(f"Exchange {ex.index}: {title}"))
        c = ex.connection
        tree.root.add_leaf(Text(f"Connection {c.connection_id}: {c.client_ip}:{c.client_port} "
                                f"\u2192 {c.broker_ip}:{c.broker_port}, correlation id "
                                f"{ex.correlation_id}, {ex.status}"))
        for issue in ex.issues:
            tree.root.add_leaf(Text(f"Issue: {issue.code} ({issue.severity}) at stream offset "
                                    f"{issue.stream_offset}: {escape(issue.detail)}",
                                    style="yellow"))
        self._parts = {}
        for direction, frame, root, hidden in exchange_trees(ex, self.show_secrets):
            self._parts[direction] = (frame, hidden)
            label = (f"{direction.capitalize()}: {len(frame.data)} bytes, packets "
                     f"{frame.first_packet}-{frame.last_packet}")
            top = tree.root.add(Text(label), data=(direction, 0, len(frame.data), None),
                                expand=True)
            if root is None:
                top.add_leaf(Text("(no Kafka header: raw bytes)"),
                             data=(direction, 0, len(frame.data), None))
            else:
                for child in root.children:
                    self._add_node(top, direction, child, 1)
        first = next(iter(self._parts.values()), None)
        if first is not None:
            self.query_one(HexView).show(first[0].data, hidden=first[1])

    def _add_node(self, parent, direction, node, depth) -> None:
        data = (direction, node.offset, node.length, node)
        label = Text(_label(node))   # _label escapes the values from the capture
        if not node.children:
            parent.add_leaf(label, data=data)
            return
        item = parent.add(label, data=data, expand=depth < EXPANDED_DEPTH)
        if depth < EXPANDED_DEPTH:
            self._fill(item)

    def _fill(self, item) -> None:
        """Add a tree item's children (done when it is first opened: big messages have
        thousands of fields)."""
        direction, _, _, node = item.data
        if node is None or item.children:
            return
        depth = 0
        up = item
        while up.parent is not None:
            depth += 1
            up = up.parent
        for child in node.children:
            self._add_node(item, direction, child, depth)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        if event.node.data is not None:
            self._fill(event.node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data is None:
            return
        direction, offset, length, _ = event.node.data
        part = self._parts.get(direction)
        if part is not None:
            self.query_one(HexView).show(part[0].data, offset, offset + length, part[1])


def terminal_gone(stream) -> bool:
    """Whether the terminal `stream` reads from was hung up (the other end of its
    pseudo-terminal closed: it is no longer a terminal then, os.isatty says)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLIN)
        return any(events & (select.POLLHUP | select.POLLERR | select.POLLNVAL)
                   for _, events in poller.poll(0))
    except (AttributeError, ValueError, OSError):   # closed, or no stdin at all
        return True
