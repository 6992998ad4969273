"""gzip payloads go through the inflater in bounded steps: the output matches Python's gzip module
(the oracle) across step boundaries and member boundaries, with zlib and with the optional ISA-L
inflater, and a bomb's traced peak stays within the cap plus one step."""
import gzip
import random
import tracemalloc
import zlib

import pytest

from dissector.records import codecs
from dissector.records.codecs import CodecError, DecompressionLimit, decompress
from tests.support import require_module


@pytest.fixture(params=["zlib", "isal"])
def inflater(request, monkeypatch):
    """Run the test with each inflater (the one installed is used by default)."""
    if request.param == "isal":
        lib = require_module("isal.isal_zlib")
        errors = (lib.error, zlib.error)
    else:
        lib, errors = zlib, (zlib.error,)
    monkeypatch.setattr(codecs, "_inflater", lambda: (lib, errors))
    return request.param


def _data(n, seed):
    """Partly compressible bytes: about 2:1, so input and output steps both get crossed."""
    rnd = random.Random(seed)
    return b"".join(rnd.randbytes(64) + bytes(64) for _ in range(n // 128))


@pytest.mark.parametrize("sizes", [[0], [10], [3 << 20], [200_000, 5, 3 << 20, 70_000]])
def test_members_round_trip_across_steps(inflater, sizes):
    parts = [_data(n, i) for i, n in enumerate(sizes)]
    payload = b"".join(gzip.compress(p, compresslevel=1) for p in parts)
    assert decompress(1, memoryview(payload), 64 << 20) == gzip.decompress(payload)
    assert decompress(1, payload, 64 << 20) == b"".join(parts)


def test_zlib_wrapped_payload(inflater):
    data = _data(300_000, 7)
    assert decompress(1, zlib.compress(data), 1 << 20) == data


def test_every_truncation_is_an_error(inflater):
    payload = gzip.compress(_data(200_000, 3), compresslevel=1)
    cuts = sorted({1, 10, 18, len(payload) - 8, len(payload) - 1}
                  | set(random.Random(1).sample(range(20, len(payload) - 8), 30)))
    for cut in cuts:
        with pytest.raises(CodecError):
            decompress(1, payload[:cut], 64 << 20)


def test_trailing_garbage_is_an_error(inflater):
    with pytest.raises(CodecError):
        decompress(1, gzip.compress(b"abc") + b"junk-not-gzip", 1 << 20)


def test_exact_cap_is_allowed_one_more_byte_is_not(inflater):
    payload = gzip.compress(bytes(3 << 20))
    assert len(decompress(1, payload, 3 << 20)) == 3 << 20
    with pytest.raises(DecompressionLimit):
        decompress(1, payload, (3 << 20) - 1)


def test_bomb_peak_stays_within_the_cap_plus_one_step(inflater):
    """256 MiB of zeros against a 32 MiB cap: the traced peak (output buffers and the
    inflater's state) stays under the cap plus 4 MiB; inflating in one call peaked at about
    twice the cap (the output buffer grown to the cap, then copied into the result)."""
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    payload = b"".join(c.compress(zeros) for _ in range(256)) + c.flush()
    del zeros
    cap = 32 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimit):
            decompress(1, payload, cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < cap + (4 << 20), peak
