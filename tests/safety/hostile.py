"""A capture whose every string is hostile: terminal escapes, rich markup, bidi overrides, a
backslash, C1 controls and (in a client id) bytes that are not UTF-8.

Messages are encoded by kio and record batches by kafka-python (independent of our decoders);
the framing and packets by tests/analysis/build.py.
"""
from __future__ import annotations

import datetime
import struct

from tests.analysis.build import Capture, kio_request, kio_response, ms

# ESC ] 0 ; title BEL (retitles the window), ESC [ 2 J (clears the screen), rich markup that
# closes nothing, a backslash, a right-to-left override, CSI as a C1 control, DEL
H = "\x1b]0;pwn\x07[/][bold]\x1b[2J\\\u202e\x9b\x7f"
# H as every terminal output must show it, written out by hand (not computed by escape())
SHOWN = "\\x1b]0;pwn\\x07[/][bold]\\x1b[2J\\\\\\u202e\\u009b\\x7f"
BAD_CLIENT = b"bad\xff\xc3\x1b"                 # not UTF-8, with an ESC
BAD_SHOWN = "bad\\xff\\xc3\\x1b"

CLIENT, TOPIC, GROUP, MEMBER, TXN, MECH = (H + s for s in ("c", "t", "g", "m", "x", "s"))
HEADER_KEY, KEY, VALUE = H + "h", (H + "k").encode(), (H + "v").encode()


def _batch():
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=1_700_000_000_000, key=KEY, value=VALUE,
             headers=[(HEADER_KEY, VALUE)])
    return bytes(b.build())


def _exchanges():
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v12 import request as fq
    from kio.schema.fetch.v12 import response as fs
    from kio.schema.init_producer_id.v4 import request as iq
    from kio.schema.init_producer_id.v4 import response as is_
    from kio.schema.join_group.v7 import request as jq
    from kio.schema.join_group.v7 import response as js
    from kio.schema.produce.v9 import request as pq
    from kio.schema.produce.v9 import response as ps
    from kio.schema.sasl_handshake.v1 import request as sq
    from kio.schema.sasl_handshake.v1 import response as ss
    from kio.static.primitive import i16, i32, i64
    zero = datetime.timedelta(0)
    batch = _batch()
    yield (sq.SaslHandshakeRequest(mechanism=MECH),
           ss.SaslHandshakeResponse(error_code=ErrorCode(33), mechanisms=(MECH,)))
    yield (iq.InitProducerIdRequest(transactional_id=TXN,
                                    transaction_timeout=datetime.timedelta(seconds=60),
                                    producer_id=i64(-1), producer_epoch=i16(-1)),
           is_.InitProducerIdResponse(throttle_time=zero, error_code=ErrorCode(0),
                                      producer_id=i64(5), producer_epoch=i16(0)))
    yield (pq.ProduceRequest(transactional_id=TXN, acks=i16(-1),
                             timeout=datetime.timedelta(seconds=30),
                             topic_data=(pq.TopicProduceData(name=TOPIC, partition_data=(
                                 pq.PartitionProduceData(index=i32(0), records=batch),)),)),
           ps.ProduceResponse(responses=(ps.TopicProduceResponse(name=TOPIC, partition_responses=(
               ps.PartitionProduceResponse(index=i32(0), error_code=ErrorCode(6),
                                           base_offset=i64(-1), log_append_time=None,
                                           log_start_offset=i64(0), record_errors=(),
                                           error_message=H),)),), throttle_time=zero))
    yield (jq.JoinGroupRequest(group_id=GROUP, session_timeout=datetime.timedelta(seconds=10),
                               rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
                               group_instance_id=None, protocol_type="consumer",
                               protocols=(jq.JoinGroupRequestProtocol(name="range",
                                                                      metadata=b""),)),
           js.JoinGroupResponse(throttle_time=zero, error_code=ErrorCode(0), generation_id=i32(1),
                                protocol_type="consumer", protocol_name="range", leader=MEMBER,
                                member_id=MEMBER, members=()))
    yield (fq.FetchRequest(max_wait=datetime.timedelta(milliseconds=500), min_bytes=i32(1),
                           topics=(fq.FetchTopic(topic=TOPIC, partitions=(fq.FetchPartition(
                               partition=i32(0), fetch_offset=i64(0),
                               partition_max_bytes=i32(1 << 20)),)),),
                           forgotten_topics_data=()),
           fs.FetchResponse(throttle_time=zero, error_code=ErrorCode(0), responses=(
               fs.FetchableTopicResponse(topic=TOPIC, partitions=(fs.PartitionData(
                   partition_index=i32(0), error_code=ErrorCode(0), high_watermark=i64(1),
                   last_stable_offset=i64(1), log_start_offset=i64(0),
                   aborted_transactions=None, records=batch),)),)))


def _metadata_v0(corr, client_id: bytes) -> bytes:
    """Metadata v0 (header v1, empty body: all topics) with raw client id bytes."""
    msg = struct.pack(">hhih", 3, 0, corr, len(client_id)) + client_id + struct.pack(">i", 0)
    return struct.pack(">i", len(msg)) + msg


def _metadata_v0_response(corr) -> bytes:
    msg = struct.pack(">iii", corr, 0, 0)   # no brokers, no topics
    return struct.pack(">i", len(msg)) + msg


def write(path):
    """Exchanges 1-5 on one connection with client id CLIENT (SaslHandshake v1, InitProducerId
    v4, Produce v9, JoinGroup v7, Fetch v12: one record with KEY, VALUE and HEADER_KEY), then
    exchange 6, Metadata v0 with client id BAD_CLIENT."""
    cap = Capture()
    conn = cap.connection(client_port=40001, ts=ms(0))
    t = 10
    for corr, (req, resp) in enumerate(_exchanges(), start=1):
        conn.request(ms(t), kio_request(req, corr, CLIENT))
        conn.response(ms(t + 2), kio_response(resp, corr))
        t += 10
    bad = cap.connection(client_port=40002, ts=ms(t))
    bad.request(ms(t + 5), _metadata_v0(99, BAD_CLIENT))
    bad.response(ms(t + 7), _metadata_v0_response(99))
    return cap.write(path)
