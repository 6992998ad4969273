"""A mutation campaign over the shipped captures, for the sanitized build (tests/fuzz/sanitized.py)
or any other:

    python -m tests.fuzz.mutate [--count N] [--seed S] [--calls M]

Each mutant is a capture from captures/ with 1-8 mutations (bit flips, boundary bytes, inserted,
deleted, duplicated or spliced ranges, a cut) dissected at every level, its exchanges written as
text, CSV and JSON lines, its records as rows and its partitions as the partitions table's
columns: every compiled path a capture reaches. Then M direct calls with random arguments into
the compiled entry points (the readers, the record-set walk, csv_line, fill, random segment
streams through the compiled flow handler and pairing,
exchange_row, the partition walks on random bodies and columns, _value_buffers on columns of any
values).
A Python exception escaping the dissection is a finding (exit status 1,
the mutant kept under --out); under the sanitizers a memory or undefined-behaviour error ends
the process with their exit status and report.
"""
from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
from pathlib import Path

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def mutate(data: bytes, rnd: random.Random, others: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 8)):
        if not b:
            break
        at = rnd.randrange(len(b))
        kind = rnd.randrange(7)
        if kind == 0:
            b[at] ^= 1 << rnd.randrange(8)
        elif kind == 1:
            b[at] = rnd.choice((0, 1, 0x7F, 0x80, 0xFF))
        elif kind == 2:
            b[at:at] = rnd.randbytes(rnd.randint(1, 16))
        elif kind == 3:
            del b[at:at + rnd.randint(1, 64)]
        elif kind == 4:
            n = rnd.randint(1, 256)
            b[at:at] = b[at:at + n]
        elif kind == 5:
            src = rnd.choice(others)
            s = rnd.randrange(len(src))
            b[at:at + rnd.randint(1, 512)] = src[s:s + rnd.randint(1, 512)]
        else:
            del b[max(at, 24):]
    return bytes(b)


def dissect_all(path: Path) -> None:
    from analysis.extras import exchange_extras
    from analysis.load import kept_bodies
    from analysis.partition_columns import PartitionTable
    from dissector.output import CsvWriter, JsonlWriter, TextWriter
    from dissector.pipeline import dissect
    from dissector.records.columns import sourced_chunks
    from dissector.records.rows import record_rows
    from dissector.records.text import csv_chunk, jsonl_chunk
    for level in ("headers", "bodies", "records"):
        out = io.StringIO()
        writers = [TextWriter(out), CsvWriter(out), JsonlWriter(out, bodies=level != "headers")]
        partitions = PartitionTable()
        for ex in dissect([str(path)], level=level):
            for w in writers:
                w.write(ex)
            partitions.add_exchange(ex)
            if level == "records":
                for _ in record_rows(ex):
                    pass
        partitions.table()
    # analysis.load's way: no Produce or Fetch body, the byte walk handing over their rows
    for level in ("bodies", "records"):
        partitions = PartitionTable()
        for ex in dissect([str(path)], level=level, keep_bodies=kept_bodies()):
            partitions.add_exchange(ex)
            exchange_extras(ex)
        partitions.table()
    # the records commands' way: no body built, the record sets handed over by the byte walk,
    # the sides without records not read
    for cols, _ in sourced_chunks(dissect([str(path)], level="records", keep_bodies=False,
                                          records_only=True), 7, 1 << 12):
        csv_chunk(cols)
        jsonl_chunk(cols)


def direct_calls(count: int, rnd: random.Random) -> None:
    """Random arguments into the compiled entry points; only their Python errors are expected."""
    from dissector import framebuf
    from dissector.output import csv_line
    from dissector.protocol.decode import tables
    from dissector.records.record_set import walk_set
    from dissector.protocol.generated.apis import APIS
    from dissector.tables import exchange_row
    from tests.fuzz.atheris_targets import exchange_of
    from tests.tcp.test_compiled_handler import segment_run
    from analysis.partition_columns import _OFFSETS, LAYOUT, SIDES
    from dissector.partition_walk import walk_exchange, walk_side
    from tests.fuzz.atheris_targets import partition_walks
    from tests.protocol.encoder import random_body
    from dissector.records import _columns, _text
    from dissector.records.columns import BATCH_KINDS, CODEC_NAMES, RecordColumns
    from dissector.records.model import Batch, RecordSet
    from dissector.records.text import _NAMES
    from dissector._value_buffers import buffers, text_length
    odd = (None, 0, -1, 1 << 62, 1 << 70, 1.5, "a,b", "é", "\ud800", True, b"x", [], ())
    entries = [entry for k in APIS if tables(k) for side in tables(k)
               for entry in side.values()]
    walked = [(k, d, entry[1]) for k in SIDES for d in (0, 1) if SIDES[k][d]
              for entry in tables(k)[d].values()]
    for i in range(count):
        raw = rnd.randbytes(rnd.choice((0, 1, 4, 16, 64, 512)))
        which = i % 10
        try:
            if which == 0 and entries:
                reader = rnd.choice(entries)[0]
                reader(raw, rnd.randrange(len(raw) + 1), rnd.choice((0, 1, 100, 1 << 20,
                                                                    -(1 << 63), (1 << 63) - 1)))
            elif which == 1:
                walk_set(raw, rnd.random() < 0.5, [rnd.choice((0, 1 << 20))])
            elif which == 2:
                row = tuple(rnd.choice((None, 0, -1, 1 << 62, 1.5, "a,b", "x", "\"", [], ["t"],
                                        raw)) for _ in range(rnd.randint(0, 12)))
                args = [row, tuple(sorted(rnd.sample(range(12), 3))), rnd.randrange(-1, 13)]
                if rnd.random() < 0.5:   # holes, in or out of order and range
                    args.append(tuple(rnd.randrange(-1, 14) for _ in range(rnd.randrange(10))))
                csv_line(*args)
            elif which == 3:
                segment_run(raw, rnd.choice(("headers", "bodies")))()
            elif which == 4:
                exchange_row(exchange_of(raw))
            elif which == 7:   # batch walks over deferred parses of any shape
                batches = []
                for _ in range(rnd.randrange(4)):
                    b = Batch(0, 0, 2)
                    b._deferred = rnd.choice((
                        None, (rnd.randrange(-2, 9), None, (raw, 0, rnd.choice(odd),
                                                            rnd.choice(odd), rnd.choice(odd))),
                        (1,), (1, None, (raw,)), "x"))
                    batches.append(b)
                sets = [rnd.choice(((rnd.choice(odd), rnd.choice(odd),
                                     RecordSet(batches, [], False, 0, 0)),
                                    (rnd.choice(odd), rnd.choice(odd), rnd.choice(odd)), ("x",)))
                        for _ in range(rnd.randrange(4))]
                cols = RecordColumns()
                _columns.append_sets(
                    cols.buffers, rnd.choice((cols.batches, [])),
                    tuple(rnd.choice(odd) for _ in range(4)), sets, rnd.randrange(-1, 5),
                    rnd.randrange(-1, 5), rnd.randrange(-1, 9), rnd.choice((0, 100, 1 << 62)),
                    rnd.choice((None, [])), rnd.choice(odd), CODEC_NAMES)
            elif which == 8:   # batch fields of any values
                heads = [tuple(rnd.choice(odd) for _ in range(rnd.choice((15, 15, 3))))
                         for _ in range(rnd.randrange(4))]
                _text.batch_texts(heads, rnd.random() < 0.5, _NAMES)
                try:
                    _columns.batch_buffers(heads, BATCH_KINDS)
                except TypeError:   # a head shorter than the columns
                    pass
            elif which == 9:   # a column of any values, as any kind
                values = [rnd.choice(odd + (raw, raw.decode("latin-1"), ["a", "é"], ["\ud800"],
                                            [None], [raw]))
                          for _ in range(rnd.randrange(40))]
                buffers(values if rnd.random() < 0.5 else tuple(values),
                        rnd.choice("bhiqdsyLx") if rnd.random() < 0.95 else raw)
                rows = [tuple(values[j:j + 4]) if rnd.random() < 0.9 else values[j:j + 4]
                        for j in range(0, len(values), 4)]
                text_length(rows, tuple(rnd.randrange(-1, 6) for _ in range(rnd.randrange(4))))
            elif which == 5 and rnd.random() < 0.8:
                k, d, schema = rnd.choice(walked)
                partition_walks(k, d, random_body(schema, rnd))
            elif which == 5 and rnd.random() < 0.5:   # walked groups of any shape and values
                groups = [rnd.choice(((rnd.choice(odd), rnd.choice(odd), [
                    tuple(rnd.choice(odd) for _ in range(rnd.choice((6, 6, 2, 0))))
                    for _ in range(rnd.randrange(4))]), rnd.choice(odd), ("t", None)))
                    for _ in range(rnd.randrange(4))]
                k, d, _ = rnd.choice(walked)
                walk_side([[] for _ in range(40)], rnd.randrange(5), groups, SIDES[k][d][1],
                          LAYOUT, None, True)
            elif which == 5:   # an exchange walk with columns and offsets of any values
                cols = [[rnd.choice(odd) for _ in range(rnd.randrange(4))]
                        for _ in range(rnd.choice((0, 3, 40)))]
                walk_exchange(cols, rnd.randrange(-1, 5), rnd.choice(((None, None), odd)),
                              None, None, rnd.choice((LAYOUT, (0, 1, rnd.randrange(-1, 45)))),
                              rnd.choice((None, _OFFSETS[0], odd,
                                          tuple(rnd.randrange(-1, 45) for _ in range(4)))))
            else:
                buf = framebuf.frame_buffer(rnd.randrange(64))
                src = buf if rnd.random() < 0.3 else raw
                framebuf.fill(buf, rnd.randrange(-2, 66), src, rnd.randrange(-2, 66),
                              rnd.randrange(-2, 600))
        except Exception:   # a Python error is an answer: only crashes are findings here
            pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1000, help="mutants (default 1000)")
    p.add_argument("--calls", type=int, default=20000, help="direct calls (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mutate-findings")
    args = p.parse_args(argv)
    rnd = random.Random(args.seed)
    seeds = [f.read_bytes() for f in sorted(CAPTURES.glob("*.pcap"))]
    findings = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutant.pcap"
        for i in range(args.count):
            data = mutate(rnd.choice(seeds), rnd, seeds)
            path.write_bytes(data)
            try:
                dissect_all(path)
            except Exception as exc:   # nothing may escape a dissection
                findings += 1
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"mutant-{args.seed}-{i}.pcap").write_bytes(data)
                print(f"finding: mutant {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
    direct_calls(args.calls, rnd)
    print(f"{args.count} mutants, {args.calls} direct calls, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
