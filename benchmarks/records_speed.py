"""Record decoding speed per codec, side by side with kafka-python's record reader.

Usage: python benchmarks/records_speed.py [--records N] [--repeat R]
Both sides decode the same RecordBatch v2 bytes (built with kafka-python); kafka-python's side is
MemoryRecords iteration reading offset, timestamp, key, value and headers. Ours three ways:
"check" decodes the set as `read --level records` does (every record read and checked, counts
and Issues final, Record objects not built); "read all" decodes with build=True and reads every
record's fields (one pass, as the records table from raw sets); "later" checks first and reads
every record afterwards (two passes: what a reader of sets decoded by `check` pays). MB/s counts
the uncompressed size of the record set (the same batches built with no codec); times are CPU
times of this process.
"""
from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402

from dissector.records import decode_record_set  # noqa: E402

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def make_set(codec, n, per_batch=500):
    """Batches as a Fetch response carries them: offset deltas 0..per_batch-1 from a base offset
    (kafka-python's builder writes base offset 0, so the base is set afterwards; the CRC does
    not cover it)."""
    out = []
    for start in range(0, n, per_batch):
        b = MemoryRecordsBuilder(2, codec, 1 << 30)
        for i in range(start, min(n, start + per_batch)):
            value = b'{"id": %d, "name": "user %d", "score": %d, "pad": "%s"}' % (
                i, i, i * 7, b"x" * (i % 64))
            b.append(1_700_000_000_000 + i, b"user-%08d" % i, value, [("trace-id", b"%016x" % i)])
        b.close()
        batch = bytearray(b.buffer())
        struct.pack_into(">q", batch, 0, start)
        out.append(bytes(batch))
    return b"".join(out)


def ours_check(buf):
    """The set decoded and every record checked, as the exchanges table needs it."""
    return decode_record_set(buf, max_uncompressed=1 << 30).record_count


def ours(buf, build=True):
    """Every record's fields, as a consumer of the records would read them."""
    return sum(1 for r in decode_record_set(buf, build=build, max_uncompressed=1 << 30).records()
               if (r.offset, r.timestamp, r.key, r.value, r.headers))


def ours_later(buf):
    return ours(buf, build=False)


def kafka_python(buf):
    return sum(1 for batch in MemoryRecords(buf) for r in batch
               if (r.offset, r.timestamp, r.key, r.value, r.headers))


def median_times(fns, buf, repeat):
    """Median CPU seconds of each function (process time: on a shared machine wall time measures
    the neighbours too), runs interleaved so that cache and frequency effects hit both sides."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, t in zip(fns, times, strict=True):
            start = time.process_time()
            fn(buf)
            t.append(time.process_time() - start)
    return [statistics.median(t) for t in times]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    plain_size = len(make_set(0, args.records))
    print(f"{args.records} records per run, {plain_size / 1e6:.2f} MB uncompressed, "
          f"median CPU time of {args.repeat} runs")
    print(f"{'codec':7} {'check rec/s':>12} {'ratio':>6} {'read all rec/s':>14} {'MB/s':>6} "
          f"{'ratio':>6} {'later rec/s':>12} {'ratio':>6} {'k-p rec/s':>10} {'MB/s':>6}")
    for codec, name in CODECS.items():
        try:
            buf = make_set(codec, args.records)
        except Exception as e:  # codec library missing on this machine
            print(f"{name:7} skipped: {e}")
            continue
        n = args.records
        assert ours_check(buf) == ours(buf) == ours_later(buf) == kafka_python(buf) == n
        t_check, t_ours, t_later, t_kp = median_times((ours_check, ours, ours_later, kafka_python),
                                                      buf, args.repeat)
        print(f"{name:7} {n / t_check:12,.0f} {t_kp / t_check:5.2f}x {n / t_ours:14,.0f} "
              f"{plain_size / t_ours / 1e6:6.1f} {t_kp / t_ours:5.2f}x {n / t_later:12,.0f} "
              f"{t_kp / t_later:5.2f}x {n / t_kp:10,.0f} {plain_size / t_kp / 1e6:6.1f}")

if __name__ == "__main__":
    main()
