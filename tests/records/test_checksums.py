"""CRC32C and xxHash32 against published vectors and independent implementations."""
import os
import subprocess
import sys

import pytest

from dissector.records import checksums
from tests.support import require_module

# RFC 3720 (iSCSI) appendix B.4 CRC32C examples, and the common "123456789" check value.
CRC32C_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0),
]


@pytest.mark.parametrize("data,crc", CRC32C_VECTORS)
def test_crc32c_vectors(data, crc):
    assert checksums.crc32c_python(data) == crc
    assert checksums.crc32c(data) == crc


def test_crc32c_python_matches_the_crc32c_package_at_every_length():
    crc32c = require_module("crc32c")
    for n in list(range(70)) + [1000, 4097, 65536 + 3]:
        data = os.urandom(n)
        assert checksums.crc32c_python(data) == crc32c.crc32c(data), n
        assert checksums.crc32c_python(memoryview(data)) == crc32c.crc32c(data), n


def test_xxh32_matches_the_xxhash_package():
    xxhash = require_module("xxhash")
    for n in range(40):
        data = os.urandom(n)
        assert checksums.xxh32(data) == xxhash.xxh32_intdigest(data), n


def test_decoding_with_the_pure_python_crc32c(monkeypatch):
    from dissector.records import decode_record_set, record_batch
    from tests.records.builders import build
    buf = build(2, 0, [(1_700_000_000_000, b"k", b"v" * 1000, [])])
    monkeypatch.setattr(record_batch, "crc32c", checksums.crc32c_python)
    monkeypatch.setattr(record_batch, "ACCELERATED", False)
    assert decode_record_set(buf).batches[0].crc_ok is True
    assert decode_record_set(buf, records=False).batches[0].crc_ok is None  # skipped when slow
    bad = bytearray(buf)
    bad[-2] ^= 1  # the last value byte (the last byte is the header count)
    assert [i.code for i in decode_record_set(bytes(bad)).issues] == ["records.crc_mismatch"]


def test_accelerated_crc32c_is_the_package_function_loaded_without_its_init():
    """With the crc32c package installed, the accelerated function is used, gives the package's
    results, and loading it leaves importlib.metadata (which the package's __init__ imports for
    its version string, ~40 ms a start) unimported."""
    crc32c = require_module("crc32c")
    assert checksums.ACCELERATED is True
    for n in (0, 1, 9, 4097):
        data = os.urandom(n)
        assert checksums.crc32c(data) == crc32c.crc32c(data)
        assert checksums.crc32c(memoryview(data)) == crc32c.crc32c(data)
    code = ("import sys; from dissector.records import checksums; "
            "print(checksums.ACCELERATED, 'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]
