"""Build a large TLS benchmark capture from real Kafka traffic over TLS, streaming.

    python benchmarks/tls_corpus.py [--size-mb 150] [--setting tls13-aes256-gcm]
                                    [--out benchmarks/corpus/corpus-tls.pcap]

The source is the bulk mix of benchmarks/corpus.py (kafka-python at api_version 2.5, batching
producers and a consumer: tshark 4.0 decodes every message) speaking TLS to tansu through the
lab's TLS terminator (tests/tls_lab.py), with the TLS leg and the plaintext leg captured at once
into two files and the terminator's key log kept. It is made once per TLS setting (root,
tcpdump, the dev extras) and cached in benchmarks/corpus/:

    source-SETTING.pcap         the TLS leg (client <-> terminator)
    source-SETTING.plain.pcap   the plaintext leg (terminator <-> broker): the same messages
    source-SETTING.keys.log     the NSS key log of every session
    source-SETTING.pcap.json    what the clients did

The corpus replicates the TLS leg exactly as corpus.build replicates a plaintext source (own
client addresses, sequence numbers and times per replica, a 1448-byte MSS, valid checksums,
broker on 9092). Every replica carries the source's TLS sessions, so the one key log opens them
all, and decrypting costs what it costs on distinct sessions (the keys are derived per
connection). `build_plain` makes the plaintext twin the same way, for comparing the costs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import corpus as C  # noqa: E402

DEFAULT_SETTING = "tls13-aes256-gcm"
CAPTURES = 3   # tries at a source tshark decodes whole (make_source)


def source_paths(setting=DEFAULT_SETTING):
    base = C.CORPUS_DIR / f"source-{setting}"
    return {"tls": base.with_suffix(".pcap"), "plain": base.with_suffix(".plain.pcap"),
            "keylog": base.with_suffix(".keys.log"),
            "info": base.with_name(base.name + ".pcap.json")}


def make_source(setting=DEFAULT_SETTING):
    """Run the bulk mix's clients over TLS through the lab; write the source files (under
    temporary names, renamed when complete). Returns what the clients did. A capture in which
    tshark, given the key log, does not decode every message the clients logged is made again
    (CAPTURES times at most): on loopback, tcpdump sometimes records a segment ahead of the one
    before it, and tshark's TLS reassembly loses the rest of that connection (18 of 268 messages
    once); the benchmark compares its count with ours."""
    paths = source_paths(setting)
    C.CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    part = C.CORPUS_DIR / f"tls-source.{os.getpid()}.part"
    decoded = []
    for _ in range(CAPTURES):
        info, lab = _capture(setting, part)
        decoded.append(_tshark_messages(part / "tls.pcap", lab.keylog, info["tls_port"]))
        if decoded[-1] == info["requests"] + info["answered"]:
            break
    else:
        raise RuntimeError(f"tshark decoded {decoded} of the {info['requests'] + info['answered']} "
                           f"Kafka messages the clients logged in {CAPTURES} TLS captures")
    (part / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    os.replace(lab.keylog, paths["keylog"])
    os.replace(part / "plain.pcap", paths["plain"])
    os.replace(part / "info.json", paths["info"])
    os.replace(part / "tls.pcap", paths["tls"])   # last: its presence says the source is whole
    for leftover in part.iterdir():
        leftover.unlink()
    part.rmdir()
    return info


def _capture(setting, part):
    """One run of the clients through the lab, captured into `part`: (what they did, the lab)."""
    from tests import tls_lab as L
    from tests import traffic as T
    if part.exists():   # an earlier try's files (its key log and map would be appended to)
        for old in part.iterdir():
            old.unlink()
    with L.Lab(part, setting, pcap=part / "tls.pcap", plain_pcap=part / "plain.pcap") as lab:
        runs = C._bulk_runs(T, lab.bootstrap, **L.kafka_python_tls(lab.cert))
    for cap in (lab.capture, lab.plain_capture):
        if cap.dropped:
            raise RuntimeError(f"tcpdump dropped packets: {cap.stderr.strip()}")
    connections = lab.connections()
    return {"setting": setting, "tls_port": lab.tls_port, "plain_port": lab.plain_port,
            "broker": lab.broker.version,
            "versions": sorted({c["version"] for c in connections.values()}),
            "ciphers": sorted({c["cipher"] for c in connections.values()}),
            "connections": len(connections),
            "requests": sum(len(r.requests) for r in runs),
            "answered": sum(q.answered for r in runs for q in r.requests),
            "records_produced": sum(len(r.produced) for r in runs),
            "records_consumed": sum(len(r.consumed) for r in runs),
            "notes": [n for r in runs for n in r.notes]}, lab


def _tshark_messages(pcap, keylog, port) -> int:
    """The Kafka messages tshark decodes in a TLS capture with its key log."""
    from benchmarks.vs_tshark import tshark_cmd, tshark_messages
    out = pcap.with_name(pcap.name + ".tshark")
    with open(out, "wb") as f:
        subprocess.run(tshark_cmd(pcap, port, keylog), stdout=f, stderr=subprocess.DEVNULL,
                       check=True)
    try:
        return tshark_messages(out)
    finally:
        out.unlink()


def source(setting=DEFAULT_SETTING):
    """The source's paths, made on first use."""
    paths = source_paths(setting)
    if not paths["tls"].is_file():
        make_source(setting)
    return paths


def build(out, size_bytes, setting=DEFAULT_SETTING):
    """A TLS corpus of at least size_bytes at `out`: C.Built, and the key log that opens it."""
    paths = source(setting)
    return C.build(out, size_bytes, str(paths["tls"])), paths["keylog"]


def build_plain(out, size_bytes, setting=DEFAULT_SETTING):
    """The plaintext twin: the same traffic as seen between terminator and broker."""
    return C.build(out, size_bytes, str(source(setting)["plain"]))


def main(argv=None):
    from tests.tls_lab import SETTINGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=150, help="corpus size in MB (default 150)")
    ap.add_argument("--setting", choices=sorted(SETTINGS), default=DEFAULT_SETTING)
    ap.add_argument("--out", type=Path, default=C.CORPUS_DIR / "corpus-tls.pcap")
    ap.add_argument("--remake-source", action="store_true",
                    help="capture the source traffic again (root, tcpdump, tansu)")
    args = ap.parse_args(argv)
    if args.remake_source:
        make_source(args.setting)
    built, keylog = build(args.out, int(args.size_mb * 1e6), args.setting)
    print(built)
    print(f"key log: {keylog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
