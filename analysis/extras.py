"""Values of EXCHANGE_EXTRA_COLUMNS: request settings and group membership from decoded bodies,
then the latency anatomy (anatomy.py) from the TCP layer, then what the cluster said
(cluster_facts.py)."""
from __future__ import annotations

from .anatomy import exchange_anatomy
from .cluster_facts import cluster_facts
from .group_facts import group_facts

JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT = 11, 68
_NONE = (None,) * 10


def exchange_extras(ex) -> tuple:
    """The EXCHANGE_EXTRA_COLUMNS values of an exchange."""
    req = ex.request_msg.body if ex.request_msg is not None else None
    resp = ex.response_msg.body if ex.response_msg is not None else None
    return (_settings(ex, req, resp) + exchange_anatomy(ex) + cluster_facts(ex, req, resp)
            + group_facts(ex, req, resp))


def _settings(ex, req, resp) -> tuple:
    """(acks, transactional_id, max_wait_ms, min_bytes, isolation_level, group_id, member_id,
    generation_id, top_error_code, replica_id) of an exchange; None where the body lacks the
    field or was not decoded."""
    g = getattr
    top_error = (_int(g(resp, "error_code", None)) if resp is not None
                 else _walked_error(ex.response_msg))
    if req is None:
        return _walked_settings(ex.request_msg, top_error)
    cls = type(req)
    read = _READERS[cls] if cls in _READERS else _reader(cls, ex.api_key)
    if read is not None:
        try:
            return read(req, top_error)
        except AttributeError:   # a partially decoded body: a field not set
            pass
    return _looked_up(ex, req, resp, top_error)


def _looked_up(ex, req, resp, top_error) -> tuple:
    """_settings' tuple of a request, each field looked up with a default: the general way,
    and the specification of the readers (_reader)."""
    g = getattr
    member_id = generation = group_id = None
    if ex.api_key in (JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT) or _grouped(type(req)):
        member_id, generation, group_id = _membership(ex, req, resp)
    return (_int(g(req, "acks", None)), _str(g(req, "transactional_id", None)),
            _int(g(req, "max_wait_ms", None)), _int(g(req, "min_bytes", None)),
            _int(g(req, "isolation_level", None)), _str(group_id), _str(member_id),
            _int(generation), top_error, _replica_id(req))


_GROUP_FIELDS = ("group_id", "groups", "member_id", "members", "generation_id",
                 "member_epoch", "generation_id_or_member_epoch")
_GROUPED = {}   # request body class -> whether its objects can have a _GROUP_FIELDS field
_READERS = {}   # request body class -> its settings read without getattr's defaults, or None
_SETTINGS = (("acks", "int"), ("transactional_id", "str"), ("max_wait_ms", "int"),
             ("min_bytes", "int"), ("isolation_level", "int"))

# what the byte walk hands over of a request not kept (summary_plan.RowSpec: analysis.load's
# Produce and Fetch): the _SETTINGS, then the replica id, which Fetch v15+ moved into the tagged
# replica_state (set there where that is on the wire, as _replica_id reads it)
WALKED_SETTINGS = tuple(name for name, _ in _SETTINGS) + ("replica_id",)
WALKED_NESTED = (("replica_state", "replica_id", len(_SETTINGS)),)


def _walked_settings(msg, top_error) -> tuple:
    """_settings' tuple of a request not kept: from what the byte walk handed over of it (a
    request that names no group: the values of its typed fields or their defaults, as the
    readers keep them), else None but the top error code."""
    summary = msg.summary if msg is not None else None
    settings = summary.settings if summary is not None else None
    if settings is None:
        return _NONE[:-2] + (top_error, None)
    acks, txn, wait, least, isolation, rid = settings
    return acks, txn, wait, least, isolation, None, None, None, top_error, rid


def _plain(cls) -> bool:
    """A __slots__ class with no instance dict and no attribute hook: its objects have only the
    fields its class lists."""
    return (cls.__dictoffset__ == 0 and not hasattr(cls, "__getattr__")
            and cls.__getattribute__ is object.__getattribute__)


def _grouped(cls) -> bool:
    """Whether a request of `cls` can name a group or member. Produce's and Fetch's cannot:
    their seven lookups, in vain, were a third of the settings' time."""
    grouped = _GROUPED.get(cls)
    if grouped is None:
        grouped = _GROUPED[cls] = not _plain(cls) or any(hasattr(cls, n) for n in _GROUP_FIELDS)
    return grouped


def _reader(cls, api_key):
    """`read(req, top_error)`: _settings' tuple for a request of `cls` that names no group,
    reading the fields its class has and no other (Produce's and Fetch's: a third of the
    settings' time went to getattr's defaults); None for the others (the general way)."""
    read = None
    if api_key not in (JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT) and not _grouped(cls):
        fields = [(name, kind) for name, kind in _SETTINGS if hasattr(cls, name)]
        lines = ["def read(req, top_error):"]
        lines += [f"    {name} = req.{name}" for name, _ in fields]
        rid = "None"
        if hasattr(cls, "replica_id") or hasattr(cls, "replica_state"):   # as _replica_id
            rid = "rid if isinstance(rid, int) else None"
            lines.append(f"    rid = {'req.replica_id' if hasattr(cls, 'replica_id') else 'None'}")
            if hasattr(cls, "replica_state"):
                lines += ["    if req.replica_state is not None:",
                          "        rid = getattr(req.replica_state, 'replica_id', None)"]
        given = dict(fields)
        values = [f"{name} if isinstance({name}, {given[name]}) else None" if name in given
                  else "None" for name, _ in _SETTINGS]
        lines.append(f"    return ({', '.join(values)}, None, None, None, top_error, {rid})")
        scope = {}
        exec("\n".join(lines), scope)   # names from _SETTINGS only: nothing from a capture
        read = scope["read"]
    _READERS[cls] = read
    return read


def _membership(ex, req, resp) -> tuple:
    """(member_id, generation_id, group_id) of a group request."""
    g = getattr
    member_id = g(req, "member_id", None)
    generation = g(req, "generation_id", None)
    if generation is None:
        generation = g(req, "member_epoch", None)
    if generation is None:
        generation = g(req, "generation_id_or_member_epoch", None)
    if not member_id:
        members = g(req, "members", None)   # LeaveGroup v3+: the members leaving
        if members:
            member_id = g(members[0], "member_id", None)
    if ex.api_key == CONSUMER_GROUP_HEARTBEAT and resp is not None:
        # v0: a joining member sends no id, the coordinator's answer gives it
        member_id = g(resp, "member_id", None) or member_id
    if ex.api_key == JOIN_GROUP and resp is not None:
        # the member id and generation the coordinator assigned
        member_id = g(resp, "member_id", None) or member_id
        generation = g(resp, "generation_id", generation)
    group_id = g(req, "group_id", None)
    if group_id is None:
        groups = g(req, "groups", None)
        if groups:
            group_id = g(groups[0], "group_id", None)
    return member_id, generation, group_id


def _walked_error(msg):
    """The body's error_code of a response walked and not kept (analysis.load keeps no
    ApiVersions body): the walk's, the same value."""
    summary = msg.summary if msg is not None and msg.body is None else None
    return _int(summary.error_code) if summary is not None else None


def _replica_id(req):
    """A Fetch's or ListOffsets' replica id: a follower broker's id, -1 for a consumer. Fetch
    v15+ moved it into the tagged replica_state (its replica_id field then holds the absent
    field's default, -1); before v15 replica_state is never set."""
    state = getattr(req, "replica_state", None)
    if state is not None:
        return _int(getattr(state, "replica_id", None))
    return _int(getattr(req, "replica_id", None))


def _str(v):
    return v if isinstance(v, str) else None


def _int(v):
    return v if isinstance(v, int) else None
