"""The bytes pane: one message in the classic hex layout, the selected field's bytes
highlighted (in the hex and in the text column), drawn line by line. Bytes of a masked secret
show as ** and * (as in `tree`'s hex dump)."""
from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

HIGHLIGHT = Style(reverse=True, bold=True)
PLAIN = Style()


class HexView(ScrollView, can_focus=True):
    DEFAULT_CSS = "HexView { height: 1fr; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.data = b""
        self.highlight = (0, 0)   # [start, end) byte offsets in `data`
        self.hidden = None        # per byte: a masked secret (secrets.masked_bytes), or None

    def show(self, data: bytes, start: int = 0, end: int = 0, hidden=None) -> None:
        """Show `data` with bytes [start, end) highlighted, scrolled so that they are visible."""
        self.data = bytes(data)
        self.hidden = hidden
        self.highlight = (start, end)
        self.virtual_size = Size(78, (len(self.data) + 15) // 16)
        line = start // 16
        top, height = round(self.scroll_y), max(self.size.height, 1)
        if not top <= line < top + height:
            self.scroll_to(y=max(line - 1, 0), animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        off = (y + round(self.scroll_y)) * 16
        width = self.size.width
        if off >= len(self.data):
            return Strip.blank(width)
        chunk = self.data[off:off + 16]
        start, end = self.highlight
        hidden = self.hidden[off:off + 16] if self.hidden else [False] * len(chunk)
        segments = [Segment(f"{off:08x}  ")]
        for i, b in enumerate(chunk):
            lit = start <= off + i < end
            sep = " " if i != 7 else "  "
            nxt_lit = start <= off + i + 1 < end and i + 1 < len(chunk) and i != 7
            segments.append(Segment("**" if hidden[i] else f"{b:02x}",
                                    HIGHLIGHT if lit else PLAIN))
            segments.append(Segment(sep, HIGHLIGHT if lit and nxt_lit else PLAIN))
        pad = 16 - len(chunk)
        segments.append(Segment(" " * (pad * 3 + (1 if pad > 8 else 0)) + " "))
        for i, b in enumerate(chunk):
            ch = "*" if hidden[i] else chr(b) if 32 <= b < 127 else "."
            segments.append(Segment(ch, HIGHLIGHT if start <= off + i < end else PLAIN))
        return Strip(segments).crop_extend(round(self.scroll_x), round(self.scroll_x) + width,
                                            PLAIN)

    def highlighted_bytes(self) -> bytes:
        """The highlighted bytes as they are in the message (masked ones included)."""
        start, end = self.highlight
        return self.data[start:end]
