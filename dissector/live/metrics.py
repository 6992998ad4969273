"""Live capture's numbers for Prometheus (`live --metrics-port`), with the official client library.

Per api, broker and client id: requests, errors (by error name), unanswered requests, request and
response bytes and a latency histogram; per api and topic: requests and a latency histogram.
Label values come from the network, so each label keeps at most `max_values` distinct values:
later ones are reported as `other`, and every exchange so folded is counted in
kafka_dissect_label_overflow_total{label=...}. Distinct values per label do not bound their
combinations (100 apis x 100 brokers x 100 client ids), so each family also keeps at most
`max_series` label sets (default 10 x max_values): past it a new set keeps its api and broker
with client id (or topic, or error) `other`, and past twice that becomes all `other` (counted as
label="series"). Memory and the number
of series stay bounded whatever a busy or hostile network sends. Values are escaped (dissector.text_safety) and cut to
MAX_VALUE_CHARS.
"""
from __future__ import annotations

from ..model import UNANSWERED
from ..protocol.names import error_name
from ..tables import exchange_api_name
from ..text_safety import escape

OTHER = "other"
MAX_VALUE_CHARS = 120
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                     5.0, 10.0, 30.0)
EXCHANGE_LABELS = ("api", "broker", "client_id")
TOPIC_LABELS = ("api", "topic")


class LabelCap:
    """At most `limit` distinct values per label; the rest become OTHER (and are counted)."""

    def __init__(self, limit: int, overflow):
        self.limit = limit
        self.overflow = overflow
        self.seen: dict[str, set] = {}

    def __call__(self, label: str, value) -> str:
        text = escape(value) if value is not None else ""
        if len(text) > MAX_VALUE_CHARS:
            text = text[:MAX_VALUE_CHARS - 1] + "\u2026"
        seen = self.seen.setdefault(label, set())
        if text in seen:
            return text
        if len(seen) < self.limit:
            seen.add(text)
            return text
        self.overflow.labels(label).inc()
        return OTHER


class LiveMetrics:
    """Feed it every exchange live capture prints; a scrape reads the registry's current state."""

    def __init__(self, max_values: int = 100, max_series: int | None = None):
        from prometheus_client import CollectorRegistry, Counter, Histogram
        r = self.registry = CollectorRegistry()
        ex = EXCHANGE_LABELS
        self.requests = Counter("kafka_dissect_requests", "Kafka requests seen (exchanges)", ex,
                                registry=r)
        self.errors = Counter("kafka_dissect_errors", "Exchanges whose response carried an "
                              "error code (the first one, by name)", ex + ("error",), registry=r)
        self.unanswered = Counter("kafka_dissect_unanswered", "Requests without a response "
                                  "within --request-timeout", ex, registry=r)
        self.request_bytes = Counter("kafka_dissect_request_bytes", "Request bytes on the wire "
                                     "(size prefix included)", ex, registry=r)
        self.response_bytes = Counter("kafka_dissect_response_bytes", "Response bytes on the "
                                      "wire (size prefix included)", ex, registry=r)
        self.latency = Histogram("kafka_dissect_latency_seconds", "Request end to response start",
                                 ex, buckets=LATENCY_BUCKETS_S, registry=r)
        self.topic_requests = Counter("kafka_dissect_topic_requests", "Requests naming the "
                                      "topic", TOPIC_LABELS, registry=r)
        self.topic_latency = Histogram("kafka_dissect_topic_latency_seconds", "Latency of "
                                       "requests naming the topic", TOPIC_LABELS,
                                       buckets=LATENCY_BUCKETS_S, registry=r)
        overflow = Counter("kafka_dissect_label_overflow", "Exchanges whose label value was "
                           "reported as 'other' (past the per-label cap of distinct values)",
                           ("label",), registry=r)
        self.packets = Counter("kafka_dissect_packets", "Packets captured", registry=r)
        self.kernel_drops = Counter("kafka_dissect_kernel_drops", "Packets the kernel dropped "
                                    "before capture (raise --buffer if this grows)", registry=r)
        self._counted = (0, 0)
        self.cap = LabelCap(max_values, overflow)
        self.max_series = max_series if max_series is not None else 10 * max_values
        self._overflow = overflow
        self._children = {}   # label values -> the per-exchange series (labels() looked up once)
        self._topic_children = {}
        self._error_keys = set()

    def _bounded(self, key, known):
        """`key`, or its fold into `other` when `known` (a family's label sets) is full; the
        folds themselves may take as many sets again, then everything is `other`."""
        if key in known or len(known) < self.max_series:
            return key
        self._overflow.labels("series").inc()
        fold = key[:-1] + (OTHER,)
        if fold in known or len(known) < 2 * self.max_series:
            return fold
        return (OTHER,) * len(key)

    def add(self, ex) -> None:
        cap = self.cap
        c = ex.connection
        api = cap("api", exchange_api_name(ex) or "unknown")
        key = (api, cap("broker", f"{c.broker_ip}:{c.broker_port}"),
               cap("client_id", ex.client_id))
        series = self._children.get(key)
        if series is None:
            key = self._bounded(key, self._children)
            series = self._children.get(key)
        if series is None:
            series = self._children[key] = (
                self.requests.labels(*key), self.unanswered.labels(*key),
                self.request_bytes.labels(*key), self.response_bytes.labels(*key),
                self.latency.labels(*key))
        requests, unanswered, req_bytes, resp_bytes, latency = series
        requests.inc()
        if ex.request is not None:
            req_bytes.inc(ex.request.length)
        if ex.response is not None:
            resp_bytes.inc(ex.response.length)
        if ex.status == UNANSWERED:
            unanswered.inc()
        if ex.error_code:
            ekey = self._bounded(key + (cap("error", error_name(ex.error_code)),),
                                 self._error_keys)
            self._error_keys.add(ekey)
            self.errors.labels(*ekey).inc()
        seconds = None if ex.latency_ms is None else ex.latency_ms / 1000.0
        if seconds is not None:
            latency.observe(seconds)
        for topic in set(ex.topics or ()):
            tkey = (api, cap("topic", topic))
            tseries = self._topic_children.get(tkey)
            if tseries is None:
                tkey = self._bounded(tkey, self._topic_children)
                tseries = self._topic_children.get(tkey)
            if tseries is None:
                tseries = self._topic_children[tkey] = (self.topic_requests.labels(*tkey),
                                                        self.topic_latency.labels(*tkey))
            tseries[0].inc()
            if seconds is not None:
                tseries[1].observe(seconds)

    def count_packets(self, captured: int, dropped: int) -> None:
        """The capture's running totals of packets captured and dropped by the kernel."""
        self.packets.inc(captured - self._counted[0])
        self.kernel_drops.inc(dropped - self._counted[1])
        self._counted = (captured, dropped)

    def serve(self, port: int, addr: str = ""):
        """Serve /metrics on addr:port (port 0: any free one) in a daemon thread; returns the
        server (.server_port, .shutdown())."""
        from prometheus_client import start_http_server
        server, _ = start_http_server(port, addr or "0.0.0.0", registry=self.registry)
        return server
