"""Plans for the compiled summary walk over a body's bytes (protocol/_reader.c Reader.summarize).

Where nothing but the exchange table will see a body (`kafka-dissect read` without --bodies),
the body need not be built as objects: the compiled reader walks its bytes with the same checks
(lengths, counts, the element budget, UTF-8, tagged fields) and does what dissector.summary_walk's
walker would do on the decoded body. A plan tells it, per field of the layout, what that is:

    node   = (mode, name default, topic-id default, roles)     one per struct walked
    roles  = one per field on the wire (fields, then tagged): an R_* code, or the child's node
    mode   = M_* bits: the struct is a topic entry, a partition entry, has a topic name, a topic id
    plan   = (node, error_code default, throttle_time_ms default)

At the records level the walk also hands over each record set with its partition's index
(R_PARTITION) and its topic, as records.columns.partitions finds them in a decoded body: the
records table is then built without the Produce and Fetch bodies.

A default is an index into the compiled layout's defaults (the wire fields', then the absent
ones', as tree.new_body sets them), or -1: no such attribute (its value is then None).

The byte walk visits fields in wire order and does a struct's topic naming when the struct is
done; the object walk visits them in slot order and names a topic first. plan() returns None
for a layout where that could differ (a truthy default error code, relevant fields in another
order, topic naming inside a struct that names a topic); such bodies are decoded and walked.
"""
from __future__ import annotations

from .summary_walk import (PARTITION_INDEX, _entries, _has_id, _holds_sets, _list_flags,
                           _name_attr, _relevant)

R_SKIP, R_ERROR, R_TOP_ERROR, R_THROTTLE, R_RECORDS, R_NAME, R_TOPIC_ID, R_PARTITION = range(8)
M_TOPIC, M_PARTITION, M_NAME, M_ID = 1, 2, 4, 8

_plans = {}   # id(schema) -> (schema, plan): holding the schema keeps its id from being reused


class _Unplannable(Exception):
    pass


def plan(schema):
    """The plan for bodies of `schema` (a generated `_sN` table), or None (decode and walk)."""
    entry = _plans.get(id(schema))
    if entry is None:
        try:
            made = (_node(schema, False, False, True), _default(schema, "error_code"),
                    _default(schema, "throttle_time_ms"))
        except _Unplannable:
            made = None
        entry = _plans[id(schema)] = (schema, made)
    return entry[1]


def _default(schema, attr):
    """The index of attr's default in the compiled layout, or -1 when the class has no attr."""
    cls, _, fields, tagged, absent = schema
    if attr not in cls.__slots__:
        return -1
    names = [f[0] for f in fields + tagged] + [a[0] for a in absent]
    if attr not in names:
        raise _Unplannable(attr)
    return names.index(attr)


def _node(schema, in_topic, in_partition, top):
    cls, _, fields, tagged, _ = schema
    name_attr = _name_attr(cls)
    has_id = _has_id(schema)
    mode = ((M_TOPIC if in_topic else 0) | (M_PARTITION if in_partition else 0)
            | (M_NAME if name_attr is not None else 0) | (M_ID if has_id else 0))
    names = _names(mode)
    # a topic entry whose partitions hold records names their sets (Summary.record_sets), also
    # where the summary does not name topics
    naming = names or _holds_sets(schema)
    entries = _entries(schema)
    if any(kind == "default" for _, kind, _, _ in entries):
        raise _Unplannable("a default error code")
    roles = []
    relevant = []   # the fields the object walk visits, in wire order
    holds_records = any(f[0] == "records" for f in fields + tagged)
    for attr, kind, elem, _, _, _, _, child in fields + tagged:
        role = R_SKIP
        if attr == "error_code":
            if kind != "int16":
                raise _Unplannable(attr)
            role = R_TOP_ERROR if top else R_ERROR
            relevant.append(attr)
        elif attr == "records":
            if kind != "records":
                raise _Unplannable(attr)
            role = R_RECORDS
            relevant.append(attr)
        elif top and attr == "throttle_time_ms" and kind == "int32":
            role = R_THROTTLE
        elif naming and attr == name_attr:
            if kind != "string":
                raise _Unplannable(attr)
            role = R_NAME
        elif naming and has_id and attr == "topic_id":
            if kind != "uuid":
                raise _Unplannable(attr)
            role = R_TOPIC_ID
        elif holds_records and attr in PARTITION_INDEX and kind == "int32":
            role = R_PARTITION
        if child is not None:
            flags = _list_flags(attr, kind)
            if _relevant(child, *flags):
                role = _node(child, *flags, False)
                if names and _names_within(role):
                    raise _Unplannable("topic naming within topic naming")
                relevant.append(attr)
        roles.append(role)
    if relevant != [attr for attr, _, _, _ in entries if attr in relevant]:
        raise _Unplannable("wire order is not slot order")
    name_default = _default(schema, name_attr) if naming and name_attr is not None else -1
    # a naming struct's sets are named by its id's text where it has no name, the absent id's
    # default (the zero UUID) included, as partitions() names them in a decoded body
    id_default = (_default(schema, "topic_id")
                  if naming and (has_id or "topic_id" in cls.__slots__) else -1)
    return (mode, name_default, id_default, tuple(roles))


def _names(mode):
    """Whether a struct of this mode names topics (collects, learns or looks up a name)."""
    return bool(mode & M_NAME and mode & (M_ID | M_TOPIC) or mode & M_TOPIC and mode & M_ID)


def _names_within(node):
    """Whether a node or any below it names topics."""
    mode, _, _, roles = node
    return _names(mode) or any(isinstance(r, tuple) and _names_within(r) for r in roles)
