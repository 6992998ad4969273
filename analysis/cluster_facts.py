"""What the brokers and clients say about the cluster, per exchange (exchange columns from the
decoded bodies): the brokers a Metadata or DescribeCluster response advertises, with the cluster
id and controller; the coordinators FindCoordinator answers, with the keys they coordinate; the
client software an ApiVersions v3+ request names; the version ranges its response offers.

Partition leaders are in the partitions table (Metadata rows: leader_id, leader_epoch).
"""
from __future__ import annotations

METADATA, FIND_COORDINATOR, API_VERSIONS, DESCRIBE_CLUSTER = 3, 10, 18, 60

BROKERS_TYPE = "list<struct<node_id: int32, host: string, port: int32, rack: string>>"
VERSIONS_TYPE = "list<struct<api_key: int16, min_version: int16, max_version: int16>>"
CLUSTER_COLUMNS = (
    ("cluster_id", "string"),
    ("controller_id", "int32"),
    ("brokers", BROKERS_TYPE),             # advertised brokers, or the coordinators found
    ("coordinator_keys", "list<string>"),  # FindCoordinator: the key of each of `brokers`
    ("client_software_name", "string"),
    ("client_software_version", "string"),
    ("api_versions", VERSIONS_TYPE),       # ApiVersions response: the broker's ranges
)
_NONE = (None,) * len(CLUSTER_COLUMNS)
# (version, an ApiVersions response's bytes after its correlation id) -> its ranges. Every connection
# starts with one and a cluster gives a few distinct answers: clients that reconnect made this
# list the most of the column's cost (0.5 s for 17,853 connections).
_RANGES = {}
MAX_RANGES = 256
MAX_KEPT_ANSWER = 4096   # bytes: a broker's answer is under 1 kB; a forged one is not kept


def _str(v):
    return v if isinstance(v, str) else None


def _int(v):
    return v if isinstance(v, int) else None


def _broker(node_id, b):
    return {"node_id": _int(node_id), "host": _str(getattr(b, "host", None)),
            "port": _int(getattr(b, "port", None)), "rack": _str(getattr(b, "rack", None))}


def cluster_facts(ex, req, resp) -> tuple:
    """The CLUSTER_COLUMNS values of an exchange (request and response bodies, None when not
    decoded)."""
    key = ex.api_key
    g = getattr
    try:
        if key == METADATA and resp is not None:
            brokers = [_broker(g(b, "node_id", None), b) for b in g(resp, "brokers", None) or ()]
            return (_str(g(resp, "cluster_id", None)), _int(g(resp, "controller_id", None)),
                    brokers, None, None, None, None)
        if key == DESCRIBE_CLUSTER and resp is not None:
            brokers = [_broker(g(b, "broker_id", None), b) for b in g(resp, "brokers", None) or ()]
            return (_str(g(resp, "cluster_id", None)), _int(g(resp, "controller_id", None)),
                    brokers, None, None, None, None)
        if key == FIND_COORDINATOR and resp is not None:
            found = g(resp, "coordinators", None)
            if found:   # v4+: one per key asked
                brokers = [_broker(g(c, "node_id", None), c) for c in found
                           if not g(c, "error_code", 0)]
                keys = [_str(g(c, "key", None)) for c in found if not g(c, "error_code", 0)]
            elif not g(resp, "error_code", 0) and g(resp, "node_id", None) is not None:
                brokers = [_broker(g(resp, "node_id", None), resp)]
                keys = [_str(g(req, "key", None)) if req is not None else None]
            else:
                brokers = keys = []
            return (None, None, brokers, keys, None, None, None)
        if key == API_VERSIONS:
            named = (ex.api_version or 0) >= 3   # the fields are v3+
            if named and req is None:
                req = unkept_body(ex, False)
            name = _str(g(req, "client_software_name", None)) if named else None
            version = _str(g(req, "client_software_version", None)) if named else None
            return (None, None, None, None, name, version, _ranges(ex, resp))
    except (AttributeError, TypeError):
        pass   # a partially decoded body
    return _NONE


def unkept_body(ex, response):
    """The body of the exchange's response (or request) where it was walked and not kept,
    decoded from its bytes; None where there is none to decode (no message, or one whose body
    was not read: the headers level)."""
    msg, frame = (ex.response_msg, ex.response) if response else (ex.request_msg, ex.request)
    data = getattr(frame, "data", None)
    if msg is None or msg.summary is None or data is None:
        return None
    if msg.body is not None:
        return msg.body
    from dissector.protocol.decode import decode_request_body, decode_response
    if response:
        return decode_response(data, msg.api_key, msg.api_version).body
    return decode_request_body(data, msg.header_size, msg.api_key, msg.api_version, [])


def _ranges(ex, resp):
    """The api_versions value of an ApiVersions response, from its body `resp` or, where it was
    not kept (analysis.load keeps none), the body decoded from the bytes: the same list for the
    same version and bytes (shared by rows, never changed), decoded once (clients that
    reconnect get the same answer each time); None without ranges."""
    data = getattr(ex.response, "data", None)
    key = ((ex.api_version, bytes(data[4:]))
           if data is not None and len(data) <= MAX_KEPT_ANSWER else None)
    ranges = _RANGES.get(key) if key is not None else None
    if ranges is None:
        if resp is None:
            resp = unkept_body(ex, True)
        if resp is None or not getattr(resp, "api_keys", None):
            return None
        g = getattr
        ranges = [{"api_key": _int(g(a, "api_key", None)),
                   "min_version": _int(g(a, "min_version", None)),
                   "max_version": _int(g(a, "max_version", None))} for a in resp.api_keys]
        if key is not None:
            if len(_RANGES) >= MAX_RANGES:   # forged answers: each different
                _RANGES.clear()
            _RANGES[key] = ranges
    return ranges
