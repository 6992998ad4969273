"""One budget of buffered bytes shared by every connection of a Dissector.

Each stream may hold a partial frame (up to max_frame) and out-of-order data (up to max_buffered),
which bounds one connection but not a capture of many: eight connections each in the middle of a
20 MB frame hold 160 MB. Holders (framers with a frame in progress or bytes kept while looking for
a frame start, reassemblers with held data) add what they take on to `used` and take off what
they let go; once `used` passes `limit`, the holders holding the most (`buffered()`) give up what
they hold (`give_up`: a framer skips to its frame's end by its size or drops what it kept while
resynchronising, a reassembler turns its holes into gaps), each with a `kafka.buffer_limit`
Issue, until `used` is an eighth below the limit.

Finding the largest must stay cheap on hostile input (a frame's size is claimed by 4 bytes, so a
packet can claim 100 MB): holders of at least `big_size` register in `big` (at most ~1024 of them
fit), where the largest is whenever there is one; only when every holder is smaller are all of
them (`members`, given by the flow table) ranked, and the eighth given up then takes many packets
to refill. The per-frame cost is an addition and a comparison or two.

`peak` is the most `used` reached since it was last set: holders make `used` grow through `add`
or `reserve`, which raise `peak` too (the compiled flow handler does the same in place). One
process never reads it; the workers of dissector.parallel report it per chunk, and the parent
checks that their peaks together stay within the limit (then no worker
gave anything up that one process would not have).
"""
from __future__ import annotations

BUFFER_BUDGET = 256 << 20   # partial frames + out-of-order data of all connections


def _buffered(holder):
    return holder.buffered()


class Budget:
    __slots__ = ("limit", "used", "peak", "members", "busy", "big", "big_size")

    def __init__(self, limit=None, members=tuple):
        self.limit = BUFFER_BUDGET if limit is None else limit
        self.used = self.peak = 0
        self.members = members  # () -> every current holder (framers and reassemblers)
        self.busy = False       # a holder is mid-way through handing data on: give-ups wait
        self.big = {}           # holders of at least big_size bytes, in the order they grew
        self.big_size = max(self.limit >> 10, 1)

    def reserve(self, holder, size):
        """`holder` now keeps `size` more bytes for one frame (a frame's body as it is announced)."""
        self.add(size)
        if size >= self.big_size:
            self.big[holder] = None
        if self.used > self.limit:
            self.over()

    def add(self, n):
        """A holder keeps `n` more bytes (fewer if negative), raising `peak` where `used` grows;
        its registration in `big` is the holder's to keep."""
        used = self.used = self.used + n
        if used > self.peak:
            self.peak = used

    def release(self, holder, size):
        """The frame `reserve` announced is complete and handed on."""
        self.used -= size
        if size >= self.big_size:
            del self.big[holder]

    def over(self):
        """`used` passed `limit`: make the largest holders give up. Does nothing while busy (the
        holder that set it calls this again when done)."""
        if self.busy:
            return
        self.busy = True
        low = self.limit - (self.limit >> 3)
        big = self.big
        try:
            while self.used > low:
                if big:
                    victim = max(big, key=_buffered)   # between equals, the first to grow
                    victim.give_up()
                    big.pop(victim, None)
                    continue
                # the most first; between equals, the oldest connection's
                ranked = sorted(((n, -i, h) for i, h in enumerate(self.members())
                                 if (n := h.buffered())), reverse=True)
                if not ranked:
                    return
                for n, _, holder in ranked:
                    if self.used <= low or big:
                        break
                    if holder.buffered() == n:   # unchanged by the give-ups before it
                        holder.give_up()
        finally:
            self.busy = False
