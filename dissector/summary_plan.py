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

plan(schema, rows) also has the walk hand over what the partitions table and the request settings
read of a body (analysis.load keeps no Produce or Fetch body): `rows` a RowSpec saying where. A
node then has two more members, and the plan one:

    node   = (mode, name default, topic-id default, roles, slots, row defaults)
    slots  = one per field on the wire: where its value goes (-1: nowhere), a row's member in a
             partition entry (M_ROW), else a setting
    row defaults = a default (as above) per member of a partition entry's row
    plan   = (node, error_code default, throttle_time_ms default, setting defaults)

Each topic entry of the listed topics (M_GROUP) becomes (name, topic id, rows) and each of its
partition entries a row (index, fields..., record set); the values are the decoded body's (its
absent fields' defaults, the topic name a topic id resolved to), the name as reading `name` then
`topic` gives it (M_BY_NAME: the entry has `name`, an empty one is None).

A default is an index into the compiled layout's defaults (the wire fields', then the absent
ones', as tree.new_body sets them), or -1: no such attribute (its value is then None).

The byte walk visits fields in wire order and does a struct's topic naming when the struct is
done; the object walk visits them in slot order and names a topic first. plan() returns None
for a layout where that could differ (a truthy default error code, relevant fields in another
order, topic naming inside a struct that names a topic); such bodies are decoded and walked.
"""
from __future__ import annotations

from collections import namedtuple

from .summary_walk import (PARTITION_INDEX, _entries, _has_id, _holds_sets, _list_flags,
                           _name_attr, _relevant)

R_SKIP, R_ERROR, R_TOP_ERROR, R_THROTTLE, R_RECORDS, R_NAME, R_TOPIC_ID, R_PARTITION = range(8)
M_TOPIC, M_PARTITION, M_NAME, M_ID, M_GROUP, M_ROW, M_BY_NAME = 1, 2, 4, 8, 16, 32, 64
_GROUP, _ROW, _SETTING = "group", "row", "setting"   # what a node's struct is to a RowSpec

_plans = {}   # (id(schema), rows) -> (schema, plan): holding the schema keeps its id from being reused


# a collections.namedtuple: typing.NamedTuple would import typing, 4 ms of every start
class RowSpec(namedtuple("RowSpec", "topics parts index fields records settings nested",
                         defaults=((), ()))):
    """What a body gives the partitions table and the request settings, by attribute: its list
    of topic entries, a topic entry's list of partition entries, a partition entry's number, its
    (field, required) read into its row, then its record set (None: none); the body's settings
    (a row of the top-level fields `settings`, each with its default where absent, then
    `nested`: (struct field, its field, the setting it sets where the struct is there))."""
    __slots__ = ()


class _Unplannable(Exception):
    pass


def plan(schema, rows: RowSpec | None = None):
    """The plan for bodies of `schema` (a generated `_sN` table), or None (decode and walk);
    with `rows`, one that also hands over the rows and settings (None where the layout lacks a
    part of them, a required field or a list)."""
    entry = _plans.get((id(schema), rows))
    if entry is None:
        try:
            made = (_node(schema, False, False, True, rows), _default(schema, "error_code"),
                    _default(schema, "throttle_time_ms"))
            if rows is not None:
                made += (tuple(_default(schema, attr) for attr in rows.settings),)
        except _Unplannable:
            made = None
        entry = _plans[id(schema), rows] = (schema, made)
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


def _node(schema, in_topic, in_partition, top, rows=None, what=None):
    """The node of a struct; `rows` the RowSpec, `what` what this struct is to it (_GROUP,
    _ROW, or (_SETTING, {field: setting})); the top (`top`) holds the settings and topics."""
    cls, _, fields, tagged, _ = schema
    name_attr = _name_attr(cls)
    has_id = _has_id(schema)
    mode = ((M_TOPIC if in_topic else 0) | (M_PARTITION if in_partition else 0)
            | (M_NAME if name_attr is not None else 0) | (M_ID if has_id else 0))
    names = _names(mode)
    # a topic entry whose partitions hold records names their sets (Summary.record_sets), also
    # where the summary does not name topics
    naming = names or _holds_sets(schema) or what == _GROUP
    entries = _entries(schema)
    if any(kind == "default" for _, kind, _, _ in entries):
        raise _Unplannable("a default error code")
    roles = []
    slots = []
    members = _members(rows, what, top)   # field -> its slot
    relevant = []   # the fields the object walk visits, in wire order
    holds_records = any(f[0] == "records" for f in fields + tagged)
    for attr, kind, elem, _, _, _, _, child in fields + tagged:
        role = R_SKIP
        slots.append(members.get(attr, -1))
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
            inner = _inner(rows, what, top, attr, kind)
            if inner is not None:
                slots[-1] = -1   # its fields have the slots
            if _relevant(child, *flags) or inner is not None:
                role = _node(child, *flags, False, rows, inner)
                if names and _names_within(role):
                    raise _Unplannable("topic naming within topic naming")
                if _relevant(child, *flags):
                    relevant.append(attr)
        roles.append(role)
    if relevant != [attr for attr, _, _, _ in entries if attr in relevant]:
        raise _Unplannable("wire order is not slot order")
    row_defaults = _row_defaults(schema, rows, what, roles, top)
    name_default = _default(schema, name_attr) if naming and name_attr is not None else -1
    # a naming struct's sets are named by its id's text where it has no name, the absent id's
    # default (the zero UUID) included, as partitions() names them in a decoded body
    id_default = (_default(schema, "topic_id")
                  if naming and (has_id or "topic_id" in cls.__slots__) else -1)
    if what == _GROUP:
        if {"name", "topic"} <= set(cls.__slots__):
            raise _Unplannable("a topic entry with a name and a topic")
        mode |= M_GROUP | (M_BY_NAME if name_attr == "name" else 0)
    mode |= M_ROW if what == _ROW else 0
    node = (mode, name_default, id_default, tuple(roles))
    return node if rows is None else node + (tuple(slots), row_defaults)


def _members(rows, what, top):
    """{field: slot} of a struct: a row's members or the settings it sets."""
    if rows is None or what == _GROUP:
        return {}
    if top:
        return {attr: i for i, attr in enumerate(rows.settings)}
    if what is None:
        return {}
    if what == _ROW:
        names = (rows.index,) + tuple(attr for attr, _ in rows.fields) + (rows.records,)
        return {attr: i for i, attr in enumerate(names) if attr is not None}
    return what[1]


def _inner(rows, what, top, attr, kind):
    """What the struct in field `attr` is to the RowSpec (None: nothing)."""
    if rows is None:
        return None
    if top and attr == rows.topics and kind == "array":
        return _GROUP
    if what == _GROUP and attr == rows.parts and kind == "array":
        return _ROW
    nested = {field: slot for struct, field, slot in rows.nested if struct == attr}
    return (_SETTING, nested) if top and nested and kind == "struct" else None


def _row_defaults(schema, rows, what, roles, top):
    """A row's defaults (where a partition entry's layout lacks a field); checks that the layout
    has each list the RowSpec reads and each required field."""
    if rows is None:
        return ()
    wired = {f[0]: role for f, role in zip(schema[2] + schema[3], roles)}
    needs = (rows.topics if top else rows.parts if what == _GROUP else None)
    if needs is not None and not isinstance(wired.get(needs), tuple):
        raise _Unplannable(f"no {needs}")
    if what != _ROW:
        return ()
    if rows.index not in wired or (rows.records is not None and rows.records not in wired):
        raise _Unplannable("no partition number or record set")
    defaults = [_default(schema, rows.index)]
    for attr, required in rows.fields:
        defaults.append(_default(schema, attr))
        if required and defaults[-1] < 0:
            raise _Unplannable(f"no {attr}")
    return tuple(defaults) + (-1,)


def _names(mode):
    """Whether a struct of this mode names topics (collects, learns or looks up a name)."""
    return bool(mode & M_NAME and mode & (M_ID | M_TOPIC) or mode & M_TOPIC and mode & M_ID)


def _names_within(node):
    """Whether a node or any below it names topics."""
    mode, roles = node[0], node[3]
    return _names(mode) or any(isinstance(r, tuple) and _names_within(r) for r in roles)
