"""The decoded form of one Kafka message (request or response)."""
from __future__ import annotations


class Message:
    """A decoded request or response.

    body: the generated body object (None when only the header was decoded or the api/version is
    unknown). header_tags: {tag: raw bytes or decoded value} from a flexible header. issues: Issue
    objects whose stream_offset is the byte offset inside this message (after the size prefix).
    summary: what the session's body walk collected for the exchange table (dissector.decoding).
    """
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_tags", "body",
                 "issues", "header_size", "summary")

    def __init__(self, api_key, api_version, correlation_id, client_id=None, header_tags=None,
                 body=None, issues=None, header_size=0):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_tags = header_tags or {}
        self.body = body
        self.issues = issues if issues is not None else []
        self.header_size = header_size
        self.summary = None

    def __repr__(self):
        return (f"Message(api_key={self.api_key}, v{self.api_version}, corr={self.correlation_id}, "
                f"client_id={self.client_id!r}, body={type(self.body).__name__}, "
                f"issues={len(self.issues)})")
