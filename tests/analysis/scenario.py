"""One constructed capture with decoded bodies and hand-chosen numbers, shared by the analysis,
command and report tests. Messages are encoded by kio and record batches by kafka-python (both
independent of our decoders); times are T0 + the milliseconds written next to each exchange.

What happens (client ids in brackets), and the numbers the tests expect:
  conn 1 [producer]
    Produce v9 acks=-1  @100 -> @104 (4 ms): orders/0 idempotent pid 7, 3 records, zstd;
                         orders/1 plain, 2 records -> error 6 NOT_LEADER_OR_FOLLOWER
    Produce v9 acks=1   @200 -> @202 (2 ms): orders/0, 1 record, no compression
    Produce v9 acks=-1  @300 -> @309 (9 ms): orders/0, 1 record, no compression, throttled 25 ms
  conn 2 [consumer]
    JoinGroup v7 g1     @400 -> @420 (20 ms): member m-1, generation 3
    SyncGroup v5 g1     @430 -> @431
    Fetch v12 max 500   @500 -> @1001 (501 ms): orders/0 from 104, hw 110, no records: long poll
    Fetch v12 max 500   @1100 -> @1103 (3 ms): orders/0 from 104, hw 110, 2 records: lag 6
    Fetch v12 max 500   @1200 -> @1206 (6 ms): orders/0 from 106, hw 120: lag 14
    OffsetCommit v8 g1  @1300 -> @1301: orders/0 committed 108
    Heartbeat v4 g1     @1400 -> @1401: error 27 REBALANCE_IN_PROGRESS
    LeaveGroup v4 g1    @1500 -> @1501
    Metadata v12        @1600 -> never answered
"""
from __future__ import annotations

import datetime

from .build import Capture, kio_request, kio_response, ms

TOPIC = "orders"
ZSTD_VALUES = [b"a" * 300, b"b" * 300, b"c" * 300]   # compressible, so kafka-python keeps zstd


def batch(values, codec=0, producer_id=-1, base_sequence=-1, ts=1_700_000_000_000):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0
                                  else -1, base_sequence=base_sequence, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=None, value=v, headers=[])
    return bytes(b.build())


def _produce(corr, acks, parts, resp_parts, throttle_ms=0):
    from kio.schema.errors import ErrorCode
    from kio.schema.produce.v9 import request as rq
    from kio.schema.produce.v9 import response as rs
    from kio.static.primitive import i16, i32, i64
    req = rq.ProduceRequest(transactional_id=None, acks=i16(acks),
                            timeout=datetime.timedelta(milliseconds=30000),
                            topic_data=(rq.TopicProduceData(name=TOPIC, partition_data=tuple(
                                rq.PartitionProduceData(index=i32(p), records=r)
                                for p, r in parts)),))
    resp = rs.ProduceResponse(responses=(rs.TopicProduceResponse(
        name=TOPIC, partition_responses=tuple(
            rs.PartitionProduceResponse(index=i32(p), error_code=ErrorCode(err),
                                        base_offset=i64(off), log_append_time=None,
                                        log_start_offset=i64(0), record_errors=(),
                                        error_message=None)
            for p, err, off in resp_parts)),),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms))
    return kio_request(req, corr, "producer"), kio_response(resp, corr)


def _fetch(corr, offset, hw, records):
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v12 import request as rq
    from kio.schema.fetch.v12 import response as rs
    from kio.static.primitive import i32, i64
    req = rq.FetchRequest(max_wait=datetime.timedelta(milliseconds=500), min_bytes=i32(1),
                          topics=(rq.FetchTopic(topic=TOPIC, partitions=(rq.FetchPartition(
                              partition=i32(0), fetch_offset=i64(offset),
                              partition_max_bytes=i32(1 << 20)),)),),
                          forgotten_topics_data=())
    resp = rs.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode(0),
                            responses=(rs.FetchableTopicResponse(topic=TOPIC, partitions=(
                                rs.PartitionData(partition_index=i32(0), error_code=ErrorCode(0),
                                                 high_watermark=i64(hw),
                                                 last_stable_offset=i64(hw),
                                                 log_start_offset=i64(0),
                                                 aborted_transactions=None,
                                                 records=records),)),))
    return kio_request(req, corr, "consumer"), kio_response(resp, corr)


def _group(corr):
    from kio.schema.errors import ErrorCode
    from kio.schema.heartbeat.v4 import request as hbq
    from kio.schema.heartbeat.v4 import response as hbs
    from kio.schema.join_group.v7 import request as jq
    from kio.schema.join_group.v7 import response as js
    from kio.schema.leave_group.v4 import request as lq
    from kio.schema.leave_group.v4 import response as ls
    from kio.schema.offset_commit.v8 import request as ocq
    from kio.schema.offset_commit.v8 import response as ocs
    from kio.schema.sync_group.v5 import request as sq
    from kio.schema.sync_group.v5 import response as ss
    from kio.static.primitive import i32, i64
    zero = datetime.timedelta(0)
    join = (jq.JoinGroupRequest(group_id="g1", session_timeout=datetime.timedelta(seconds=10),
                                rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
                                group_instance_id=None, protocol_type="consumer",
                                protocols=(jq.JoinGroupRequestProtocol(name="range",
                                                                       metadata=b""),)),
            js.JoinGroupResponse(throttle_time=zero, error_code=ErrorCode(0),
                                 generation_id=i32(3), protocol_type="consumer",
                                 protocol_name="range", leader="m-1", member_id="m-1",
                                 members=()))
    sync = (sq.SyncGroupRequest(group_id="g1", generation_id=i32(3), member_id="m-1",
                                group_instance_id=None, protocol_type="consumer",
                                protocol_name="range", assignments=()),
            ss.SyncGroupResponse(throttle_time=zero, error_code=ErrorCode(0),
                                 protocol_type="consumer", protocol_name="range",
                                 assignment=b""))
    commit = (ocq.OffsetCommitRequest(group_id="g1", generation_id_or_member_epoch=i32(3),
                                      member_id="m-1", group_instance_id=None,
                                      topics=(ocq.OffsetCommitRequestTopic(name=TOPIC, partitions=(
                                          ocq.OffsetCommitRequestPartition(
                                              partition_index=i32(0), committed_offset=i64(108),
                                              committed_leader_epoch=i32(-1),
                                              committed_metadata=""),)),)),
              ocs.OffsetCommitResponse(throttle_time=zero, topics=(ocs.OffsetCommitResponseTopic(
                  name=TOPIC, partitions=(ocs.OffsetCommitResponsePartition(
                      partition_index=i32(0), error_code=ErrorCode(0)),)),)))
    heartbeat = (hbq.HeartbeatRequest(group_id="g1", generation_id=i32(3), member_id="m-1",
                                      group_instance_id=None),
                 hbs.HeartbeatResponse(throttle_time=zero, error_code=ErrorCode(27)))
    leave = (lq.LeaveGroupRequest(group_id="g1", members=(lq.MemberIdentity(
        member_id="m-1", group_instance_id=None),)),
        ls.LeaveGroupResponse(throttle_time=zero, error_code=ErrorCode(0), members=(
            ls.MemberResponse(member_id="m-1", group_instance_id=None,
                              error_code=ErrorCode(0)),)))
    return [(req, resp) for req, resp in (join, sync, commit, heartbeat, leave)]


def _metadata(corr):
    from kio.schema.metadata.v12 import request as mq
    req = mq.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
    return kio_request(req, corr, "consumer")


def write(path):
    cap = Capture()
    prod = cap.connection(client_port=40001, ts=ms(0))
    zstd = 4
    for (t_req, t_resp), exchange in zip(
            [(100, 104), (200, 202), (300, 309)],
            [_produce(1, -1, [(0, batch(ZSTD_VALUES, codec=zstd, producer_id=7,
                                        base_sequence=0)), (1, batch([b"d", b"e"]))],
                      [(0, 0, 101), (1, 6, -1)]),
             _produce(2, 1, [(0, batch([b"f"]))], [(0, 0, 104)]),
             _produce(3, -1, [(0, batch([b"g"]))], [(0, 0, 105)], throttle_ms=25)]):
        prod.request(ms(t_req), exchange[0])
        prod.response(ms(t_resp), exchange[1])
    cons = cap.connection(client_ip="10.0.0.5", client_port=40002, ts=ms(1))
    corr = 10
    group = _group(corr)
    for (req, resp), (t_req, t_resp) in zip(group[:2], [(400, 420), (430, 431)]):
        cons.request(ms(t_req), kio_request(req, corr, "consumer"))
        cons.response(ms(t_resp), kio_response(resp, corr))
        corr += 1
    for (t_req, t_resp), (offset, hw, records) in zip(
            [(500, 1001), (1100, 1103), (1200, 1206)],
            [(104, 110, None), (104, 110, batch([b"x", b"y"])), (106, 120, None)]):
        req, resp = _fetch(corr, offset, hw, records)
        cons.request(ms(t_req), req)
        cons.response(ms(t_resp), resp)
        corr += 1
    for (req, resp), (t_req, t_resp) in zip(group[2:], [(1300, 1301), (1400, 1401),
                                                        (1500, 1501)]):
        cons.request(ms(t_req), kio_request(req, corr, "consumer"))
        cons.response(ms(t_resp), kio_response(resp, corr))
        corr += 1
    cons.request(ms(1600), _metadata(corr))
    return cap.write(path)
