"""Rolling and whole-run numbers against exact computations on the same latencies."""
import math
import random

from dissector.live.rolling import LatencyHistogram, RollingStats, nearest_rank
from dissector.model import OK, UNANSWERED, Connection, Exchange, Frame


def _frame(conn, direction, ts):
    return Frame(conn, direction, 0, 12, b"", 1, 1, ts, ts)


def _exchange(api_key, request_ts, latency_ms=None, error_code=0, status=OK):
    conn = Connection(1, "10.0.0.1", 40000, "10.0.0.2", 9092)
    req = _frame(conn, 0, request_ts)
    resp = None if latency_ms is None else _frame(conn, 1, request_ts + int(latency_ms * 1e6))
    ex = Exchange(conn, req, resp, api_key, 0, 1, "c", status)
    ex.error_code = error_code
    return ex


def test_nearest_rank_by_hand():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert nearest_rank(values, 50) == 5       # ceil(0.5 * 10) = 5th value
    assert nearest_rank(values, 90) == 9
    assert nearest_rank(values, 99) == 10
    assert nearest_rank([], 50) is None


def test_histogram_percentiles_within_one_percent_of_exact():
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 1.5) for _ in range(20000)] + [0.0004, 5000.0]
    h = LatencyHistogram()
    for v in values:
        h.add(v)
    exact = sorted(values)
    for q in (50, 90, 99, 99.9):
        want = exact[math.ceil(q / 100 * len(exact)) - 1]
        got = h.percentile(q)
        assert want <= got <= want * 1.0101 + 1e-3, q
    assert h.max == 5000.0 and h.count == len(values)
    assert h.percentile(100) == 5000.0


def test_window_rows_count_rate_latency_errors_and_unanswered():
    now = 1_700_000_000 * 10**9
    s = RollingStats(window_s=10)
    # three Produce in the window (latencies 1, 2, 3 ms; one error), one Fetch unanswered,
    # and one Produce 30 s ago that has left the window
    s.add(_exchange(0, now - 30 * 10**9, 100.0))
    for i, lat in enumerate((1.0, 2.0, 3.0)):
        s.add(_exchange(0, now - 10**9 * (i + 1), lat, error_code=6 if i == 0 else 0))
    s.add(_exchange(1, now - 10**9, None, status=UNANSWERED))
    rows = {r.api: r for r in s.window_rows(now)}
    produce, fetch = rows["Produce"], rows["Fetch"]
    assert produce.requests == 3 and produce.rate == 0.3
    assert (produce.p50, produce.p90, produce.max) == (2.0, 3.0, 3.0)
    assert produce.errors == 1 and produce.unanswered == 0
    assert fetch.requests == 1 and fetch.unanswered == 1 and fetch.p50 is None
    # two seconds into a run, the rate is over those two seconds, not the whole window
    assert {r.api: r for r in s.window_rows(now, elapsed_s=2)}["Produce"].rate == 1.5
    # the whole run still counts the old one
    totals = {r.api: r for r in s.total_rows(elapsed_s=40)}
    assert totals["Produce"].requests == 4 and totals["Produce"].rate == 0.1
    assert totals["Produce"].max == 100.0
    assert s.statuses == {OK: 4, UNANSWERED: 1}
