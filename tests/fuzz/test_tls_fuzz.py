"""TLS under damage, seeded with real conversations (kafka-python's capture) re-sent through OpenSSL
(tests/tls/tlsgen.py) in each decryption path: TLS 1.3, TLS 1.2 with an AEAD and with CBC (MAC then
encrypt). The plaintext capture is the truth: whole, the TLS connections give its exchanges;
resegmented, duplicated and reordered, the same; damaged anywhere (ciphertext, handshake, record
headers, the key log), nothing escapes and every exchange that comes out is one of the truth's (but
where in the stream, after a loss), as a record that does not authenticate is dropped, never
guessed."""
import collections
import random
import tempfile
from functools import lru_cache

import pytest
from hypothesis import given, strategies as st

from dissector.capture.layers import SYN, tcp_segment
from dissector.pipeline import Dissector
from dissector.tls.keylog import KeyLog
from tests.support import CAPTURES, require_module

from .stream_seeds import TLS_VARIANTS, tls_wires
from .support import bounded, fuzz_settings, mutate
from .test_stream_fuzz import feed, resegment

PLAIN = CAPTURES / "kafka_python.pcap"
PORT = 9092
VARIANTS = (TLS_VARIANTS[0], TLS_VARIANTS[1], TLS_VARIANTS[-1])   # 1.3; 1.2 GCM; 1.2 CBC MtE


@lru_cache(maxsize=None)
def variant(i):
    """(key log text, segments) of the plaintext capture's conversations over VARIANTS[i]:
    each segment (ts, src, dst, sport, dport, seq, ack, flags, payload)."""
    require_module("cryptography")
    from tests.tls import tlsgen
    with tempfile.TemporaryDirectory() as d:
        made = tls_wires(PLAIN, PORT, d, variants=VARIANTS[i:i + 1], first=100)
    segs = []
    for ts, frame in tlsgen.packets([wire for _, _, wire in made], PORT):
        seg = tcp_segment(1, frame)
        segs.append((ts,) + seg[:7] + (bytes(seg[7]),))
    return made[0][1], tuple(segs)


def row(ex, offsets=True):
    """What a reader sees of an exchange, but its ports and times (the plaintext capture's);
    without its messages' stream offsets where bytes were lost before them."""
    req, resp = ex.request, ex.response
    return (ex.api_key, ex.api_version, ex.correlation_id, ex.client_id, ex.status,
            req and (offsets and req.stream_offset, req.length),
            resp and (offsets and resp.stream_offset, resp.length),
            ex.error_code, ex.error_count, tuple(ex.topics or ()), ex.partition_count,
            ex.record_count)


def run(segs, keylog_text):
    keylog = KeyLog()
    keylog.add_text(keylog_text)
    d = Dissector((PORT,), level="records", keylog=keylog)
    return feed(d, segs), d


@lru_cache(maxsize=None)
def truth(offsets=True):
    """The plaintext capture's exchanges, as rows."""
    from dissector.pipeline import dissect
    return collections.Counter(row(ex, offsets) for ex in dissect(PLAIN, (PORT,), level="records"))


@pytest.mark.parametrize("i", range(len(VARIANTS)))
def test_whole_tls_gives_the_plaintext_exchanges(i):
    text, segs = variant(i)
    out, d = run(segs, text)
    assert collections.Counter(map(row, out)) == truth()
    assert not d.issues and d.tls.connections == len({s[3] for s in segs if s[4] == PORT})
    assert d.tls.undecrypted == 0


@fuzz_settings(15)
@given(i=st.sampled_from(range(len(VARIANTS))), seed=st.integers(0, 2**32))
@bounded(60)
def test_resegmented_tls_gives_the_same_exchanges(i, seed):
    """Each TLS payload cut into random pieces (records split anywhere, headers too), some sent
    twice, a few swapped with their neighbour: the plaintext capture's exchanges."""
    text, segs = variant(i)
    out = resegment(segs, random.Random(seed), (1, 3, 5, 100, 1448))
    got, _ = run(out, text)
    assert collections.Counter(map(row, got)) == truth()


@fuzz_settings(30)
@given(i=st.sampled_from(range(len(VARIANTS))), seed=st.integers(0, 2**32))
@bounded(60)
def test_damaged_tls_never_escapes_nor_invents(i, seed):
    """Bytes changed in the handshake, the record headers or the ciphertext, segments lost or
    far out of order, the key log cut or changed: the run ends, every finding is an Issue, and
    every exchange that comes out whole is one of the plaintext capture's."""
    rnd = random.Random(seed)
    text, segs = variant(i)
    segs = list(segs)
    for _ in range(rnd.randint(1, 6)):
        k = rnd.randrange(len(segs))
        if rnd.random() < 0.3:     # one of the first packets of a connection: its handshake
            k = rnd.choice([n for n, s in enumerate(segs) if s[7] & SYN]) + rnd.randrange(8)
            k = min(k, len(segs) - 1)
        ts, src, dst, sport, dport, seq, ack, flags, payload = segs[k]
        op = rnd.randrange(4)
        if op <= 1 and payload:    # bytes changed anywhere: handshake, header, ciphertext
            segs[k] = (ts, src, dst, sport, dport, seq, ack, flags, mutate(payload, rnd, 3))
        elif op == 2:              # lost
            del segs[k]
        else:                      # far out of order
            segs.insert(rnd.randrange(len(segs)), segs.pop(k))
    if rnd.random() < 0.2:         # the key log cut anywhere, or its bytes changed
        text = (text[:rnd.randrange(len(text) + 1)] if rnd.random() < 0.5
                else mutate(text, rnd, 2))
    got, _ = run(segs, text)
    ok = collections.Counter(row(ex, False) for ex in got if ex.status == "ok")
    assert not ok - truth(False)
