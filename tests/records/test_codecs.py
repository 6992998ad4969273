"""Codecs: the framings Kafka clients write, decompression caps, and missing libraries."""
import gzip
import struct
import sys
import tracemalloc

import pytest

from dissector.records import codecs, decode_record_set
from tests.records.builders import build, expected, got, require_codec, with_body
from tests.support import require_module

PAYLOAD = b"".join(b"record %d, " % i for i in range(20000))  # ~250 kB, compressible
ITEMS = [(1_700_000_000_000 + i, b"key%d" % i, b"value-%d" % i * 50, [("h", b"%d" % i)])
         for i in range(200)]


def records_body():
    """The uncompressed records section of a kafka-python v2 batch holding ITEMS."""
    return build(2, 0, ITEMS)[61:]


def plain_batch():
    return build(2, 0, ITEMS)


def decoded(buf, **kw):
    rs = decode_record_set(buf, **kw)
    return rs, [i.code for i in rs.issues]


def test_xerial_snappy_built_from_the_framing_spec():
    snappy = require_module("snappy")
    body = records_body()
    # Header: marker byte -126, "SNAPPY", NUL, version int32 1, min compatible version int32 1;
    # then blocks of (int32 compressed length, raw snappy block) over 32 KiB of input each.
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(body), 32768):
        block = snappy.compress(body[i:i + 32768])
        framed += struct.pack(">i", len(block)) + block
    assert len(body) > 32768 * 2  # several blocks
    buf = with_body(plain_batch(), framed, codec=2)
    rs, codes = decoded(buf)
    assert codes == []
    assert got(rs) == expected(plain_batch())
    assert rs.batches[0].uncompressed_size == len(body)


def test_raw_snappy_block():
    snappy = require_module("snappy")
    rs, codes = decoded(with_body(plain_batch(), snappy.compress(records_body()), codec=2))
    assert codes == [] and got(rs) == expected(plain_batch())


def _lz4_hc_pos(frame):
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


@pytest.mark.parametrize("store_size", [False, True])
def test_lz4_with_the_old_kafka_header_checksum(store_size):
    lz4 = require_module("lz4.frame")
    xxhash = require_module("xxhash")
    frame = bytearray(lz4.compress(records_body(), store_size=store_size))
    hc = _lz4_hc_pos(frame)
    # the frame format: the checksum covers the descriptor only
    assert frame[hc] == (xxhash.xxh32_intdigest(bytes(frame[4:hc])) >> 8) & 0xFF
    wrong = (xxhash.xxh32_intdigest(bytes(frame[0:hc])) >> 8) & 0xFF  # KAFKA-1493: magic included
    assert wrong != frame[hc]
    frame[hc] = wrong
    with pytest.raises(RuntimeError):
        lz4.decompress(bytes(frame))  # a strict reader rejects it
    rs, codes = decoded(with_body(plain_batch(), bytes(frame), codec=3))
    assert codes == [] and got(rs) == expected(plain_batch())


def test_lz4_magic0_from_kafka_python_carries_the_wrong_checksum():
    require_codec(0, 3)
    xxhash = require_module("xxhash")
    buf = build(0, 3, [(None, b"k", PAYLOAD, [])])
    frame = buf[34:]  # v0 wrapper: 18-byte header, null key (4), value length (4), value
    hc = _lz4_hc_pos(frame)
    assert frame[hc] != (xxhash.xxh32_intdigest(frame[4:hc]) >> 8) & 0xFF
    rs, codes = decoded(buf)
    assert codes == [] and got(rs) == expected(buf)


def test_lz4_header_checksum_that_matches_nothing_is_an_issue():
    lz4 = require_module("lz4.frame")
    frame = bytearray(lz4.compress(records_body()))
    frame[_lz4_hc_pos(frame)] ^= 0x5A
    rs, codes = decoded(with_body(plain_batch(), bytes(frame), codec=3))
    assert codes == ["records.bad_compression"] and rs.batches[0].records is None


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_with_and_without_content_size(content_size):
    zstandard = require_module("zstandard")
    data = zstandard.ZstdCompressor(write_content_size=content_size).compress(records_body())
    assert zstandard.get_frame_parameters(data).content_size == (len(records_body()) if content_size
                                                              else zstandard.CONTENTSIZE_UNKNOWN)
    rs, codes = decoded(with_body(plain_batch(), data, codec=4))
    assert codes == [] and got(rs) == expected(plain_batch())


def test_gzip_concatenated_members():
    body = records_body()
    data = gzip.compress(body[:1000]) + gzip.compress(body[1000:])
    rs, codes = decoded(with_body(plain_batch(), data, codec=1))
    assert codes == [] and got(rs) == expected(plain_batch())


def _bomb(codec, n):
    zeros = bytes(n)
    if codec == 1:
        return gzip.compress(zeros)
    if codec == 2:
        return require_module("snappy").compress(zeros)
    if codec == 3:
        return require_module("lz4.frame").compress(zeros)
    return require_module("zstandard").ZstdCompressor(write_content_size=False).compress(zeros)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_is_capped(codec):
    bomb = _bomb(codec, 200 << 20)  # 200 MiB of zeros in a few hundred kB at most
    assert len(bomb) < 10 << 20
    tracemalloc.start()
    try:
        with pytest.raises(codecs.DecompressionLimit):
            codecs.decompress(codec, bomb, 1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(bomb) * 3 + (8 << 20)  # never near the 200 MiB the bomb claims
    rs, codes = decoded(with_body(plain_batch(), bomb, codec=codec), max_uncompressed=1 << 20)
    assert codes == ["records.decompression_limit"]
    assert rs.batches[0].records is None


def test_snappy_length_preamble_checked_before_decompressing():
    require_module("snappy")
    lie = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # claims 4 GiB
    with pytest.raises(codecs.DecompressionLimit):
        codecs.decompress(2, lie, 1 << 20)


def test_cap_is_shared_by_the_batches_of_a_set():
    one = build(2, 1, ITEMS)
    size = len(records_body())
    rs, codes = decoded(one + one, max_uncompressed=size + size // 2)
    assert codes == ["records.decompression_limit"]
    assert rs.batches[0].records is not None and rs.batches[1].records is None
    assert rs.batches[1].offset_in_set == len(one)


@pytest.mark.parametrize("codec,module", [(2, "snappy"), (3, "lz4.frame"), (4, "zstandard")])
def test_missing_codec_library_is_an_issue(monkeypatch, codec, module):
    require_codec(2, codec)
    compressed = build(2, codec, ITEMS)
    plain = build(2, 0, ITEMS[:3])
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    rs, codes = decoded(plain + compressed + plain)
    assert codes == ["records.codec_unavailable"]
    assert rs.issues[0].stream_offset == len(plain) + 61  # the compressed payload
    assert [b.records is None for b in rs.batches] == [False, True, False]
    assert rs.batches[1].record_count == len(ITEMS)


def test_missing_codec_in_a_legacy_wrapper(monkeypatch):
    require_codec(1, 2)
    buf = build(1, 2, [(t, k, v, []) for t, k, v, _ in ITEMS[:5]])
    monkeypatch.setitem(sys.modules, "snappy", None)
    rs, codes = decoded(buf)
    assert codes == ["records.codec_unavailable"] and rs.batches[0].records is None


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_payload_is_an_issue(codec):
    require_codec(2, codec)
    good = build(2, codec, ITEMS)
    bad = bytearray(good)
    mid = 61 + (len(good) - 61) // 2
    bad[mid:mid + 16] = b"\xa5" * 16
    bad = with_body(bytes(bad[:61]), bytes(bad[61:]))
    rs, codes = decoded(bad + good)
    assert all(c.startswith("records.") and c != "records.decode_error" for c in codes)
    assert got(rs)[-len(ITEMS):] == expected(good)


def _compress(codec, data):
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return require_module("snappy").compress(data)
    if codec == 3:
        return require_module("lz4.frame").compress(data)
    return require_module("zstandard").ZstdCompressor(write_content_size=False).compress(data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_compressed_payload_is_bad_compression(codec):
    whole = _compress(codec, records_body())
    for cut in (len(whole) // 3, len(whole) - 1):
        rs, codes = decoded(with_body(plain_batch(), whole[:cut], codec=codec))
        assert codes == ["records.bad_compression"], cut
        assert rs.batches[0].records is None


def test_zstd_concatenated_frames():
    body = records_body()
    data = _compress(4, body[:5000]) + _compress(4, body[5000:])
    rs, codes = decoded(with_body(plain_batch(), data, codec=4))
    assert codes == [] and got(rs) == expected(plain_batch())


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_multi_megabyte_payload_round_trips_under_the_cap(codec):
    import random
    rnd = random.Random(codec)
    data = rnd.randbytes(3 << 20) + bytes(2 << 20) + rnd.randbytes(100)
    packed = _compress(codec, data)
    assert codecs.decompress(codec, packed, len(data)) == data
    with pytest.raises(codecs.DecompressionLimit):
        codecs.decompress(codec, packed, len(data) - 1)
