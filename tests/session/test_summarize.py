"""BodyDecoder.summarize: how the request's and the response's walks combine into the record
columns of the exchange (Produce carries records in the request, Fetch in the response)."""
from __future__ import annotations

import pytest

from dissector.decoding import BodyDecoder, Summary
from dissector.model import Exchange
from dissector.protocol.message import Message


def _msg(records, size, unc):
    m = Message(0, 8, 1)
    m.summary = s = Summary()
    s.records, s.records_bytes, s.uncompressed_bytes = records, size, unc
    return m


@pytest.mark.parametrize("req,resp,expected", [
    ((3, 300, 400), (0, 0, 0), (3, 300, 400)),            # Produce: the request's records
    ((0, 0, 0), (7, 900, 900), (7, 900, 900)),            # Fetch: the response's
    ((3, 300, 400), (7, 900, 1000), (10, 1200, 1400)),    # both sides add up
    ((3, 300, None), (7, 900, 1000), (10, 1200, None)),   # a set not decompressed: unknown
    ((3, 300, 400), (7, 900, None), (10, 1200, None)),
    ((3, 300, 400), None, (3, 300, 400)),                 # no response (acks=0)
    (None, (7, 900, 1000), (7, 900, 1000)),
])
def test_record_columns(req, resp, expected):
    ex = Exchange(None, None, None, 1, 11, 1, None, "ok",
                  _msg(*req) if req else None, _msg(*resp) if resp else None)
    BodyDecoder().summarize(ex)
    assert (ex.record_count, ex.records_bytes, ex.records_uncompressed_bytes) == expected


def test_no_record_columns_outside_record_apis():
    ex = Exchange(None, None, None, 3, 12, 1, None, "ok", _msg(3, 300, 400), _msg(1, 1, 1))
    BodyDecoder().summarize(ex)
    assert (ex.record_count, ex.records_bytes, ex.records_uncompressed_bytes) == (None, None, None)
