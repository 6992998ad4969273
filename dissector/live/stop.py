"""When live capture stops: Ctrl-C, SIGTERM, --duration or --count.

Signals only set a flag that the capture loop polls (it wakes at least every POLL_S seconds), so
the stop always goes through the normal flush, summary and file close. A signal once the capture
is already stopping aborts at once (KeyboardInterrupt), for when the user really means it.
"""
from __future__ import annotations

import signal
import time

_REASONS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class StopConditions:
    def __init__(self, duration: float | None = None, count: int | None = None):
        self.duration = duration
        self.count = count
        self.reason: str | None = None
        self.started = time.monotonic()
        self._saved = {}

    def _on_signal(self, signum, _frame):
        if self.reason is not None:
            raise KeyboardInterrupt
        self.reason = _REASONS[signum]

    def install(self) -> None:
        for sig in _REASONS:
            self._saved[sig] = signal.signal(sig, self._on_signal)

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def count_reached(self, packets: int) -> bool:
        if self.count is not None and packets >= self.count:
            self.reason = self.reason or "count"
            return True
        return False

    def should_stop(self) -> bool:
        if self.reason is None and self.duration is not None and self.elapsed() >= self.duration:
            self.reason = "duration"
        return self.reason is not None

    def remaining(self, poll: float) -> float:
        """How long the loop may wait for packets before it must look at the clock again."""
        if self.duration is None:
            return poll
        return max(0.0, min(poll, self.duration - self.elapsed()))
