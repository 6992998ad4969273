"""The `exchanges` and `issues` table schemas and their row values (DESIGN.md table contracts).

One schema drives every output: the CLI's CSV and JSON lines here, the pandas/Arrow tables and
Parquet in `analysis`, and the Spark job. Types are Arrow type names; timestamps are integer
nanoseconds since the epoch (UTC) in rows and become timestamp[ns, UTC] columns in Arrow.
"""
from __future__ import annotations

from .protocol.names import api_name, error_name

SASL_TOKEN_NAME = "SaslToken"

EXCHANGE_COLUMNS = (
    ("connection_id", "int64"),
    ("client_ip", "string"),
    ("client_port", "int32"),
    ("broker_ip", "string"),
    ("broker_port", "int32"),
    ("api_key", "int16"),
    ("api_name", "string"),
    ("api_version", "int16"),
    ("correlation_id", "int32"),
    ("client_id", "string"),
    ("request_ts", "timestamp"),
    ("request_end_ts", "timestamp"),
    ("response_ts", "timestamp"),
    ("response_end_ts", "timestamp"),
    ("latency_ms", "float64"),
    ("total_ms", "float64"),
    ("request_bytes", "int64"),
    ("response_bytes", "int64"),
    ("error_code", "int16"),
    ("error_name", "string"),
    ("error_count", "int32"),
    ("throttle_time_ms", "int32"),
    ("topics", "list<string>"),
    ("partition_count", "int32"),
    ("record_count", "int64"),
    ("status", "string"),
    ("issue_count", "int32"),
    # beyond the contract: where to look in the capture, and record-set sizes
    ("exchange", "int64"),
    ("records_bytes", "int64"),
    ("records_uncompressed_bytes", "int64"),
    ("request_packet", "int64"),
    ("response_packet", "int64"),
    # the connection's TLS, null in plaintext (dissector.tls)
    ("tls_version", "string"),
    ("tls_cipher", "string"),
)

# The TLS columns of the `connections` table (null for a plaintext connection): the protocol
# version, cipher suite, server name and application protocol negotiated, whether any of its
# application data was decrypted, and the time from the ClientHello to the first application data.
CONNECTION_TLS_COLUMNS = (
    ("tls_version", "string"),
    ("tls_cipher", "string"),
    ("tls_sni", "string"),
    ("tls_alpn", "string"),
    ("tls_decrypted", "bool"),
    ("tls_handshake_ms", "float64"),
)

ISSUE_COLUMNS = (
    ("connection_id", "int64"),
    ("frame", "int64"),
    ("stream_offset", "int64"),
    ("code", "string"),
    ("severity", "string"),
    ("detail", "string"),
)

EXCHANGE_COLUMN_NAMES = tuple(name for name, _ in EXCHANGE_COLUMNS)
TIMESTAMP_COLUMNS = frozenset(name for name, kind in EXCHANGE_COLUMNS if kind == "timestamp")


def exchange_api_name(ex) -> str | None:
    if ex.raw_sasl:
        return SASL_TOKEN_NAME
    return None if ex.api_key is None else api_name(ex.api_key)


def py_exchange_row(ex) -> tuple:
    """The exchange's values in EXCHANGE_COLUMNS order. _tablerow.exchange_row is the same
    compiled."""
    c = ex.connection
    req = ex.request
    resp = ex.response
    code = ex.error_code
    tls = c.tls
    return (
        c.connection_id, c.client_ip, c.client_port, c.broker_ip, c.broker_port,
        ex.api_key, exchange_api_name(ex), ex.api_version, ex.correlation_id, ex.client_id,
        req.first_ts if req else None, req.last_ts if req else None,
        resp.first_ts if resp else None, resp.last_ts if resp else None,
        ex.latency_ms, ex.total_ms,
        req.length if req else None, resp.length if resp else None,
        code, None if code is None else error_name(code), ex.error_count, ex.throttle_time_ms,
        ex.topics, ex.partition_count, ex.record_count, ex.status, len(ex.issues),
        ex.index, ex.records_bytes, ex.records_uncompressed_bytes,
        req.first_packet if req else None, resp.first_packet if resp else None,
        tls.version_name if tls is not None else None,
        tls.cipher_name if tls is not None else None,
    )


try:
    from ._tablerow import configure, exchange_row
    from .model import Exchange
    configure(Exchange, api_name, error_name, SASL_TOKEN_NAME)
except ImportError:   # no compiler where it was installed: the same in Python
    exchange_row = py_exchange_row


def connection_tls_row(c) -> tuple:
    """The connection's values in CONNECTION_TLS_COLUMNS order."""
    tls = c.tls
    if tls is None:
        return (None,) * len(CONNECTION_TLS_COLUMNS)
    return (tls.version_name, tls.cipher_name, tls.sni, tls.alpn, tls.decrypted, tls.handshake_ms)


def issue_row(issue) -> tuple:
    return (issue.connection_id, issue.frame, issue.stream_offset, issue.code, issue.severity,
            issue.detail)
