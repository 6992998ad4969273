"""Error codes from Kafka's Errors.java: name, code and exception class of each entry.

Whether an error is retriable is decided in Java by the exception class hierarchy (subclasses of
RetriableException), which Errors.java does not show; RETRIABLE_EXCEPTIONS lists the classes that
are retriable in Apache Kafka (the "Retriable" column of Kafka's protocol guide error table).
"""
from __future__ import annotations

import re
from pathlib import Path

from .loader import SpecError

RETRIABLE_EXCEPTIONS = frozenset({
    "CorruptRecordException", "UnknownTopicOrPartitionException", "LeaderNotAvailableException",
    "NotLeaderOrFollowerException", "NotLeaderForPartitionException", "TimeoutException",
    "ReplicaNotAvailableException", "NetworkException", "CoordinatorLoadInProgressException",
    "CoordinatorNotAvailableException", "NotCoordinatorException", "NotEnoughReplicasException",
    "NotEnoughReplicasAfterAppendException", "NotControllerException", "ConcurrentTransactionsException",
    "KafkaStorageException", "FetchSessionIdNotFoundException", "InvalidFetchSessionEpochException",
    "ListenerNotFoundException", "FencedLeaderEpochException", "UnknownLeaderEpochException",
    "OffsetNotAvailableException", "PreferredLeaderNotAvailableException",
    "EligibleLeadersNotAvailableException", "ElectionNotNeededException", "UnstableOffsetCommitException",
    "ThrottlingQuotaExceededException", "UnknownTopicIdException", "InconsistentTopicIdException",
    "FetchSessionTopicIdException", "ShareSessionNotFoundException", "InvalidShareSessionEpochException",
})

_ENTRY = re.compile(r"^\s{4}([A-Z][A-Z0-9_]*)\(\s*(-?\d+)\s*,", re.M)
_EXC = re.compile(r"(\w+)::new|new\s+(\w+)\s*\(")


def parse_errors(path: Path) -> dict:
    """{code: (NAME, exception class name)} from one Errors.java."""
    text = Path(path).read_text(encoding="utf-8")
    body = text[text.index("public enum Errors"):]
    entries = list(_ENTRY.finditer(body))
    if not entries:
        raise SpecError(f"{path}: no error entries found")
    out = {}
    for m, nxt in zip(entries, entries[1:] + [None]):
        chunk = body[m.end():nxt.start() if nxt else m.end() + 2000]
        e = _EXC.search(chunk)
        exc = (e.group(1) or e.group(2)) if e else ""
        code = int(m.group(2))
        if code in out and out[code][0] != m.group(1):
            raise SpecError(f"{path}: code {code} defined twice")
        out[code] = (m.group(1), exc)
    return out


def error_table(paths) -> dict:
    """{code: (NAME, retriable)}: union over several Errors.java, the first path winning names."""
    table = {}
    for path in paths:
        for code, (name, exc) in parse_errors(path).items():
            table.setdefault(code, (name, exc in RETRIABLE_EXCEPTIONS))
    return dict(sorted(table.items()))
