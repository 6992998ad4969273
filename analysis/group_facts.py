"""Group membership details per exchange (exchange columns from the decoded bodies), for the
rebalances: the topics a member subscribes to (JoinGroup's consumer-protocol subscription, or
ConsumerGroupHeartbeat's subscribed topic names), the partitions it is assigned (SyncGroup's
consumer-protocol assignment, or ConsumerGroupHeartbeat's assignment, topics by id) and the member
epoch a ConsumerGroupHeartbeat response gives (KIP-848)."""
from __future__ import annotations

import uuid

JOIN_GROUP, SYNC_GROUP, CONSUMER_GROUP_HEARTBEAT = 11, 14, 68

GROUP_COLUMNS = (
    ("subscribed_topics", "list<string>"),
    ("assigned_partitions", "list<string>"),   # "topic:partition"
    ("response_epoch", "int32"),
)
_NONE = (None,) * len(GROUP_COLUMNS)


def _decoded(field):
    return getattr(field, "decoded", None)


def _topic(value):
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    return str(value) if value is not None else None


def _assignment(pairs) -> list:
    return [f"{_topic(t)}:{p}" for t, parts in pairs for p in parts or ()]


def group_facts(ex, req, resp) -> tuple:
    """The GROUP_COLUMNS values of an exchange."""
    key = ex.api_key
    g = getattr
    try:
        if key == JOIN_GROUP and req is not None:
            for proto in g(req, "protocols", None) or ():
                sub = _decoded(g(proto, "metadata", None))
                if sub is not None and g(sub, "topics", None) is not None:
                    return (list(sub.topics), None, None)
            return _NONE
        if key == SYNC_GROUP and resp is not None:
            a = _decoded(g(resp, "assignment", None))
            if a is not None:
                return (None, _assignment((tp.topic, tp.partitions)
                                          for tp in a.assigned_partitions or ()), None)
            return _NONE
        if key == CONSUMER_GROUP_HEARTBEAT:
            topics = g(req, "subscribed_topic_names", None) if req is not None else None
            epoch = assigned = None
            if resp is not None:
                epoch = g(resp, "member_epoch", None)
                a = g(resp, "assignment", None)
                if a is not None:
                    assigned = _assignment((tp.topic_id, tp.partitions)
                                           for tp in a.topic_partitions or ())
            return (list(topics) if topics is not None else None, assigned,
                    epoch if isinstance(epoch, int) else None)
    except (AttributeError, TypeError):
        pass   # a partially decoded body
    return _NONE
