"""The exchange list: a line-API widget that draws only the rows on screen, so 100,000
exchanges cost no more to show than twenty."""
from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .rows import COLUMNS, ExchangeRows, row_colour

# shown first when the terminal is narrow (the others join as it widens), in COLUMNS positions
PRIORITY = (0, 4, 7, 8, 6, 1, 5, 2, 3)
STATUS_MIN = 12


def layout(width: int) -> list[tuple[int, int]]:
    """(column, width) pairs in display order that fit `width` (one space between columns);
    the last column, Status, takes what is left."""
    chosen, used = [], STATUS_MIN
    for col in PRIORITY:
        w = COLUMNS[col][1]
        if col == len(COLUMNS) - 1:
            continue
        if used + w + 1 <= width:
            chosen.append(col)
            used += w + 1
    chosen = sorted(chosen) + [len(COLUMNS) - 1]
    widths = [COLUMNS[c][1] for c in chosen[:-1]]
    return list(zip(chosen, widths + [max(width - sum(widths) - len(widths), 1)]))


def _fit(text: str, width: int, right: bool) -> str:
    if len(text) > width:
        text = text[:width - 1] + "\u2026" if width > 1 else text[:width]
    return text.rjust(width) if right else text.ljust(width)


def header_text(width: int, sort_column: int, descending: bool) -> str:
    parts = []
    for col, w in layout(width):
        name = COLUMNS[col][0] + ((" \u25bc" if descending else " \u25b2")
                                  if col == sort_column else "")
        parts.append(_fit(name, w, COLUMNS[col][2]))
    return " ".join(parts)


def column_at(width: int, x: int) -> int | None:
    """The column drawn at character x of a header or row `width` wide."""
    at = 0
    for col, w in layout(width):
        if at <= x < at + w:
            return col
        at += w + 1
    return None


class ExchangeList(ScrollView, can_focus=True):
    """Rows of an ExchangeRows; the cursor row's exchange is announced with Highlighted."""

    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]
    DEFAULT_CSS = "ExchangeList { height: 1fr; overflow-x: hidden; }"

    cursor = reactive(0, always_update=True)

    class Highlighted(Message):
        def __init__(self, exchange) -> None:
            super().__init__()
            self.exchange = exchange

    def __init__(self, rows: ExchangeRows, **kwargs):
        super().__init__(**kwargs)
        self.rows = rows

    def rows_changed(self, keep_cursor_on=None) -> None:
        """The rows were added, filtered or sorted: resize, and keep the cursor on the same
        exchange when it is still shown."""
        self.virtual_size = Size(0, len(self.rows))
        row = None
        if keep_cursor_on is not None:
            row = self.rows.row_of(keep_cursor_on.index)
        self.cursor = min(row if row is not None else self.cursor, max(len(self.rows) - 1, 0))
        self.refresh()

    def selected(self):
        return self.rows.exchange(self.cursor) if len(self.rows) else None

    def watch_cursor(self, old: int, new: int) -> None:
        if not len(self.rows):
            return
        self.scroll_to_region_visible(new)
        self.refresh()
        self.post_message(self.Highlighted(self.rows.exchange(new)))

    def scroll_to_region_visible(self, row: int) -> None:
        top, height = round(self.scroll_y), max(self.size.height, 1)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False)

    def action_move(self, step: int) -> None:
        if len(self.rows):
            self.cursor = min(max(self.cursor + step, 0), len(self.rows) - 1)

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.size.height - 1, 1))

    def action_jump(self, row: int) -> None:
        if len(self.rows):
            self.cursor = row % len(self.rows)

    def on_click(self, event) -> None:
        row = event.y + round(self.scroll_y)
        if 0 <= row < len(self.rows):
            self.cursor = row

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = y + round(self.scroll_y)
        if row >= len(self.rows):
            return Strip.blank(width)
        ex = self.rows.exchange(row)
        cells = self.rows.cells(row)
        text = " ".join(_fit(cells[col], w, COLUMNS[col][2]) for col, w in layout(width))
        colour = row_colour(ex)
        style = Style(color=colour) if colour else Style()
        if row == self.cursor:
            style += Style(reverse=True, bold=self.has_focus)
        return Strip([Segment(text[:width].ljust(width), style)], width)
