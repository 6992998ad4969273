"""What live capture shows besides the exchanges: a rolling view or periodic stats, and tables.

On a terminal (stderr is a tty) the view is redrawn in place with plain ANSI escapes; when the
exchanges go to the same terminal, the view is erased before they are written and drawn again
after, so it stays pinned under them. Elsewhere the same table is printed every few seconds.
"""
from __future__ import annotations

import shutil
import time

HEADER = (f"{'api':<28} {'requests':>9} {'req/s':>9} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} "
          f"{'max ms':>9} {'errors':>7} {'unansw.':>7}")


def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 100 else f"{v:.1f}"


def format_rows(rows) -> list[str]:
    lines = [HEADER]
    for r in rows:
        lines.append(f"{r.api[:28]:<28} {r.requests:>9} {r.rate:>9.1f} {_ms(r.p50):>9} "
                     f"{_ms(r.p90):>9} {_ms(r.p99):>9} {_ms(r.max):>9} {r.errors:>7} "
                     f"{r.unanswered:>7}")
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

    def _draw(self) -> None:
        width = max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
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
