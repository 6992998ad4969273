"""Body decoding speed: our generated decoders vs kio's readers (compiled core) on the same bytes.

Collects every request and response body of the real captures in captures/ (or the captures
given on the command line), keeps those kio can read too, decodes them all REPEAT times with
each decoder and prints side-by-side medians in messages/s and the ratio (target: ours >= 0.8x
kio). Times are CPU time of this process (the machine is shared: wall time includes the
neighbours' load). The work differs in one place: kio copies every record set (Produce
requests, Fetch responses) into a bytes object, ours slices a view of the message for the
record-batch decoder. On captures with large record sets that copy dominates kio's time (it
is memory-bound, so it also varies with the neighbours' memory traffic), so the ratio is also
printed apart for the bodies without record sets, where both sides do the same work. With --by-api, also the ratio per (api, version, direction), slowest first;
with --stage, also the session's whole body stage per message over every message (the
`--level bodies` work: decode, summary walk, record-set batch headers); with --tshark, also
times tshark's Kafka dissector over the same captures.

    .venv/bin/python benchmarks/decode_bodies.py [CAPTURE...] [--repeat 7] [--by-api] [--stage] [--tshark]
"""
from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dissector.decoding import BodyDecoder  # noqa: E402
from dissector.pipeline import dissect  # noqa: E402
from dissector.protocol.generated.apis import APIS  # noqa: E402
from dissector.protocol.decode import tables  # noqa: E402
from dissector.protocol.headers import parse_request_header, parse_response_header  # noqa: E402


def collect(paths):
    """[(api_key, api_version, direction, message bytes, body offset)] from the captures, each
    request followed by its response."""
    out = []
    for path in paths:
        for ex in dissect(path, auto=True):  # auto: one capture has its broker off port 9092
            k, v = ex.api_key, ex.api_version
            if k is None or tables(k) is None or v not in tables(k)[0]:
                continue
            if ex.request is not None:
                data = bytes(ex.request.data)
                out.append((k, v, 0, data, parse_request_header(data)[5]))
            if ex.response is not None:
                data = bytes(ex.response.data)
                out.append((k, v, 1, data, parse_response_header(data, k, v)[2]))
    return out


def stage(messages, repeat):
    """Median CPU seconds of the session's body stage (BodyDecoder) over all the messages."""
    times = []
    for _ in range(repeat):
        decoder = BodyDecoder()
        request = None
        t = time.process_time()
        for k, v, d, data, off in messages:
            if d == 0:
                _, _, corr, client_id, tags, _ = parse_request_header(data)
                request = decoder.request(data, k, v, corr, client_id, tags, off)
            else:
                decoder.response(data, k, v, request)
        times.append(time.process_time() - t)
    return statistics.median(times)


def kio_readers(messages):
    """[(kio reader, data, offset, (api_key, api_version, direction))] for the messages kio reads."""
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader
    readers, kept = {}, []
    for k, v, d, data, off in messages:
        key = (k, v, d)
        if key not in readers:
            try:
                readers[key] = entity_reader((load_request_schema, load_response_schema)[d](k, v))
            except Exception:
                readers[key] = None
        r = readers[key]
        if r is None:
            continue
        try:
            r(data, off)
        except Exception:
            continue  # a message kio cannot read (e.g. a broker quirk): not comparable
        kept.append((r, data, off, key))
    return kept


def has_records(schema):
    """Whether a body of this schema table can hold a record set (dissector/protocol/tree.py's
    (class, flexible, fields, tagged, absent) tables; a field's kind is its second item)."""
    return any(f[1] == "records" or (f[7] is not None and has_records(f[7])) for f in schema[2] + schema[3])


def ours(messages):
    out = []
    for k, v, d, data, off in messages:
        reader, _ = tables(k)[d][v]
        out.append((reader, data, off))
    return out


def run(jobs):
    t = time.process_time()
    for reader, data, off in jobs:
        reader(data, off)
    return time.process_time() - t


def split(our_jobs, kio_keyed, repeat, copies):
    """The ratio apart for bodies with and without record sets (medians of `repeat` runs)."""
    parts = {True: ([], []), False: ([], [])}
    for job, (r, data, off, (k, v, d)) in zip(our_jobs, kio_keyed):
        part = parts[has_records(tables(k)[d][v][1])]
        part[0].append(job)
        part[1].append((r, data, off))
    gc.disable()
    for records, (mine, theirs) in sorted(parts.items()):
        if not mine:
            continue
        t = ([], [])
        for _ in range(repeat):
            for i, jobs in enumerate((mine, theirs)):
                t[i].append(sum(run(jobs) for _ in range(copies)))
        ratio = statistics.median(t[1]) / statistics.median(t[0])
        what = "with record sets (kio copies them)" if records else "without record sets (same work)"
        print(f"  {len(mine)} bodies {what}: ratio {ratio:.2f}x")
    gc.enable()


def by_api(our_jobs, kio_jobs, repeat, copies):
    """Per (api, version, direction): best-of-`repeat` times of both decoders, slowest ratio first."""
    groups = defaultdict(lambda: ([], []))
    for ours_job, (r, data, off, key) in zip(our_jobs, kio_jobs):
        groups[key][0].append(ours_job)
        groups[key][1].append((r, data, off))
    rows = []
    for (k, v, d), (mine, theirs) in groups.items():
        t = [min(sum(run(jobs) for _ in range(copies)) for _ in range(repeat)) for jobs in (mine, theirs)]
        rows.append((t[1] / t[0], f"{APIS[k][0]} v{v} {'response' if d else 'request'}", len(mine), t))
    print(f"{'api':<40}{'messages':>9}{'ours ms':>10}{'kio ms':>10}{'ratio':>7}")
    for ratio, name, n, (mine, theirs) in sorted(rows):
        print(f"{name:<40}{n:>9}{mine * 1e3:>10.2f}{theirs * 1e3:>10.2f}{ratio:>7.2f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--copies", type=int, default=20, help="passes over the messages per timing")
    ap.add_argument("--by-api", action="store_true", help="ratios per api, version and direction")
    ap.add_argument("--stage", action="store_true", help="the whole body stage per message")
    ap.add_argument("--tshark", action="store_true")
    args = ap.parse_args(argv)
    paths = args.captures or sorted(p for p in (ROOT / "captures").glob("*.pcap") if "mss" not in p.name)
    messages = collect(paths)
    kio_keyed = kio_readers(messages)
    kio_jobs = [(r, data, off) for r, data, off, _ in kio_keyed]
    comparable = {id(data) for _, data, _ in kio_jobs}
    our_jobs = [j for j in ours(messages) if id(j[1]) in comparable]
    # The fast readers are what decode_request_body runs first; check they accept every message.
    for reader, data, off in our_jobs:
        _, end = reader(data, off)
        assert end <= len(data)
    n = len(our_jobs)
    total_bytes = sum(len(d) for _, d, _ in our_jobs)
    print(f"{len(messages)} messages from {len(paths)} captures; {n} that kio also reads "
          f"({total_bytes} bytes), {args.copies} passes per run, {args.repeat} runs")
    gc.disable()
    times = {"ours": [], "kio": []}
    for _ in range(args.repeat):  # interleaved, so both see the same machine load
        times["ours"].append(sum(run(our_jobs) for _ in range(args.copies)))
        times["kio"].append(sum(run(kio_jobs) for _ in range(args.copies)))
    gc.enable()
    rate = {name: n * args.copies / statistics.median(ts) for name, ts in times.items()}
    print(f"{'decoder':<10}{'median CPU s':>14}{'messages/s':>14}")
    for name, ts in times.items():
        print(f"{name:<10}{statistics.median(ts):>14.4f}{rate[name]:>14,.0f}")
    print(f"ratio ours/kio: {rate['ours'] / rate['kio']:.2f}x (target >= 0.8x)")
    split(our_jobs, kio_keyed, args.repeat, args.copies)
    if args.by_api:
        gc.disable()
        by_api(our_jobs, kio_keyed, args.repeat, args.copies)
        gc.enable()
    if args.stage:
        gc.disable()
        t = stage(messages, args.repeat)
        gc.enable()
        print(f"body stage (decode, summary walk, record-set headers): {len(messages)} messages, "
              f"{t / len(messages) * 1e6:.1f} us per message")
    if args.tshark:
        tshark = shutil.which("tshark")
        if not tshark:
            print("tshark: not installed")
            return 0
        t = time.perf_counter()
        count = 0
        for p in paths:
            r = subprocess.run([tshark, "-r", str(p), "-n", "-d", "tcp.port==1-65535,kafka", "-Y", "kafka",
                                "-T", "fields", "-e", "kafka.correlation_id"],
                               capture_output=True, text=True, timeout=600)
            count += sum(1 for line in r.stdout.splitlines() if line.strip())
        elapsed = time.perf_counter() - t
        print(f"tshark: {count} Kafka PDUs in {elapsed:.2f} s = {count / elapsed:,.0f} messages/s "
              f"(whole capture dissection, process start included); ours/tshark: "
              f"{rate['ours'] / (count / elapsed):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
