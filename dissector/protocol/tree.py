"""Field-by-field interpreter over the generated schema tables.

Two uses, both off the fast path:
- tree mode: every field's name, offset, length and value (`Node`), for `kafka-dissect tree` and
  a hex view;
- partial decoding: when a fast decoder fails, the message is decoded again here to find the exact
  fault, keep everything decoded before it (objects are attached to their parents before their
  fields are read; fields not reached keep their defaults) and report one Malformed with its code
  and byte offset.
Both charge every array's element count to the message's element budget, at the same points as
the fast readers (the count, before any element), so both fail on the same messages.
A schema is (class, flexible, fields, tagged, absent); a field is
(attr, kind, elem, nullable, compact, tag, default, child schema): see dissector.codegen.emit_decoders.
"""
from __future__ import annotations

from struct import Struct

from ..text_safety import InvalidUtf8
from .primitives import DEFAULT_STRUCT, MAX_ELEMENTS, Malformed, new, uuid_at

_FIXED = {k: Struct(">" + c) for k, c in (("int8", "b"), ("int16", "h"), ("int32", "i"),
                                          ("int64", "q"), ("uint16", "H"), ("uint32", "I"),
                                          ("float64", "d"), ("bool", "?"))}
_BAD_LENGTH = {"string": "kafka.bad_string_length", "bytes": "kafka.bad_bytes_length",
               "records": "kafka.bad_bytes_length", "array": "kafka.bad_array_length"}
_INT8 = _FIXED["int8"]
_INT16 = _FIXED["int16"]
_INT32 = _FIXED["int32"]


class Node:
    """One decoded field: `offset` and `length` in bytes inside the message; `value` for scalars,
    None for structs and arrays (whose parts are `children`)."""
    __slots__ = ("name", "offset", "length", "value", "children")

    def __init__(self, name, offset, length=0, value=None, children=None):
        self.name = name
        self.offset = offset
        self.length = length
        self.value = value
        self.children = children if children is not None else []

    def walk(self, depth=0):
        """(depth, node) pairs, depth first."""
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)

    def __repr__(self):
        return f"Node({self.name!r}, off={self.offset}, len={self.length}, value={self.value!r})"


def _fresh(value, child=None):
    if value is DEFAULT_STRUCT:
        return new_body(child)
    return [] if isinstance(value, list) else value


def new_body(schema):
    """An object of the schema's class with every attribute at its default."""
    cls, _, fields, tagged, absent = schema
    o = new(cls)
    for f in fields + tagged:
        setattr(o, f[0], _fresh(f[6], f[7]))
    for attr, default in absent:
        setattr(o, attr, _fresh(default))
    o.unknown_tags = None
    return o


class _Walker:
    def __init__(self, b, end=None, budget=MAX_ELEMENTS, lenient=False):
        self.b = b
        self.lenient = lenient   # a header: its client id may be non-UTF-8 (parse_request_header)
        self.end = len(b) if end is None else end
        self.budget = budget  # array elements this message may still decode

    def need(self, p, n, what):
        if p + n > self.end:
            raise Malformed("kafka.truncated", p, f"{what}: needs {n} bytes, {max(self.end - p, 0)} left")

    def uvarint(self, p, what):
        value = shift = 0
        for i in range(5):
            if p + i >= self.end:
                raise Malformed("kafka.truncated", p, f"{what}: varint cut short")
            byte = self.b[p + i]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, p + i + 1
            shift += 7
        raise Malformed("kafka.bad_varint", p, f"{what}: unsigned varint longer than 5 bytes")

    def length(self, p, compact, wide, what):
        """A length or count: (n, p), n == -1 for null."""
        if compact:
            n, p = self.uvarint(p, what)
            return n - 1, p
        s = _INT32 if wide else _INT16
        self.need(p, s.size, what)
        return s.unpack_from(self.b, p)[0], p + s.size

    # -- structs ---------------------------------------------------------------------------

    def fill(self, p, schema, o, node):
        """Read the schema's fields into `o` (already attached to its parent)."""
        _, flexible, fields, tagged, _ = schema
        for f in fields:
            p = self.field(p, f, o, node)
        if flexible:
            p = self.tags(p, tagged, o, node)
        return p

    def field(self, p, f, o, parent):
        attr = f[0]
        node = None
        if parent is not None:
            node = Node(attr, p)
            parent.children.append(node)
        try:
            value, p = self.value(p, f, o, attr, node)
        except Malformed as e:
            if node is not None:
                node.length = max((e.offset if e.offset is not None else p) - node.offset, 0)
            raise
        if node is not None:
            node.length = p - node.offset
            if f[1] not in ("struct", "array"):
                node.value = value
        return p

    def value(self, p, f, o, attr, node):
        """Decode one field value at p and store it on o; returns (value, p)."""
        attr, kind, elem, nullable, compact, _, _, child = f
        b = self.b
        if kind in _FIXED:
            s = _FIXED[kind]
            self.need(p, s.size, attr)
            v = s.unpack_from(b, p)[0]
            setattr(o, attr, v)
            return v, p + s.size
        if kind == "uuid":
            self.need(p, 16, attr)
            v = uuid_at(b, p)
            setattr(o, attr, v)
            return v, p + 16
        if kind == "struct":
            if nullable:
                self.need(p, 1, attr)
                present = _INT8.unpack_from(b, p)[0] >= 0
                p += 1
                if not present:
                    setattr(o, attr, None)
                    return None, p
            c = new_body(child)
            setattr(o, attr, c)
            return c, self.fill(p, child, c, node)
        start = p
        n, p = self.length(p, compact, kind != "string", attr)
        if n < 0:
            if n != -1 or not nullable:
                code = _BAD_LENGTH[kind]
                raise Malformed(code, start, f"{attr}: {'null' if n == -1 else 'negative'} length {n}")
            setattr(o, attr, None)
            return None, p
        if kind == "array":
            return self.array(p, start, f, n, o, node)
        if n > self.end - p:
            raise Malformed(_BAD_LENGTH[kind], start,
                            f"{attr}: length {n} with {self.end - p} bytes left")
        e = p + n
        if kind == "string":
            try:
                v = b[p:e].decode()
            except UnicodeDecodeError:
                if not self.lenient:
                    raise Malformed("kafka.bad_string", p, f"{attr}: not UTF-8") from None
                v = InvalidUtf8(bytes(b[p:e]))
        elif kind == "bytes":
            v = b[p:e]
        else:  # records: kept raw for the record-batch decoder, without a copy
            v = memoryview(b)[p:e]
        setattr(o, attr, v)
        return v, e

    def array(self, p, start, f, n, o, node):
        attr, _, elem, _, compact, _, _, child = f
        size = _FIXED[elem].size if elem in _FIXED else 16 if elem == "uuid" else 1
        if n * size > self.end - p:
            raise Malformed("kafka.bad_array_length", start,
                            f"{attr}: {n} elements with {self.end - p} bytes left")
        self.budget -= n
        if self.budget < 0:
            raise Malformed("kafka.too_many_elements", start,
                            f"{attr}: {n} elements exceed the message's element budget")
        lst = []
        setattr(o, attr, lst)
        holder = _Holder()
        ef = ("value", elem, None, False, compact, None, None, child)
        for i in range(n):
            en = None
            if node is not None:
                en = Node(f"[{i}]", p)
                node.children.append(en)
            if elem == "struct":
                c = new_body(child)
                lst.append(c)
                try:
                    p = self.fill(p, child, c, en)
                except Malformed as e:
                    if en is not None:
                        en.length = max((e.offset or p) - en.offset, 0)
                    raise
            else:
                v, p = self.value(p, ef, holder, "value", en)
                lst.append(v)
                if en is not None:
                    en.value = v
            if en is not None:
                en.length = p - en.offset
        return lst, p

    def tags(self, p, tagged, o, parent):
        start = p
        n, p = self.uvarint(p, "tagged fields")
        node = None
        if parent is not None and n:
            node = Node("tagged_fields", start)
            parent.children.append(node)
        by_tag = {f[5]: f for f in tagged}
        for _ in range(n):
            tstart = p
            tag, p = self.uvarint(p, "tag")
            size, p = self.uvarint(p, f"tag {tag} size")
            if size > self.end - p:
                raise Malformed("kafka.bad_tagged_field", tstart,
                                f"tag {tag}: size {size} with {self.end - p} bytes left")
            e = p + size
            f = by_tag.get(tag)
            if f is None:
                if o.unknown_tags is None:
                    o.unknown_tags = {}
                o.unknown_tags[tag] = self.b[p:e]
                if node is not None:
                    node.children.append(Node(f"tag {tag}", tstart, e - tstart, self.b[p:e]))
            else:
                sub = _Walker(self.b, e, self.budget)  # a tagged field may not read past its size
                try:
                    p = sub.field(p, f, o, node)
                finally:
                    self.budget = sub.budget
                if p != e:
                    raise Malformed("kafka.bad_tagged_field", tstart,
                                    f"tag {tag} ({f[0]}): {p - (e - size)} of {size} bytes used")
            p = e
        if node is not None:
            node.length = p - start
        return p


class _Holder:
    """Target for array elements read through `value` (which stores what it reads)."""
    __slots__ = ("value",)


def decode(b, p, schema, tree=False, max_elements=MAX_ELEMENTS, lenient=False):
    """Decode a struct at b[p:] -> (obj, end, root Node or None, Malformed or None).

    Never raises Malformed: on a fault the partial object is returned with the fault.
    `max_elements`: the element budget (kafka.too_many_elements beyond it)."""
    w = _Walker(b, None, max_elements, lenient)
    o = new_body(schema)
    root = Node(schema[0].__name__, p) if tree else None
    try:
        end = w.fill(p, schema, o, root)
    except Malformed as e:
        if root is not None:
            root.length = max((e.offset if e.offset is not None else p) - p, 0)
        # the fault is returned as data: without its traceback, whose frames would keep every
        # caller's locals (the connection's session and streams) alive until the cyclic GC
        e.__traceback__ = None
        return o, None, root, e
    if root is not None:
        root.length = end - p
    return o, end, root, None


# -- tree mode for whole messages ----------------------------------------------------------------

def _message_tree(b, title, header_schema, body_entry):
    """Root node over the header and body of one message; a fault or trailing bytes show as a
    `malformed` / `trailing_bytes` node (value: the Issue code) where they start."""
    root = Node(title, 0, len(b))
    _, end, node, fault = decode(b, 0, header_schema, tree=True, lenient=True)
    node.name = "header"
    root.children.append(node)
    if fault is None and body_entry is not None:
        _, end, node, fault = decode(b, end, body_entry[1], tree=True)
        node.name = "body"
        root.children.append(node)
    if fault is not None:
        off = fault.offset if fault.offset is not None else 0
        root.children.append(Node("malformed", off, len(b) - off, fault.code))
    elif end is not None and end < len(b):
        root.children.append(Node("trailing_bytes", end, len(b) - end, "kafka.trailing_bytes"))
    return root


def request_tree(buf) -> Node:
    """Tree mode for a request (bytes after the size prefix): header and body fields with their
    offsets and lengths. The body is omitted for an unknown api key or version. Embedded
    structures (consumer protocol metadata, Envelope's inner messages) get subtrees."""
    from .decode import decode_request, tables
    from .embedded import SPECIAL
    from .generated import request_header
    from .headers import request_header_version
    b = bytes(buf)
    api_key = api_version = -1
    if len(b) >= 4:
        api_key = int.from_bytes(b[0:2], "big", signed=True)
        api_version = int.from_bytes(b[2:4], "big", signed=True)
    t = tables(api_key)
    entry = t[0].get(api_version) if t else None
    header = request_header.VERSIONS[request_header_version(api_key, api_version)][1]
    root = _message_tree(b, "request", header, entry)
    if api_key in SPECIAL and entry is not None:
        _graft_body(root, decode_request(b).body)
    return root


def response_tree(buf, api_key, api_version, request=None) -> Node:
    """Tree mode for a response to a request of (api_key, api_version); `request` (its Message
    or body) lets an Envelope response show its inner response."""
    from .decode import decode_response, decode_struct, tables
    from .embedded import API_VERSIONS, SPECIAL, api_versions_response
    from .generated import response_header
    from .headers import response_header_version
    b = bytes(buf)
    t = tables(api_key)
    entry = t[1].get(api_version) if t else None
    hv = response_header_version(api_key, api_version)
    if api_key == API_VERSIONS and entry is not None and len(b) >= 4:
        # the v0-shaped UNSUPPORTED_VERSION reply: shown with the layout it was decoded with
        if api_versions_response(b, 4, api_version, t[1], decode_struct) is not None:
            entry = t[1][0]
    root = _message_tree(b, "response", response_header.VERSIONS[hv][1], entry)
    if api_key in SPECIAL and entry is not None:
        _graft_body(root, decode_response(b, api_key, api_version, request).body)
    return root


def _graft_body(root, body):
    for node in root.children:
        if node.name == "body" and body is not None:
            _graft(node, body)


def _graft(node, value):
    """Walk a tree node and the decoded value it shows side by side; under each Embedded field
    add the subtree of the structure it holds."""
    from .embedded import Embedded
    from .primitives import Body
    if isinstance(value, Embedded):
        _embedded_nodes(node, value)
    elif isinstance(value, Body):
        for child in node.children:
            if child.name == "tagged_fields":
                _graft(child, value)
            elif not child.name.startswith("tag "):
                _graft(child, getattr(value, child.name, None))
    elif isinstance(value, list):
        for child in node.children:
            i = int(child.name[1:-1])
            if i < len(value):
                _graft(child, value[i])


def _embedded_nodes(node, value):
    from .decode import data_versions
    from .embedded import layout_version
    start = node.offset + node.length - len(value)   # after the field's length prefix
    if value.version is None:  # a whole inner message (Envelope)
        m = value.decoded
        sub = (request_tree(value) if m.api_key is not None and node.name == "request_data"
               else response_tree(value, m.api_key, m.api_version))
        node.children.append(_rebased(sub, start))
        return
    node.children.append(Node("version", start, 2, value.version))
    versions = data_versions(value.structure)
    layout = layout_version(versions, value.version)
    _, end, sub, _ = decode(bytes(value), 2, versions[layout][1], tree=True)
    sub.name = value.structure
    node.children.append(_rebased(sub, start))


def _rebased(node, delta):
    for _, n in node.walk():
        n.offset += delta
    return node
