"""The TLS layer of one Dissector: its key log, the connections it recognised, and what it
reports once (a malformed key log, a missing `cryptography`)."""
from __future__ import annotations

from ..model import ERROR, WARNING, Issue
from .keylog import KeyLog
from .sniff import Pair

TLS_KEY_LOG = 0x544C534B   # pcapng Decryption Secrets Block: secrets type 'TLSK'


def undecrypted_note(n, keys) -> str:
    """What a user is told of `n` TLS connections none of whose data was decrypted; `keys`:
    whether a key log was given (then it is the key log that lacks their secrets)."""
    fix = (f"the key log holds no secrets that open {'them' if n > 1 else 'it'}" if keys
           else "pass --keylog FILE")
    return f"{n} TLS connection{'s' if n > 1 else ''} not decrypted: {fix}"


class TlsLayer:
    def __init__(self, keylog=None, issue=None):
        self.keylog = keylog if keylog is not None else KeyLog()
        self.issue = issue           # where issues not tied to a connection go
        self.connections = 0         # TLS connections recognised
        self.undecrypted = 0         # ... of which none of the application data was decrypted
        self.keep_records = False    # connections log their records (tree: records per message)
        self._crypto_noted = False
        self._secret_blocks = 0

    def pair(self, conn, sink, budget) -> Pair:
        """The deciding fronts of a new connection's two directions (see sniff)."""
        return Pair(self, conn, sink, budget)

    def secrets(self, secrets_type, data) -> None:
        """A pcapng Decryption Secrets Block: TLS key log lines are added to the key log."""
        if secrets_type == TLS_KEY_LOG:
            self._secret_blocks += 1
            self.keylog.add_text(bytes(data),
                                 where=f"pcapng decryption secrets block {self._secret_blocks}")

    def crypto_missing(self, tc, exc, pkt) -> None:
        if not self._crypto_noted:
            self._crypto_noted = True
            tc.issue(None, "tls.no_crypto", ERROR, str(exc), pkt, None)

    def finish(self) -> None:
        kl = self.keylog
        if kl.malformed and self.issue is not None:
            self.issue(Issue("tls.keylog_malformed", WARNING,
                             f"{kl.malformed} malformed key log line"
                             f"{'s' if kl.malformed > 1 else ''} ignored (first: "
                             f"{kl.first_malformed})"))
            kl.malformed = 0
        if kl.dropped and self.issue is not None:
            self.issue(Issue("tls.keylog_limit", WARNING,
                             f"{kl.dropped} key log sessions past the first {len(kl)} ignored"))
            kl.dropped = 0
