"""Options and helpers shared by the commands that read captures."""
from __future__ import annotations

import argparse
import os
import sys
import time

from ..pipeline import DEFAULT_PORTS, MAX_FRAME, dissect
from ..text_safety import escape


def add_capture_options(p) -> None:
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help="pcap or pcapng files (optionally gzip-compressed), read as one "
                        "capture; - reads standard input (tcpdump -w - | ...)")
    p.add_argument("--port", action="append", metavar="PORT|auto",
                   help="broker port (repeatable; default 9092); 'auto' finds Kafka on any port")
    p.add_argument("--max-frame", type=int, default=MAX_FRAME, metavar="BYTES",
                   help="largest Kafka message accepted (default 100 MiB)")


def add_keylog_option(p) -> None:
    p.add_argument("--keylog", action="append", metavar="FILE",
                   help="TLS key log (NSS format, as SSLKEYLOGFILE writes it) to decrypt TLS "
                        "connections with (repeatable; default: $SSLKEYLOGFILE)")


def keylog_from(args):
    """The KeyLog of --keylog (or $SSLKEYLOGFILE when none is given), None when neither is;
    a one-line UsageError for a --keylog file that cannot be read or a missing `cryptography`.
    $SSLKEYLOGFILE is often set for other programs, and its file written only once a TLS client
    runs: a file it names that cannot be read, or no `cryptography`, is a warning, and the run
    goes on with an empty key log (not None, which would have the analysis read it again)."""
    from ..cli import UsageError
    from ..tls.crypto import MISSING, available
    from ..tls.keylog import KeyLog, default_paths
    given = getattr(args, "keylog", None)
    paths = given or default_paths()
    if not paths:
        return None
    keylog = KeyLog()
    for path in paths:
        try:
            keylog.add_file(path)
        except OSError as exc:
            if given:
                raise UsageError(f"--keylog {path}: {exc.strerror or exc}") from None
            _warn(f"SSLKEYLOGFILE {path}: {exc.strerror or exc}: TLS is read without its keys")
            return KeyLog()
    if not available():
        if given:
            raise UsageError(MISSING)
        _warn(f"SSLKEYLOGFILE is set, but {MISSING}: TLS is read without its keys")
        return KeyLog()
    if keylog.malformed:
        n = keylog.malformed
        _warn(f"{n} malformed key log line{'s' if n > 1 else ''} ignored (first: "
              f"{keylog.first_malformed})")
    elif given and not len(keylog):
        _warn("the key log holds no TLS secrets")
    return keylog


def _warn(message) -> None:
    print(f"kafka-dissect: warning: {escape(message)}", file=sys.stderr)


def add_jobs_option(p) -> None:
    p.add_argument("--jobs", type=int, metavar="N",
                   help="worker processes (default: one per core for captures over 64 MiB in "
                        "all, else 1); the output is the same whatever N")
    # how connections are spread over the workers (tests): by client address, or each alone
    p.add_argument("--jobs-by", choices=("client", "connection"), default="client",
                   help=argparse.SUPPRESS)


def parse_ports(values) -> tuple[tuple[int, ...], bool]:
    from ..cli import UsageError
    if not values:
        return DEFAULT_PORTS, False
    ports, auto = [], False
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if part == "auto":
                auto = True
            elif part.isdigit() and 0 < int(part) < 65536:
                ports.append(int(part))
            else:
                raise UsageError(f"--port takes a port number or 'auto', not {part!r}")
    return tuple(ports), auto


class Progress:
    """A one-line progress indicator on stderr for captures over a few MB; silent when stderr
    is not a terminal."""

    MIN_BYTES = 4 << 20

    def __init__(self, paths):
        sizes = [os.path.getsize(p) for p in paths if os.path.isfile(p)]
        self.total = sum(sizes)
        self.enabled = sys.stderr.isatty() and self.total >= self.MIN_BYTES
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, path, done_bytes) -> None:
        if not self.enabled:
            return
        frac = min(done_bytes / self.total, 1.0) if self.total else 0.0
        rate = done_bytes / max(time.monotonic() - self.start, 1e-9) / 1e6
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r[{bar:<30}] {frac:6.1%} {rate:7.1f} MB/s {os.path.basename(path)}")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 79 + "\r")
            sys.stderr.flush()


def check_captures(paths, stdin=True) -> None:
    """A one-line UsageError for a capture that is not there. `-` is standard input (a pipe:
    `tcpdump -w - | kafka-dissect read -`), once in a run, where `stdin` allows it."""
    from ..capture.files import STDIN
    from ..cli import UsageError
    if paths.count(STDIN) > 1:
        raise UsageError("standard input (-) can be read only once")
    if STDIN in paths and stdin and sys.stdin is not None and sys.stdin.isatty():
        raise UsageError("standard input (-) is the terminal: pipe a capture into it "
                         "(tcpdump -w - | kafka-dissect read -)")
    for path in paths:
        if path == STDIN and not stdin:
            raise UsageError("the browser reads its keys from the terminal: give the capture "
                             "as a file, not -")
        if path != STDIN and not os.path.exists(path):
            raise UsageError(f"{path}: no such file")


def open_dissection(args, level, keep_bodies=True, records_only=False):
    ports, auto = parse_ports(args.port)
    check_captures(args.captures)
    keylog = keylog_from(args)
    progress = Progress(args.captures)
    run = dissect(args.captures, ports, auto=auto, level=level, max_frame=args.max_frame,
                  progress=progress, keep_bodies=keep_bodies, keylog=keylog,
                  records_only=records_only)
    return run, progress


def open_output(path):
    """The --out text file, or a one-line UsageError (a missing directory, no permission)."""
    from ..cli import UsageError
    try:
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"--out {path}: {exc.strerror or exc}") from None


def report_undecrypted(tls, args) -> None:
    """How many TLS connections could not be decrypted (a Dissector's `tls` layer), on stderr,
    and whether the fix is a key log or another one."""
    if tls.undecrypted:
        from ..tls.keylog import default_paths
        from ..tls.layer import undecrypted_note
        keys = bool(getattr(args, "keylog", None)) or any(map(os.path.isfile, default_paths()))
        print(f"kafka-dissect: {undecrypted_note(tls.undecrypted, keys)}", file=sys.stderr)


def report_capture_hints(run, args) -> None:
    """What a look at the capture's first packets says the run cannot (capture_survey), on
    stderr: where its TCP servers are when the broker ports gave no exchange, and packets the
    snapshot length cut. Nothing after a capture error (said already)."""
    from ..capture_survey import hints
    for line in hints(run, args.captures, *parse_ports(args.port)):
        print(f"kafka-dissect: {line}", file=sys.stderr)


def report_errors(run) -> int:
    """Capture errors found during the run: one line each on stderr; exit status 2 if any."""
    for message in run.errors:
        print(f"kafka-dissect: error: {escape(message)}", file=sys.stderr)
    return 2 if run.errors else 0
