"""A capture that cannot seek (standard input, a pipe: `tcpdump -w - | kafka-dissect read -`),
with the bytes read to recognise it handed out again first, as a seek back would."""
from __future__ import annotations


class Rewound:
    """The raw file `raw` read from its start again: `head` (already read from it), then the
    rest. The methods the chunk readers and the gzip reader call."""

    def __init__(self, raw, head: bytes):
        self.raw = raw
        self.head = head

    def readinto(self, view) -> int:
        if self.head:
            n = min(len(view), len(self.head))
            view[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        return self.raw.readinto(view) or 0

    def read(self, size=-1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.raw.read(size)

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()
