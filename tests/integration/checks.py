"""Compare the dissector's exchanges with what real clients say they sent (tests.traffic.Request).

The clients' own debug logs are the truth: every request they logged must come out of the capture
with the same client id, api key, api version and correlation id, and nothing else may.
"""
from __future__ import annotations

from collections import Counter

from dissector.model import OK, UNANSWERED


def request_key(client_id, api_key, api_version, correlation_id):
    return (client_id, api_key, api_version, correlation_id)


def compare_requests(exchanges, requests):
    """(missing, unexpected): Counters of request keys the clients logged but the capture lacks,
    and of requests the capture has but no client logged."""
    seen = Counter(request_key(e.client_id, e.api_key, e.api_version, e.correlation_id)
                   for e in exchanges if e.request is not None)
    logged = Counter(request_key(r.client_id, r.api_key, r.api_version, r.correlation_id)
                     for r in requests)
    return logged - seen, seen - logged


def unexplained_statuses(exchanges, requests):
    """Exchanges whose status is not `ok` and that the clients' logs do not explain.

    The one explained case: a request the client never saw answered (it closed the connection
    first) may stay `unanswered` if it is the last request of its connection in the capture (the
    broker never answered it, so the capture cannot hold an answer)."""
    unseen = Counter(request_key(r.client_id, r.api_key, r.api_version, r.correlation_id)
                     for r in requests if not r.answered)
    last_of_conn = {}
    for e in exchanges:
        if e.request is not None:
            last = last_of_conn.get(e.connection.connection_id)
            if last is None or e.request.stream_offset > last.request.stream_offset:
                last_of_conn[e.connection.connection_id] = e
    bad = []
    for e in exchanges:
        if e.status == OK:
            continue
        key = request_key(e.client_id, e.api_key, e.api_version, e.correlation_id)
        last = last_of_conn.get(e.connection.connection_id)
        if e.status == UNANSWERED and unseen[key] and last is e:
            unseen[key] -= 1
            continue
        bad.append(e)
    return bad


def all_issues(dissection, exchanges):
    return list(dissection.issues) + [i for e in exchanges for i in e.issues]


def exchange_signature(e):
    """What must not change when the same traffic is cut into other TCP segments."""
    return (e.connection.client_port, e.client_id, e.api_key, e.api_version, e.correlation_id,
            e.status, e.request.first_ts if e.request else None,
            e.request.last_ts if e.request else None,
            e.response.first_ts if e.response else None,
            e.response.last_ts if e.response else None,
            e.request.length if e.request else None, e.response.length if e.response else None)
