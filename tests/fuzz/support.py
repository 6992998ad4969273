"""Shared pieces of the fuzz suite: budgets, seeds, mutations, run helpers.

Budgets: every hypothesis test takes `settings(max_examples=examples(N))`. `FUZZ_EXAMPLES` is a
factor (default 1: the bounded CI campaign); `scripts/fuzz.sh` raises it for a longer campaign.
Seeds are real: the captures in captures/ and valid messages built by the test encoder from the
generated schema tables (tests/protocol/encoder.py) for every (api key, version).
"""
from __future__ import annotations

import io
import json
import functools
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
from functools import lru_cache

from hypothesis import HealthCheck, settings

from dissector.capture.files import CaptureError, read_packets
from dissector.capture.writer import PcapngWriter, PcapWriter
from dissector.protocol.decode import tables
from dissector.protocol.generated.apis import APIS
from dissector.protocol.headers import request_header_version, response_header_version
from tests.protocol.encoder import encode, random_body
from tests.support import CAPTURES, ROOT

SCALE = max(float(os.environ.get("FUZZ_EXAMPLES", "1")), 0.01)

# Every (api_key, version) this build decodes: 368 pairs.
PAIRS = [(k, v) for k in sorted(APIS) for v in range(APIS[k][1], APIS[k][2] + 1)]

# Issue codes that mean "our code failed", not "the input is bad": never acceptable.
BUG_CODES = frozenset({"records.decode_error", "kafka.decoder_mismatch"})


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def fuzz_settings(n: int, **kw):
    return settings(max_examples=examples(n), deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much], **kw)


def bounded(seconds: float):
    """Fail an example that runs longer than `seconds` (wall clock, SIGALRM in the main thread):
    every run must end, and hypothesis runs without a deadline (cold caches vary)."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kw):
            def expire(*_):
                raise TimeoutError(f"{fn.__name__}: still running after {seconds} s")
            old = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                return fn(*args, **kw)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        return run
    return wrap


# -- real captures ----------------------------------------------------------------------------

REAL = sorted(p for p in CAPTURES.glob("*.pcap"))
SMALL_REAL = min(REAL, key=lambda p: p.stat().st_size)
# Broker ports of the real captures (aiokafka runs on a non-standard one).
REAL_PORTS = (9092, 19093)


@lru_cache(maxsize=None)
def packets(path) -> tuple:
    """(ts_ns, linktype, data) of every packet of a real capture."""
    return tuple((ts, lt, data) for _, ts, lt, data in read_packets(path))


def write_pcap(pkts, nanosecond=True) -> bytes:
    out = io.BytesIO()
    w = PcapWriter(out, pkts[0][1] if pkts else 1, nanosecond=nanosecond)
    for ts, _, data in pkts:
        w.write(ts, data)
    return out.getvalue()


def write_pcapng(pkts) -> bytes:
    out = io.BytesIO()
    w = PcapngWriter(out, pkts[0][1] if pkts else 1)
    for ts, lt, data in pkts:
        w.write(ts, data, linktype=lt)
    return out.getvalue()


def read_all(path):
    """Every packet of a (possibly damaged) capture, and the CaptureError message or None."""
    got = []
    try:
        for pkt in read_packets(path):
            got.append(pkt)
    except CaptureError as e:
        return got, str(e)
    return got, None


# -- valid messages for every (api key, version) ---------------------------------------------

def request_message(k, v, rnd, corr=42, client_id=b"fuzz") -> bytes:
    """A valid request (after the size prefix) of (k, v) with a random body."""
    schema = tables(k)[0][v][1]
    head = struct.pack(">hhi", k, v, corr)
    hv = request_header_version(k, v)
    if hv >= 1:
        head += struct.pack(">h", len(client_id)) + client_id
    if hv == 2:
        head += b"\x00"
    return head + encode(schema, random_body(schema, rnd))


def response_message(k, v, rnd, corr=42) -> bytes:
    schema = tables(k)[1][v][1]
    head = struct.pack(">i", corr)
    if response_header_version(k, v) == 1:
        head += b"\x00"
    return head + encode(schema, random_body(schema, rnd))


# -- mutations --------------------------------------------------------------------------------

INTERESTING = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00",
               b"\xff\xff", b"\x7f\xff", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80",
               b"\x00", b"\xff")


def mutate(data: bytes, rnd: random.Random, n: int = 3) -> bytes:
    """A few structure-blind edits: byte flips, interesting integers (size and count claims of
    2^31-1, -1, huge varints) written over the data, insertions, deletions, duplications, cuts."""
    b = bytearray(data)
    for _ in range(rnd.randint(1, n)):
        op = rnd.randrange(7)
        at = rnd.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(at, len(b) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 1:
            s = rnd.choice(INTERESTING)
            b[at:at + len(s)] = s
        elif op == 2:
            b[at:at] = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 8)))
        elif op == 3:
            del b[at:at + rnd.randint(1, 16)]
        elif op == 4 and b:
            start = rnd.randrange(len(b))
            b[at:at] = b[start:start + rnd.randint(1, 64)]
        elif op == 5:
            del b[at:]
        elif op == 6 and b:
            b[min(at, len(b) - 1)] = rnd.randrange(256)
    return bytes(b)


# -- exchanges --------------------------------------------------------------------------------

def exchange_key(ex):
    """What identifies an exchange and what a reader sees of it (bodies' summaries included)."""
    c = ex.connection
    req, resp = ex.request, ex.response
    return (c.client_ip, c.client_port, c.broker_ip, c.broker_port, ex.api_key, ex.api_version,
            ex.correlation_id, ex.client_id, ex.status,
            req and (req.stream_offset, req.length, req.first_ts, req.last_ts),
            resp and (resp.stream_offset, resp.length, resp.first_ts, resp.last_ts),
            ex.error_code, ex.error_count, tuple(ex.topics or ()), ex.partition_count,
            ex.record_count)


def request_key(ex):
    """The request side only (what survives when its response is cut off)."""
    c = ex.connection
    req = ex.request
    return (c.client_ip, c.client_port, c.broker_ip, c.broker_port, ex.api_key, ex.api_version,
            ex.correlation_id, ex.client_id,
            req and (req.stream_offset, req.length, req.first_ts, req.last_ts))


# -- memory and time of a run in a fresh interpreter ------------------------------------------

def run_isolated(code: str, timeout=120, env=None):
    """Run `code` in a fresh Python; it prints one JSON line. Returns (that object, peak RSS of
    the child in bytes). The child's own baseline (imports) is in its JSON as `base_rss`."""
    prelude = textwrap.dedent("""\
        import json, sys
        def rss():
            # VmHWM, not getrusage's ru_maxrss: Linux carries the parent's peak across exec into
            # ru_maxrss, so a child of a big pytest worker would report the worker's peak
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024
    """)
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])



def run_syn_flood(report: str, setup: str = "") -> dict:
    """A fresh interpreter feeds 80k SYNs from distinct client ports to the broker through the
    pipeline (after `setup`, a line of Python run before the Dissector is made); `grown` is what
    the last 60k added to its peak RSS. Returns the JSON of `report`, a Python expression over
    `d` (the Dissector) and `grown`."""
    return run_isolated(f"""
        from dissector import pipeline
        from dissector.pipeline import Dissector
        from dissector.capture.layers import SYN
        {setup}
        d = Dissector((9092,))
        b = b"\\x7f\\0\\0\\2"

        def syns(start, stop):
            for i in range(start, stop):
                d.feed_segment(i, i, (0x0a000000 + i // 60000).to_bytes(4, "big"), b,
                               1024 + i % 60000, 9092, 1000, 0, SYN, b"")
        syns(0, 20_000)
        first = rss()
        syns(20_000, 80_000)
        grown = rss() - first
        d.finish()
        print(json.dumps({report}))
    """)
