"""One budget of buffered bytes shared by every connection of a Dissector.

Each stream may hold a partial frame (up to max_frame) and out-of-order data (up to max_buffered),
which bounds one connection but not a capture of many: eight connections each in the middle of a
20 MB frame hold 160 MB. Holders (framers with a frame in progress, reassemblers with held data)
register what they hold in `holders`; once `used` passes `limit`, the holders holding the most
give up what they hold (`give_up`: a framer skips to its frame's end by its size, a reassembler
turns its holes into gaps), each with a `kafka.buffer_limit` Issue, until it fits again.
"""
from __future__ import annotations

BUFFER_BUDGET = 256 << 20   # partial frames + out-of-order data of all connections


class Budget:
    __slots__ = ("limit", "used", "holders", "busy")

    def __init__(self, limit=None):
        self.limit = BUFFER_BUDGET if limit is None else limit
        self.used = 0
        self.holders = {}   # holder -> bytes it accounts for (their sum is `used`)
        self.busy = False   # a holder is mid-way through handing data on: give-ups wait

    def over(self):
        """`used` passed `limit`: make the largest holders give up until it fits. Does nothing
        while busy (the holder that set it calls this again when done)."""
        if self.busy:
            return
        self.busy = True
        try:
            holders = self.holders
            while self.used > self.limit and holders:
                victim = max(holders, key=holders.__getitem__)
                victim.give_up()
                if holders.get(victim):   # must not happen; never loop on it
                    self.used -= holders.pop(victim)
        finally:
            self.busy = False
