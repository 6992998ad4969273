"""What live capture shows besides the exchanges: a rolling view or periodic stats, and tables.

On a terminal (stderr is a tty) the view is redrawn in place with plain ANSI escapes; when the
exchanges go to the same terminal, the view is erased before they are written and drawn again
after, so it stays pinned under them. Elsewhere the same table is printed every few seconds.
"""
from __future__ import annotations

import shutil
import time

from ..figures import sig3
from ..text_safety import escape

# (header, Row attribute, detail): numbers in three significant figures, units in the header;
# a detail column is left out when the table would otherwise not fit the terminal
COLUMNS = (("requests", "requests", False), ("req/s", "rate", False), ("p50 ms", "p50", False),
           ("p90 ms", "p90", True), ("p99 ms", "p99", False), ("max ms", "max", False),
           ("errors", "errors", False), ("no reply", "unanswered", False))
GAP = 2


def _figure(v) -> str:
    if v is None:
        return "-"
    return str(v) if isinstance(v, int) else sig3(v)


def format_rows(rows, width: int | None = None) -> list[str]:
    """The per-api table as lines no wider than `width` (None: as wide as the content). Names
    are never cut: a name wider than its column continues on the next line."""
    names = [escape(r.api) for r in rows]
    columns = list(COLUMNS)
    while True:
        cells = [[_figure(getattr(r, attr)) for r in rows] for _, attr, _ in columns]
        widths = [max([len(h)] + [len(c) for c in col]) for (h, _, _), col in zip(columns, cells)]
        name_width = max([3] + [len(n) for n in names])
        if width is not None:
            room = width - sum(widths) - GAP * len(widths)
            if room < name_width and any(d for _, _, d in columns):
                columns = [c for c in columns if not c[2]]
                continue
            name_width = max(min(name_width, room), 8)
        break
    gap = " " * GAP
    lines = ["api".ljust(name_width) + "".join(gap + h.rjust(w)
                                               for (h, _, _), w in zip(columns, widths))]
    for i, name in enumerate(names):
        lines.append(name[:name_width].ljust(name_width)
                     + "".join(gap + col[i].rjust(w) for col, w in zip(cells, widths)))
        for at in range(name_width, len(name), name_width):
            lines.append(name[at:at + name_width])
    return lines


def fit_words(parts, width: int | None) -> list[str]:
    """Parts joined by two spaces, onto as many lines of at most `width` as they need."""
    lines = [""]
    for part in parts:
        if lines[-1] and width is not None and len(lines[-1]) + 2 + len(part) > width:
            lines.append(part)
        else:
            lines[-1] = f"{lines[-1]}  {part}" if lines[-1] else part
    return lines


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


class TerminalView:
    """A block of lines kept at the bottom of a terminal, redrawn at most every `refresh` s."""

    def __init__(self, stream, shares_output: bool, refresh: float = 0.5):
        self.stream = stream
        self.shares_output = shares_output
        self.refresh = refresh
        self._lines: list[str] = []
        self._drawn = 0
        self._next = 0.0

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    @property
    def width(self) -> int:
        """Columns the view may use (one less than the terminal's: no line may wrap)."""
        return max(shutil.get_terminal_size((100, 24)).columns - 1, 20)

    def _draw(self) -> None:
        width = self.width   # the lines are made to fit; cut only if the terminal just shrank
        self.stream.write("".join(line[:width] + "\n" for line in self._lines))
        self.stream.flush()
        self._drawn = len(self._lines)

    def before_output(self) -> None:
        if self.shares_output:
            self._erase()
            self.stream.flush()

    def after_output(self) -> None:
        if self.shares_output and not self._drawn:
            self._draw()

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def show(self, lines) -> None:
        self._next = time.monotonic() + self.refresh
        self._lines = list(lines)
        self._erase()
        self._draw()

    def close(self) -> None:
        """Remove the view: the final summary replaces it."""
        self._erase()
        self.stream.flush()


class PeriodicStats:
    """The same table as plain text every `every` seconds (output is not a terminal)."""

    width = None   # not a terminal: lines as long as their content

    def __init__(self, stream, every: float):
        self.stream = stream
        self.every = every
        self._next = time.monotonic() + every

    def before_output(self) -> None:
        pass

    def after_output(self) -> None:
        pass

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def show(self, lines) -> None:
        self._next = time.monotonic() + self.every
        self.stream.write("".join(line + "\n" for line in lines))
        self.stream.flush()

    def close(self) -> None:
        pass
