"""Straight-line summary walkers, compiled once per body layout from the generated schema tables.

BodyDecoder's summary (error codes, topic names, partition entries, record sets, topic-id
learning) only needs a few fields of a body; a layout fixes which ones and where. For each
top-level schema this builds one function with nested loops over exactly those fields, in the
body class's slot order (the order the generic walk visits them, which the error and topic
columns depend on), and skips subtrees that can hold none of them. It replaced a generic
recursive walk (one call per body object, attribute names tested at run time), which
tests/session/test_summary_walk.py keeps as the reference; the body stage per message went from
24.3 to 20.8 us on the benchmark corpus (record-set header decoding is most of what is left).

A field's role follows from its attribute name, as in the generic walk: `error_code`,
`records`, lists of structs whose name holds "topic" (topic entries: their `topic`/`name` is
collected) or else "partition" (each element counts as one partition).

At the records level (`full`) a layout holding record sets also hands each one over with its topic
and partition, as the byte walk does (Summary.record_sets): the topic as
records.columns.partitions names it in the walked body (its name, else its topic id's text), the
partition its entry's index; the records table then reads no kept body.
"""
from __future__ import annotations

_RAW = (bytes, bytearray, memoryview)
# a partition entry's index, read where it holds records (records.columns.partitions' names)
PARTITION_INDEX = ("index", "partition_index")
_compiled = {}   # id(schema) -> (schema, walker): holding the schema keeps its id from being reused
_by_source = {}  # walker source -> walker: many layouts share one (e.g. a top-level error code only)


def walker(schema):
    """`walk(body, summary, bad_sets, learn, topic_names, budget, full_records, decode_set)` for
    bodies of `schema` (a generated `_sN` table); it fills the fresh dissector.decoding.Summary.
    `decode_set(data, records, budget)` makes each record set (records.record_set.walk_set)."""
    entry = _compiled.get(id(schema))
    if entry is None:
        entry = _compiled[id(schema)] = (schema, _compile(schema))
    return entry[1]


def _name_attr(cls):
    slots = cls.__slots__
    return "topic" if "topic" in slots else ("name" if "name" in slots else None)


def _entries(schema):
    """(attr, kind, elem, child schema) of the fields worth a look, in slot order, with the
    absent fields' error_code defaults as ("error_code", "default", value, None)."""
    cls, _, fields, tagged, absent = schema
    by_attr = {f[0]: f for f in fields + tagged}
    absent = dict(absent)
    out = []
    for attr in cls.__slots__:
        f = by_attr.get(attr)
        if f is None:
            if attr == "error_code" and absent.get(attr):
                out.append((attr, "default", absent[attr], None))
            continue
        _, kind, elem, _, _, _, _, child = f
        if attr in ("error_code", "records") or kind == "struct" or (kind == "array" and elem == "struct"):
            out.append((attr, kind, elem, child))
    return out


def _relevant(schema, in_topic, in_partition):
    """Whether walking a body of `schema` in this context can have any effect."""
    cls = schema[0]
    if in_partition or ((in_topic or _name_attr(cls)) and _has_id(schema)):
        return True
    if in_topic and _name_attr(cls):
        return True
    for attr, kind, elem, child in _entries(schema):
        if attr in ("error_code", "records"):
            return True
        if child is not None and _relevant(child, *_list_flags(attr, kind)):
            return True
    return False


def _has_id(schema):
    """Whether the layout carries a topic id: where it is absent it holds the zero UUID, which
    names nothing and is never learned."""
    return any(f[0] == "topic_id" for f in schema[2] + schema[3])


def _list_flags(attr, kind):
    if kind != "array":
        return False, False
    topic = "topic" in attr
    return topic, not topic and "partition" in attr


def _holds_sets(schema):
    """Whether the entries of a struct's list field hold `records` (a topic's partitions)."""
    return any(child is not None and any(f[0] == "records" for f in child[2] + child[3])
               for _, _, _, _, _, _, _, child in schema[2] + schema[3])


def _holds_records(schema):
    """Whether a body of `schema` can hold a `records` field anywhere."""
    return any(f[0] == "records" or (f[7] is not None and _holds_records(f[7]))
               for f in schema[2] + schema[3])


def _compile(schema):
    lines = ["def walk(o0, s, bad_sets, learn, names, budget, full, decode_set):",
             "    topics = s.topics", "    errs = s.error_codes", "    parts = nrec = nbytes = unc = 0"]
    if _holds_records(schema):
        lines.append("    sets = s.record_sets = [] if full else None")
    lines += _body(schema, 0, False, False, 1)
    lines += ["    s.partitions = parts", "    s.records = nrec", "    s.records_bytes = nbytes",
              "    s.uncompressed_bytes = unc"]
    source = "\n".join(lines) + "\n"
    walk = _by_source.get(source)
    if walk is None:
        scope = {"_RAW": _RAW}
        exec(compile(source, "<summary walker>", "exec"), scope)
        walk = _by_source[source] = scope["walk"]
    return walk


def _body(schema, d, in_topic, in_partition, ind, topic=None):
    """Lines with the effects of the generic walk on the body in o{d}; `topic` the variable
    naming the sets of the topic entry it is in (t{depth}), if any."""
    pad = "    " * ind
    o = f"o{d}"
    cls = schema[0]
    name_attr = _name_attr(cls)
    has_id = _has_id(schema)
    lines = []
    if name_attr is not None:
        lines.append(f"{pad}name = {o}.{name_attr}")
        if has_id:
            lines += [f"{pad}tid = {o}.topic_id",
                      f"{pad}if tid is not None and tid.int:",   # not the zero UUID (no __eq__ call)
                      f"{pad}    if name and learn:",
                      f"{pad}        names[tid] = name",
                      f"{pad}    elif not name and tid in names:",
                      f"{pad}        name = {o}.{name_attr} = names[tid]"]
        if in_topic:
            lines += [f"{pad}if isinstance(name, str) and name not in topics:",
                      f"{pad}    topics.append(name)"]
    elif in_topic and has_id:   # id-only topics (ShareFetch, ShareAcknowledge)
        lines += [f"{pad}name = names.get({o}.topic_id)",
                  f"{pad}if name is not None and name not in topics:",
                  f"{pad}    topics.append(name)"]
    if in_partition:
        lines.append(f"{pad}parts += 1")
    if _holds_sets(schema):   # records.columns.partitions' topic of the sets below, when kept
        topic = f"t{d}"
        named = [f"{o}.{a}" for a in ("name", "topic") if a in cls.__slots__]
        lines += [f"{pad}if full:", f"{pad}    {topic} = {' or '.join(named + ['None'])}"]
        if "topic_id" in cls.__slots__:
            lines += [f"{pad}    if {topic} is None and {o}.topic_id is not None:",
                      f"{pad}        {topic} = str({o}.topic_id)"]
    for attr, kind, elem, child in _entries(schema):
        if kind == "default":
            lines.append(f"{pad}errs.append({elem!r})")
        elif attr == "error_code":
            lines += [f"{pad}v = {o}.error_code", f"{pad}if v:", f"{pad}    errs.append(v)"]
        elif attr == "records":
            lines += [f"{pad}v = {o}.records",
                      f"{pad}if isinstance(v, _RAW):",
                      f"{pad}    rs = {o}.records = decode_set(v, full, budget)",
                      f"{pad}    nrec += rs.record_count",
                      f"{pad}    nbytes += rs.size",
                      f"{pad}    if unc is not None:",   # None once a compressed batch was not decompressed
                      f"{pad}        for bt in rs.batches:",
                      f"{pad}            if bt.codec == 0:",
                      f"{pad}                unc += bt.size",
                      f"{pad}            elif bt.uncompressed_size is not None:",
                      f"{pad}                unc += bt.uncompressed_size",
                      f"{pad}            else:",
                      f"{pad}                unc = None",
                      f"{pad}                break",
                      f"{pad}    if rs.issues:",
                      f"{pad}        bad_sets.append((v, rs))"]
            index = next((a for a in PARTITION_INDEX if a in cls.__slots__), None)
            lines += [f"{pad}    if full:",
                      f"{pad}        sets.append(({topic}, "
                      f"{'None' if index is None else f'{o}.{index}'}, rs))"]
        elif child is not None:
            flags = _list_flags(attr, kind)
            if not _relevant(child, *flags):
                continue
            c = f"o{d + 1}"
            if kind == "array":
                lines += [f"{pad}v = {o}.{attr}", f"{pad}if v:", f"{pad}    for {c} in v:"]
                lines += _body(child, d + 1, *flags, ind + 2, topic)
            else:
                lines += [f"{pad}{c} = {o}.{attr}", f"{pad}if {c} is not None:"]
                lines += _body(child, d + 1, False, False, ind + 1, topic)
    if not lines:
        lines.append(f"{pad}pass")
    return lines
