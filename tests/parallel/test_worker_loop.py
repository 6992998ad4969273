"""A worker's loop in this process, its numbers answered at once by a stand-in parent: it
renders each of its exchanges once, and it raises the cyclic collector's first threshold for
the exchanges it holds until they are numbered (restored afterwards here)."""
from __future__ import annotations

import gc
from pathlib import Path

from dissector.parallel import worker
from dissector.parallel.plan import Plan

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "codecs.mss1448.pcap"


class _Parent:
    """Numbers each chunk's exchanges as they come (1, 2, ...; connections keep their ids)."""

    def __init__(self):
        self.said, self.queue, self.n = [], [], 0

    def put(self, msg):
        self.said.append(msg)
        if msg[0] == worker.KEYS:
            count = len(msg[4]) if msg[5] is None else len(msg[5])
            numbers = list(range(self.n + 1, self.n + 1 + count))
            self.n += count
            self.queue.append((worker.NUMBERS, msg[2], numbers, [c for c, _ in msg[6]]))

    def get(self, block=True):
        return self.queue.pop(0) if self.queue else None


def test_a_worker_renders_its_exchanges_once_with_the_collector_held_off():
    rendered, thresholds = [], []

    def render():
        def pieces(exchanges):
            thresholds.append(gc.get_threshold()[0])
            rendered.extend(ex.index for ex in exchanges)
            return [str(ex.index) for ex in exchanges]
        return pieces

    before = gc.get_threshold()
    parent = _Parent()
    try:
        worker.work(0, Plan([CAPTURE], render, 1, level="bodies", keep_bodies=False), parent)
    finally:
        gc.set_threshold(*before)
    assert parent.said[-1][0] == worker.DONE, parent.said[-1]
    assert rendered == list(range(1, parent.n + 1)) and parent.n > 10
    assert thresholds and min(thresholds) >= worker.GC_THRESHOLD
