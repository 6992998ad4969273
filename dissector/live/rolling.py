"""Per-api numbers for the live view (a sliding window) and the final summary (whole run).

Memory stays bounded however long the run: the window keeps at most MAX_RECENT exchanges (its
rates undercount beyond that, about 20k exchanges/s over 10 s, more than one Python process
dissects), and the whole-run latencies live in log-spaced histograms (1% wide buckets) rather
than in lists.
"""
from __future__ import annotations

import math
from collections import Counter, deque

from ..model import UNANSWERED
from ..tables import exchange_api_name

MAX_RECENT = 200_000
PERCENTILES = (50, 90, 99)
_LOG_STEP = math.log(1.01)


class LatencyHistogram:
    """Latencies in ms, bucketed at 1% resolution from 1 µs upward; exact count and max."""
    __slots__ = ("buckets", "count", "max")

    def __init__(self):
        self.buckets = Counter()
        self.count = 0
        self.max = None

    def add(self, ms: float) -> None:
        us = ms * 1000.0
        self.buckets[int(math.log(us) / _LOG_STEP) if us > 1.0 else 0] += 1
        self.count += 1
        if self.max is None or ms > self.max:
            self.max = ms

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (nearest rank), as the upper edge of its bucket, capped at max."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100.0 * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(math.exp((index + 1) * _LOG_STEP) / 1000.0, self.max)
        return self.max


def nearest_rank(sorted_values, q):
    """The q-th percentile of sorted values (nearest-rank method); None when empty."""
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(q / 100.0 * len(sorted_values))) - 1]


class ApiTotals:
    __slots__ = ("requests", "errors", "unanswered", "latency")

    def __init__(self):
        self.requests = 0
        self.errors = 0
        self.unanswered = 0
        self.latency = LatencyHistogram()


class Row:
    """One api's line in a view or summary: latencies in ms (None when nothing was answered)."""
    __slots__ = ("api", "requests", "rate", "p50", "p90", "p99", "max", "errors", "unanswered")

    def __init__(self, api, requests, rate, percentiles, max_ms, errors, unanswered):
        self.api = api
        self.requests = requests
        self.rate = rate
        self.p50, self.p90, self.p99 = percentiles
        self.max = max_ms
        self.errors = errors
        self.unanswered = unanswered


class RollingStats:
    """Feed every exchange printed; ask for window rows (live view) or total rows (summary)."""

    def __init__(self, window_s: float = 10.0):
        self.window_ns = int(window_s * 1e9)
        self.exchanges = 0
        self.statuses = Counter()
        self.totals: dict[str, ApiTotals] = {}
        self._recent = deque(maxlen=MAX_RECENT)   # (ts_ns, api, latency_ms, error, unanswered)

    def add(self, ex) -> None:
        api = exchange_api_name(ex) or "?"
        frame = ex.response or ex.request
        latency = ex.latency_ms
        error = bool(ex.error_code)
        unanswered = ex.status == UNANSWERED
        self.exchanges += 1
        self.statuses[ex.status] += 1
        t = self.totals.get(api)
        if t is None:
            t = self.totals[api] = ApiTotals()
        t.requests += 1
        t.errors += error
        t.unanswered += unanswered
        if latency is not None:
            t.latency.add(latency)
        self._recent.append((frame.last_ts, api, latency, error, unanswered))

    def window_rows(self, now_ns: int, elapsed_s: float | None = None) -> list[Row]:
        """Rows for the last window; rates over the time run so far when that is shorter."""
        recent = self._recent
        cutoff = now_ns - self.window_ns
        while recent and recent[0][0] < cutoff:
            recent.popleft()
        per_api = {}
        for _, api, latency, error, unanswered in recent:
            acc = per_api.get(api)
            if acc is None:
                acc = per_api[api] = [0, [], 0, 0]
            acc[0] += 1
            if latency is not None:
                acc[1].append(latency)
            acc[2] += error
            acc[3] += unanswered
        window_s = self.window_ns / 1e9
        if elapsed_s is not None:
            window_s = max(min(window_s, elapsed_s), 1.0)
        rows = []
        for api, (n, lat, errors, unanswered) in per_api.items():
            lat.sort()
            rows.append(Row(api, n, n / window_s, [nearest_rank(lat, q) for q in PERCENTILES],
                            lat[-1] if lat else None, errors, unanswered))
        rows.sort(key=lambda r: (-r.requests, r.api))
        return rows

    def total_rows(self, elapsed_s: float) -> list[Row]:
        rows = [Row(api, t.requests, t.requests / elapsed_s if elapsed_s > 0 else 0.0,
                    [t.latency.percentile(q) for q in PERCENTILES], t.latency.max, t.errors,
                    t.unanswered)
                for api, t in self.totals.items()]
        rows.sort(key=lambda r: (-r.requests, r.api))
        return rows
