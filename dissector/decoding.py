"""Body decoding for the session: generated decoders, record sets, topic ids, exchange summary.

One walk over each decoded body (compiled per layout: dissector.summary_walk) does everything
the exchange table needs: it replaces raw
`records` fields by decoded record sets (batch headers only, or every record at the "records"
level), learns topic-id -> name mappings from responses that carry both (Metadata, CreateTopics,
...), names topics that travel by id (Fetch v13+, Produce v13+), and collects error codes, topic
names, partition entries and record counts. Where no one will see the bodies (keep_bodies=False:
`kafka-dissect read` without --bodies, the records commands; or all but those of the api keys
keep_bodies names), the compiled reader does that walk on the body's bytes instead
(dissector.summary_plan), with the same checks and without building the body; at the records
level it also hands over each record set with its topic and partition (Summary.record_sets),
all the records table reads of a body. The records commands do not read the sides that carry no
records (records_only: Produce's responses, the fetch requests) at all, nor the group joins and
syncs (RECORDS_UNREAD). For the api keys given RowSpecs (keep_bodies=AllBut(rows=...):
analysis.load's Produce and Fetch) the byte walk also hands over what the partitions table and
the request settings read of the body (Summary.groups, Summary.settings).
"""
from __future__ import annotations

import sys

from .model import WARNING, Issue
from .protocol.decode import decode_request_body, decode_response, decode_struct, tables
from .protocol.embedded import API_VERSIONS, EMBEDDING, JOIN_GROUP, SYNC_GROUP, v0_reply
from .protocol.headers import parse_response_header, response_header_version
from .protocol.message import Message
from .protocol.primitives import MAX_ELEMENTS
from .protocol import readers
from .records import record_set
from .records.columns import RECORD_APIS, RECORDLESS_SIDES   # who carries record sets
from .records.record_set import py_set_sums, set_sums, walk_set
from .summary_plan import plan
from .summary_walk import walker

# (is response, api key) of the sides the records commands read nothing of (records_only): those
# of Produce and the fetches that carry no records, and the group joins and syncs, whose bodies
# embed the consumer protocol (decoded field by field in Python otherwise: 11% of `records` on
# clients that reconnect and join a group). None teaches topic names.
RECORDS_UNREAD = RECORDLESS_SIDES | frozenset((response, key) for response in (False, True)
                                              for key in (JOIN_GROUP, SYNC_GROUP))


class AllBut:
    """keep_bodies: every api key's bodies are kept but those of `keys` (keep_bodies=True is
    AllBut()) and those of `rows` ({api key: (the request's RowSpec, the response's)}: the
    walk over their bytes hands over what summary_plan.RowSpec names)."""
    __slots__ = ("keys", "rows")

    def __init__(self, keys=(), rows=None):
        self.rows = dict(rows or {})
        self.keys = frozenset(keys) | frozenset(self.rows)

    def __contains__(self, api_key):
        return api_key not in self.keys


class Summary:
    """What one body walk collected (filled by the layout's walker), and the body's own
    error_code and throttle_time_ms (None where its class has no such field). record_sets: where
    the walk went over the body's bytes at the records level, (topic, partition, RecordSet) per
    `records` field (records.columns.partitions' of the body it did not build), else None.
    groups and settings: where the walk went over the body's bytes with a RowSpec
    (summary_plan), its topic entries (name, topic id, rows) and its settings, else None."""
    __slots__ = ("error_codes", "topics", "partitions", "records", "records_bytes",
                 "uncompressed_bytes", "error_code", "throttle_time_ms", "record_sets", "groups",
                 "settings")

    def __init__(self):
        self.error_codes = []
        self.topics = []
        self.partitions = 0
        self.records = 0
        self.records_bytes = 0
        self.uncompressed_bytes = 0   # None once a compressed batch was not decompressed
        self.error_code = self.throttle_time_ms = self.record_sets = None
        self.groups = self.settings = None


class BodyDecoder:
    """Decodes bodies for every session of one capture (topic ids are capture-wide)."""
    __slots__ = ("full_records", "kept", "unread", "max_uncompressed", "topic_names", "rows",
                 "_budget", "_entries", "_walks")

    def __init__(self, records=False, max_uncompressed=64 << 20, keep_bodies=True,
                 records_only=False):
        """keep_bodies: True (every message keeps its decoded body), False (none does, where
        the bytes allow it: summaries only), the api keys whose bodies are kept or an AllBut.
        records_only: the bodies of RECORDS_UNREAD are not read at all (their messages have
        neither body nor summary), for output made of the records alone: they teach no topic
        names (only responses do, and Produce's names no topic id)."""
        self.full_records = records
        self.kept = (AllBut() if keep_bodies is True else keep_bodies
                     if isinstance(keep_bodies, AllBut) else frozenset(keep_bodies or ()))
        self.unread = RECORDS_UNREAD if records_only else frozenset()
        self.rows = self.kept.rows if isinstance(self.kept, AllBut) else {}
        self.max_uncompressed = max_uncompressed
        self.topic_names = {}   # UUID -> topic name, learned from responses
        self._budget = [max_uncompressed]   # what the message being walked may still decode
        # (is response, api key, version) -> its (reader, schema) table entry, or None: the
        # general path (decode.decode_request_body / decode_response)
        self._entries = {}
        self._walks = {}   # for _decoding.c: its key of (direction, api key, version) -> _walkable

    def py_request(self, data, api_key, api_version, correlation_id, client_id, header_tags,
                   body_offset) -> Message:
        """The request whose header the session already parsed. `_decoding.c`'s `request` is
        this compiled for bodies walked on their bytes or read whole and walked (it hands the
        rest here)."""
        issues = []
        key = (False, api_key, api_version)
        entry = self._entries[key] if key in self._entries else self._entry(key)
        if entry is None or type(data) is not bytes:
            body = decode_request_body(data, body_offset, api_key, api_version, issues)
            msg = Message(api_key, api_version, correlation_id, client_id, header_tags, body,
                          issues, body_offset)
            msg.summary = None if body is None else self._summary(data, body, issues, False,
                                                                  api_key, api_version)
            return msg
        if (False, api_key) in self.unread:
            return Message(api_key, api_version, correlation_id, client_id, header_tags, None,
                           issues, body_offset)
        walked = None if api_key in self.kept else self._walk_bytes(data, body_offset, entry,
                                                                    issues, False, api_key)
        if walked is None:
            return self._decoded(data, entry, False, api_key, api_version, correlation_id,
                                 client_id, header_tags, body_offset, issues)
        msg = Message(api_key, api_version, correlation_id, client_id, header_tags, None, issues,
                      body_offset)
        msg.summary = walked
        return msg

    def py_response(self, data, api_key, api_version, request=None) -> Message:
        """The response; `request` (its decoded request Message) lets an Envelope's inner
        response be decoded with its inner request's api key and version. `_decoding.c`'s
        `response` is this compiled for a plain header and a body walked on its bytes or read
        whole and walked."""
        key = (True, api_key, api_version)
        entry = self._entries[key] if key in self._entries else self._entry(key)
        head = None
        if entry is not None and type(data) is bytes:
            try:
                head = parse_response_header(data, api_key, api_version)
            except ValueError:   # decode_response says what is wrong with it
                pass
        if head is None or (api_key == API_VERSIONS and v0_reply(data, head[2], api_version)):
            msg = decode_response(data, api_key, api_version, request)
            msg.summary = None if msg.body is None else self._summary(
                data, msg.body, msg.issues, True, api_key, api_version)
            return msg
        correlation_id, tags, offset = head
        issues = []
        if (True, api_key) in self.unread:
            return Message(api_key, api_version, correlation_id, None, tags, None, issues, offset)
        walked = (None if api_key in self.kept
                  else self._walk_bytes(data, offset, entry, issues, True, api_key))
        if walked is None:
            return self._decoded(data, entry, True, api_key, api_version, correlation_id, None,
                                 tags, offset, issues)
        msg = Message(api_key, api_version, correlation_id, None, tags, None, issues, offset)
        msg.summary = walked
        return msg

    request, response = py_request, py_response

    def _decoded(self, data, entry, learn, api_key, api_version, correlation_id, client_id,
                 header_tags, offset, issues) -> Message:
        """The message whose body at data[offset:] is decoded with `entry` and walked."""
        body = decode_struct(data, offset, entry, issues)
        msg = Message(api_key, api_version, correlation_id, client_id, header_tags, body, issues,
                      offset)
        msg.summary = None if body is None else self._summary(data, body, issues, learn, api_key,
                                                              api_version)
        return msg

    def _walkable(self, response, api_key, api_version):
        """For `_decoding.c`: (whether to keep the answer, how the bodies of (direction, api key,
        version) are read, else None: the twin's). How: (reader, plan, table entry, the response
        header's version) where they are walked on their bytes; (reader, None, table entry, the
        header's version, (body class, its walker, the element budget)) where they are decoded
        and walked (kept, or a layout the byte walk does not take), as `_decoded` does; (None,
        None, table entry, the header's version) where they are not read (`unread`)."""
        key = (bool(response), api_key, api_version)
        entry = self._entries[key] if key in self._entries else self._entry(key)
        if entry is None:
            return key in self._entries, None
        version = response_header_version(api_key, api_version)
        if key[:2] in self.unread:   # no reader: the message alone, from its header
            return True, (None, None, entry, version)
        walk_plan = None if api_key in self.kept else plan(entry[1], self._spec(*key[:2]))
        if walk_plan is None or not hasattr(entry[0], "summarize"):
            walk = _WALKS.get(key) or _walk_entry(*key)
            return True, (entry[0], None, entry, version, walk + (MAX_ELEMENTS,))
        return True, (entry[0], walk_plan, entry, version)

    def _entry(self, key):
        """The table entry the bodies of one (direction, api key, version) are read with straight
        away: None for the general path (an unknown api key or version, or one whose bodies
        embed structures and are read; an ApiVersions reply read with the v0 layout goes there
        too, message by message). Kept for the known ones only: the unknown come from garbage,
        which must not fill memory."""
        response, api_key, api_version = key
        t = tables(api_key) if isinstance(api_key, int) else None
        entry = t[response].get(api_version) if t is not None else None
        if entry is None:
            return None
        entry = self._entries[key] = None if api_key in EMBEDDING and key[:2] not in self.unread \
            else entry
        return entry

    def py_summarize(self, ex) -> None:
        """Fill the exchange's error, throttle, topic, partition and record columns
        (`_decoding.c`'s `summarize` is this compiled)."""
        req = ex.request_msg.summary if ex.request_msg is not None else None
        resp = ex.response_msg.summary if ex.response_msg is not None else None
        if req is not None or resp is not None:
            # the request names what was asked; a request for everything (Metadata with no
            # topics) or one without partitions leaves the answer to the response
            ex.topics = (req.topics if req is not None and req.topics
                         else resp.topics if resp is not None else [])
            ex.partition_count = (req.partitions if req is not None and req.partitions
                                  else resp.partitions if resp is not None else 0)
            if ex.api_key in RECORD_APIS:
                count = size = unc = 0
                for x in (req, resp):
                    if x is not None:
                        count += x.records
                        size += x.records_bytes
                        unc = (None if unc is None or x.uncompressed_bytes is None
                               else unc + x.uncompressed_bytes)
                ex.record_count = count
                ex.records_bytes = size
                ex.records_uncompressed_bytes = unc
        if resp is not None:
            top = resp.error_code
            codes = resp.error_codes
            ex.error_code = top if top else (codes[0] if codes else 0)
            ex.error_count = len(codes)
            ex.throttle_time_ms = resp.throttle_time_ms

    summarize = py_summarize

    # -- the walk -------------------------------------------------------------------------------

    def _summary(self, data, body, issues, learn, api_key, api_version) -> Summary:
        s = Summary()
        bad_sets = []
        # One decode budget for all the record sets of the message: a Fetch response can carry
        # thousands of partitions, each of which may be a decompression bomb.
        self._budget = [self.max_uncompressed]
        # one straight-line walker per layout; every decoder path builds the version's class
        # with all its fields set
        cls, walk = _WALKS.get((learn, api_key, api_version)) or _walk_entry(learn, api_key, api_version)
        if type(body) is cls:
            walk(body, s, bad_sets, learn, self.topic_names, self._budget, self.full_records,
                 walk_set)
        s.error_code = getattr(body, "error_code", None)
        s.throttle_time_ms = getattr(body, "throttle_time_ms", None)
        _rebase(data, bad_sets, issues)
        return s

    def _spec(self, response, api_key):
        """The RowSpec of a body of (direction, api key), or None."""
        specs = self.rows.get(api_key)
        return specs[bool(response)] if specs is not None else None

    def _walk_bytes(self, data, offset, entry, issues, learn, api_key=None) -> Summary | None:
        """The summary of the body at data[offset:] walked on its bytes; None where the
        compiled reader cannot (no plan, not compiled) or the body is malformed: the caller then
        decodes it, which says what is wrong, and walks that. `learn`: a response's."""
        reader, schema = entry
        spec = self._spec(learn, api_key)
        walk_plan = plan(schema, spec)
        if walk_plan is None or not hasattr(reader, "summarize"):
            return None
        self._budget = [self.max_uncompressed]   # as _summary: one budget a message
        try:   # with rows, the record sets are handed over whole (walk_set's)
            walked = reader.summarize(data, offset, walk_plan, learn, self.topic_names,
                                      set_sums if spec is None else walk_set,
                                      self.full_records, self._budget)
        except Exception:   # malformed (or a layout it cannot walk): decoded instead
            return None
        return self._walked(data, walked, issues)

    def _walked(self, data, walked, issues) -> Summary:
        """The Summary of what Reader.summarize returned for the body in `data`."""
        (end, codes, topics, bad_sets, parts, count, size, unc, top, throttle, sets) = walked[:11]
        if end < len(data):
            issues.append(Issue("kafka.trailing_bytes", WARNING,
                                f"{len(data) - end} bytes after the end of the body",
                                stream_offset=end))
        s = Summary()
        s.error_codes, s.topics, s.partitions = codes, topics, parts
        s.records, s.records_bytes, s.uncompressed_bytes = count, size, unc
        s.error_code, s.throttle_time_ms, s.record_sets = top, throttle, sets
        if len(walked) == 13:
            s.groups, s.settings = walked[11:]
        _rebase(data, bad_sets, issues)
        return s


def _rebase(data, bad_sets, issues):
    """Record-set issues, from offsets in their records field to offsets in the message."""
    for raw, rs in bad_sets:
        base = max(bytes(data).find(bytes(raw)), 0)
        for i in rs.issues:
            issues.append(Issue(i.code, i.severity, i.detail,
                                stream_offset=base + (i.stream_offset or 0)))


_WALKS = {}   # (is response, api key, api version) -> (body class, its layout's walker)


def _walk_entry(learn, api_key, api_version):
    schema = tables(api_key)[learn][api_version][1]   # tables' index 1: responses
    entry = _WALKS[learn, api_key, api_version] = (schema[0], walker(schema))
    return entry


if readers.COMPILED and set_sums is not py_set_sums:   # its common case done by the byte walk
    readers.sums_in_place(set_sums, record_set.checks_crc())


try:
    from ._decoding import configure as _configure
    BodyDecoder.request, BodyDecoder.response, BodyDecoder.summarize = _configure(
        BodyDecoder, Message, Summary, RECORD_APIS, sys.modules[__name__])
    COMPILED = True
except ImportError:   # no compiler where it was installed: the twins
    COMPILED = False
