"""`live --metrics-port`: Prometheus metrics, read back with prometheus-client's own exposition
parser. Counts against what the traffic generator wrote and, live, against the exchanges
`kafka-dissect live` printed for real broker traffic; the per-label cap of distinct values."""
import json
import time
import urllib.request
from collections import Counter

import pytest

from dissector.pipeline import dissect
from tests.analysis.build import Capture, ms, request_bytes, response_bytes
from tests.browse import synthetic
from tests.support import require_module, require_root

from .support import live_process, stop, wait_for

require_module("prometheus_client")


def _samples(text):
    """{(sample name, frozenset of labels): value} from the exposition text."""
    from prometheus_client.parser import text_string_to_metric_families
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _total(samples, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def _scrape(metrics):
    from prometheus_client import generate_latest
    return _samples(generate_latest(metrics.registry).decode())


def test_counts_errors_bytes_latency_and_the_label_cap(tmp_path):
    from dissector.live.metrics import LiveMetrics
    n = 700
    path = synthetic.write(tmp_path / "s.pcap", n)
    metrics = LiveMetrics(max_values=3)
    for ex in dissect(path, level="bodies"):
        metrics.add(ex)
    s = _scrape(metrics)
    req = "kafka_dissect_requests_total"
    assert _total(s, req) == n == _total(s, req, api="ApiVersions", broker="10.0.0.2:9092")
    # seven client ids, 100 exchanges each; three keep their name, the rest are "other"
    kept = {dict(ls)["client_id"] for (name, ls), _ in s.items() if name == req}
    assert len(kept) == 4 and "other" in kept
    for cid in kept - {"other"}:
        assert _total(s, req, client_id=cid) == 100
    assert _total(s, req, client_id="other") == 400
    assert _total(s, "kafka_dissect_label_overflow_total", label="client_id") == 400
    # every tenth response carries error 35
    assert _total(s, "kafka_dissect_errors_total", error="UNSUPPORTED_VERSION") == n // 10
    assert _total(s, "kafka_dissect_errors_total") == n // 10
    # bytes on the wire, size prefix included, as the generator wrote them
    sent = sum(len(request_bytes(18, 0, i + 1, client_id=f"client-{i % 7}")) for i in range(n))
    assert _total(s, "kafka_dissect_request_bytes_total") == sent
    assert _total(s, "kafka_dissect_response_bytes_total") == n * (4 + 4 + 6)
    # each answered 0.25 ms after its request: all in the first bucket (0.5 ms)
    assert _total(s, "kafka_dissect_latency_seconds_count") == n
    assert _total(s, "kafka_dissect_latency_seconds_bucket", le="0.0005") == n
    assert _total(s, "kafka_dissect_latency_seconds_sum") == pytest.approx(n * 0.00025)


def test_label_sets_are_capped_too(tmp_path):
    from dissector.live.metrics import LiveMetrics
    path = synthetic.write(tmp_path / "s.pcap", 70)
    metrics = LiveMetrics(max_values=50, max_series=5)   # every client id is a new label set
    for ex in dissect(path, level="bodies"):
        metrics.add(ex)
    s = _scrape(metrics)
    req = "kafka_dissect_requests_total"
    sets = {dict(ls)["client_id"] for (name, ls), _ in s.items() if name == req}
    assert len(sets) == 6 and "other" in sets           # five kept, then one folded set
    assert _total(s, req) == 70 and _total(s, req, client_id="other") == 20
    # 20 request sets folded, and one error set: the sixth (client id already "other")
    assert _total(s, "kafka_dissect_label_overflow_total", label="series") == 21
    assert _total(s, "kafka_dissect_errors_total") == 7
    assert _total(s, "kafka_dissect_label_overflow_total", label="client_id") == 0


def test_hostile_label_values_are_escaped_and_bounded(tmp_path):
    from dissector.live.metrics import MAX_VALUE_CHARS, LiveMetrics
    cap = Capture()
    ids = ['[/]"quote\nnew\x1bline\\', "x" * 5000]
    for i, cid in enumerate(ids):
        c = cap.connection(client_port=42000 + i, ts=ms(10 * i))
        c.request(ms(10 * i + 1), request_bytes(18, 0, i + 1, client_id=cid))
        c.response(ms(10 * i + 2), response_bytes(i + 1, b"\x00\x00\x00\x00\x00\x00"))
    metrics = LiveMetrics()
    for ex in dissect(cap.write(tmp_path / "h.pcap"), level="bodies"):
        metrics.add(ex)
    s = _scrape(metrics)
    shown = {dict(ls)["client_id"] for (name, ls), _ in s.items()
             if name == "kafka_dissect_requests_total"}
    assert '[/]"quote\\x0anew\\x1bline\\\\' in shown    # control characters escaped
    assert max(len(v) for v in shown) == MAX_VALUE_CHARS


@pytest.mark.integration
def test_scraped_during_a_live_capture_of_real_traffic(tmp_path):
    require_root()
    require_module("confluent_kafka")
    from tests.traffic import Broker, create_topics, librdkafka_consume, librdkafka_produce, \
        make_records
    err_file = tmp_path / "live.err"
    records = make_records("metrics-a", 60, seed=3)
    with Broker() as broker:
        with live_process(["--port", str(broker.port), "--format", "jsonl", "--stats-every",
                           "0", "--metrics-port", "0", "--metrics-addr", "127.0.0.1"],
                          err_file) as proc:
            m = wait_for(err_file, r"metrics on (http://\S+/metrics)")
            assert m, err_file.read_text()
            assert wait_for(err_file, "listening on lo"), err_file.read_text()
            url = m.group(1)
            create_topics(broker.bootstrap, ["metrics-a"], partitions=2)
            during = _samples(urllib.request.urlopen(url, timeout=10).read().decode())
            assert _total(during, "kafka_dissect_requests_total", api="CreateTopics") >= 1
            produced = librdkafka_produce(broker.bootstrap, records, client_id="metrics-producer")
            consumed = librdkafka_consume(broker.bootstrap, ["metrics-a"], len(records),
                                          client_id="metrics-consumer")
            assert len(produced.produced) == len(consumed.consumed) == len(records)
            time.sleep(1.5)   # the clients are gone: every exchange is out
            scraped = _samples(urllib.request.urlopen(url, timeout=10).read().decode())
            out = stop(proc)
    assert proc.returncode == 0, err_file.read_text()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) > 20
    printed = Counter((r["api_name"], r["client_id"] or "") for r in rows)
    counted = Counter({(dict(ls)["api"], dict(ls)["client_id"]): v
                       for (name, ls), v in scraped.items()
                       if name == "kafka_dissect_requests_total"})
    assert counted == printed
    assert _total(scraped, "kafka_dissect_errors_total") == sum(
        1 for r in rows if r["error_code"])
    assert _total(scraped, "kafka_dissect_request_bytes_total") == sum(
        r["request_bytes"] or 0 for r in rows)
    assert _total(scraped, "kafka_dissect_response_bytes_total") == sum(
        r["response_bytes"] or 0 for r in rows)
    assert _total(scraped, "kafka_dissect_latency_seconds_count") == sum(
        1 for r in rows if r["latency_ms"] is not None)
    produce = sum(1 for r in rows if r["api_name"] == "Produce")
    assert _total(scraped, "kafka_dissect_topic_requests_total", api="Produce",
                  topic="metrics-a") == produce > 0
    assert _total(scraped, "kafka_dissect_packets_total") > 0
    assert ("kafka_dissect_kernel_drops_total", frozenset()) in scraped
