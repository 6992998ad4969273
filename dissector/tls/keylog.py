"""NSS key log files (SSLKEYLOGFILE): the secrets that let a capture's TLS sessions be decrypted.

Each line is `LABEL <client random, hex> <secret, hex>`. The labels used here are CLIENT_RANDOM
(TLS 1.2 and older: the 48-byte master secret) and the TLS 1.3 CLIENT/SERVER_HANDSHAKE_TRAFFIC_SECRET
and CLIENT/SERVER_TRAFFIC_SECRET_0; other labels (EXPORTER_SECRET, early traffic secrets, ...) are
valid and ignored. Comments (`#`) and blank lines are skipped. A line that cannot be read (a wrong
field count, bad hex, a secret of an impossible length, a line cut short) is counted, never fatal:
the dissector reports the count in one `tls.keylog_malformed` issue.

OpenSSL, BoringSSL, NSS, Python's ssl, Go and the Java agents all write this format. Clients
append a line per session, so a live capture re-reads the file as it grows (`KeyLog.follow`).
"""
from __future__ import annotations

import os

CLIENT_RANDOM = "CLIENT_RANDOM"
CLIENT_HS = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HS = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_AP = "CLIENT_TRAFFIC_SECRET_0"
SERVER_AP = "SERVER_TRAFFIC_SECRET_0"
USED = {CLIENT_RANDOM: (48,), CLIENT_HS: (32, 48), SERVER_HS: (32, 48), CLIENT_AP: (32, 48),
        SERVER_AP: (32, 48)}
# labels that are well formed but carry nothing this dissector uses
KNOWN = frozenset({"CLIENT_EARLY_TRAFFIC_SECRET", "EARLY_EXPORTER_SECRET", "EXPORTER_SECRET",
                   "RSA", "CLIENT_TRAFFIC_SECRET_N", "SERVER_TRAFFIC_SECRET_N"})
MAX_LINE = 1024            # longer lines are malformed (real ones are under 250 bytes)
MAX_SESSIONS = 1 << 20     # client randoms kept (a million sessions take ~400 MB): the rest are
                           # counted (`dropped`, a `tls.keylog_limit` issue)


class KeyLog:
    """Secrets by client random. Fill with `add_file`, `add_text` or `follow`; the dissector reads
    `secrets(client_random)` and, for captures that start after a TLS 1.3 handshake,
    `unmatched(label)`."""

    def __init__(self):
        self._sessions = {}     # client random (bytes) -> {label: secret bytes}
        self.malformed = 0      # lines that could not be read
        self.first_malformed = None   # "where: why" of the first
        self.dropped = 0        # sessions past MAX_SESSIONS
        self.matched = set()    # client randoms a capture's handshake named
        self.version = 0        # bumped whenever secrets are added (live: look again)

    def __len__(self):
        return len(self._sessions)

    def secrets(self, client_random: bytes):
        """{label: secret} of the session with this client random, or None."""
        return self._sessions.get(client_random)

    def unmatched(self, label):
        """[(client random, secret)] of `label` for sessions no handshake in the capture named,
        newest first (the key log's order: a capture that starts late has the newest sessions)."""
        out = [(cr, s[label]) for cr, s in self._sessions.items()
               if label in s and cr not in self.matched]
        out.reverse()
        return out

    # -- filling ---------------------------------------------------------------------------------

    def add_file(self, path) -> None:
        """Read a key log file (OSError if it cannot be opened)."""
        with open(path, "rb") as f:
            self.add_text(f.read(), where=os.fspath(path))

    def add_text(self, text, where="key log") -> None:
        """Key log lines as bytes or str; a last line without its newline is read too."""
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        for n, line in enumerate(text.split(b"\n"), 1):
            self.add_line(line, f"{where}:{n}")

    def add_line(self, line: bytes, where="key log") -> None:
        line = line.strip()
        if not line or line.startswith(b"#"):
            return
        why = self._parse(line) if len(line) <= MAX_LINE else "line too long"
        if why is not None:
            self.malformed += 1
            if self.first_malformed is None:
                self.first_malformed = f"{where}: {why}"

    def _parse(self, line):
        parts = line.split()
        if len(parts) != 3:
            return f"{len(parts)} fields, not 3"
        try:
            label = parts[0].decode("ascii")
            random = bytes.fromhex(parts[1].decode("ascii"))
            secret = bytes.fromhex(parts[2].decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return "not hexadecimal"
        sizes = USED.get(label)
        if sizes is None:
            return None if label in KNOWN or label.isupper() else f"unknown label {label[:40]!r}"
        if len(random) != 32:
            return f"client random of {len(random)} bytes"
        if len(secret) not in sizes:
            return f"{label} secret of {len(secret)} bytes"
        session = self._sessions.get(random)
        if session is None:
            if len(self._sessions) >= MAX_SESSIONS:
                self.dropped += 1
                return None
            session = self._sessions[random] = {}
        session[label] = secret
        self.version += 1
        return None

    def follow(self, path) -> "Follower":
        """A reader of `path` that adds the lines appended since its last `poll()`."""
        return Follower(self, path)


class Follower:
    """Reads the lines a client appends to a key log file while a live capture runs. The file
    may not exist yet, and may be truncated or replaced (then it is read from its start)."""

    def __init__(self, keylog: KeyLog, path):
        self.keylog = keylog
        self.path = os.fspath(path)
        self._pos = 0
        self._ident = None
        self._partial = b""
        self._lines = 0

    def poll(self) -> int:
        """Add the complete lines written since the last poll; returns how many were read."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                ident = (st.st_dev, st.st_ino)
                if ident != self._ident or st.st_size < self._pos:
                    self._ident, self._pos, self._partial, self._lines = ident, 0, b"", 0
                if st.st_size == self._pos:
                    return 0
                f.seek(self._pos)
                data = f.read(st.st_size - self._pos)
        except OSError:
            return 0
        self._pos += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:][:MAX_LINE + 1]   # a line still being written
        lines = data[:cut].split(b"\n")[:-1]
        for line in lines:
            self._lines += 1
            self.keylog.add_line(line, f"{self.path}:{self._lines}")
        return len(lines)


def load(paths=(), texts=()) -> KeyLog:
    """A KeyLog of these files (OSError for one that cannot be read) and texts."""
    keylog = KeyLog()
    for p in paths:
        keylog.add_file(p)
    for t in texts:
        keylog.add_text(t)
    return keylog


def default_paths(environ=None) -> list:
    """The key log named by the SSLKEYLOGFILE environment variable, if set: the default when no
    --keylog is given (clients write it when that variable is set)."""
    value = (os.environ if environ is None else environ).get("SSLKEYLOGFILE")
    return [value] if value else []
