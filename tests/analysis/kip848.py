"""A KIP-848 consumer group (ConsumerGroupHeartbeat, api 68) told as a script, and the capture of
it: no broker or client at hand speaks the protocol (tansu 0.6 does not offer api 68, so neither
librdkafka's nor any other client's `group.protocol=consumer` can run against it), so the
messages are encoded by kio (an independent encoder; none of this project's code) and the
packets by scapy (tests/analysis/build.py). The capture ships as
captures/synthetic/kip848.pcap: `python -m tests.analysis.kip848` rewrites it; a test checks it is
what this script makes.

Group "payments-eu" on topic "payments" (4 partitions; its topic id comes from a Metadata v12
answer, as a client learns it). Times in ms from build.T0; [client id, heartbeat version]:

    @-50   A  Metadata: payments = TOPIC_ID
    @0     A  joins (epoch 0)                        -> epoch 1, payments 0-3        group epoch 1
    @5000  A  heartbeat epoch 1                      -> epoch 1
    @7000  B  joins (v0: no member id; the coordinator gives it one)
                                                     -> epoch 2, nothing yet       group epoch 2
    @10000 A  heartbeat epoch 1                      -> epoch 1, keep 0-1 (revoke 2-3)
    @10030 A  heartbeat epoch 1, owns 0-1            -> epoch 2
    @12000 B  heartbeat epoch 2, owns nothing        -> epoch 2, payments 2-3
    @15000 A, @17000 B  heartbeats at epoch 2
    @20000 B  leaves (epoch -1)                      -> epoch -1                   group epoch 3
    @20100 A  heartbeat epoch 2                      -> epoch 3, payments 0-3
    @25000 A  a stale heartbeat (epoch 1)            -> FENCED_MEMBER_EPOCH
    @25005 A  rejoins (epoch 0, same member id)      -> epoch 4, payments 0-3      group epoch 4

and each member's first Fetch (v13, by topic id) after each assignment it got (FETCHES).

EXPECTED is what the rebalances table must say about it, worked out by hand from the story.
"""
from __future__ import annotations

import datetime
import uuid
from collections import namedtuple
from pathlib import Path

from .build import Capture, kio_request, kio_response, ms

GROUP, TOPIC = "payments-eu", "payments"
TOPIC_ID = uuid.UUID("5f1c2d3e-4b5a-4697-8877-a1b2c3d4e5f6")
A, B = "A7cG0kq0QpK2c1l9Yp3x1w", "Bq9wX3mRT5eS1uP0oZ8d2g"   # member ids (A's its own, v1)
CLIENT = {A: "consumer-a", B: "consumer-b"}
VERSION = {A: 1, B: 0}
FENCED_MEMBER_EPOCH = 110
SHIPPED = Path(__file__).resolve().parents[2] / "captures" / "synthetic" / "kip848.pcap"

# One heartbeat exchange. sent_id: the member id on the request ("" for a v0 join);
# owned / assigned: partitions of TOPIC, None for "unchanged" (null on the wire);
# subscribe: topic names, None for unchanged.
Beat = namedtuple("Beat", "t_req t_resp member sent_id epoch owned subscribe "
                          "resp_epoch assigned error")

BEATS = [
    Beat(0, 4, A, A, 0, (), (TOPIC,), 1, (0, 1, 2, 3), 0),
    Beat(5000, 5002, A, A, 1, None, None, 1, None, 0),
    Beat(7000, 7003, B, "", 0, (), (TOPIC,), 2, (), 0),
    Beat(10000, 10002, A, A, 1, None, None, 1, (0, 1), 0),
    Beat(10030, 10032, A, A, 1, (0, 1), None, 2, None, 0),
    Beat(12000, 12003, B, B, 2, (), None, 2, (2, 3), 0),
    Beat(15000, 15002, A, A, 2, None, None, 2, None, 0),
    Beat(17000, 17002, B, B, 2, (2, 3), None, 2, None, 0),
    Beat(20000, 20002, B, B, -1, None, None, -1, None, 0),
    Beat(20100, 20103, A, A, 2, None, None, 3, (0, 1, 2, 3), 0),
    Beat(25000, 25001, A, A, 1, None, None, 0, None, FENCED_MEMBER_EPOCH),
    Beat(25005, 25009, A, A, 0, (), (TOPIC,), 4, (0, 1, 2, 3), 0),
]


# Each member's Fetches (t_req, t_resp, member, partitions), on a connection of their own (to the
# partitions' leader): long polls answered empty, the first after each new assignment.
FETCHES = [
    (10, 510, A, (0, 1, 2, 3)),
    (10040, 10540, A, (0, 1)),
    (12010, 12510, B, (2, 3)),
    (20110, 20610, A, (0, 1, 2, 3)),
    (25015, 25515, A, (0, 1, 2, 3)),
]


def parts(ps):
    return ", ".join(f"{TOPIC}:{p}" for p in ps)


# (epoch, start ms, synced ms, resumed ms, members, assignments, trigger, trigger client)
EXPECTED = [
    (1, 0, 4, 10, [A], {A: (0, 1, 2, 3)}, "member joined", CLIENT[A]),
    # B joins at 7000 and is answered epoch 2 with nothing to own; A gives up 2-3 (answered at
    # 10002), reaches epoch 2 at 10032; B gets 2-3 at 12003 (the epoch's last assignment) and
    # fetches at 12010
    (2, 7000, 12003, 12010, [A, B], {A: (0, 1), B: (2, 3)}, "member joined", CLIENT[B]),
    # from B's LeaveGroup heartbeat to A's answer with all four partitions, and its Fetch
    (3, 20000, 20103, 20110, [A], {A: (0, 1, 2, 3)}, "member left", CLIENT[B]),
    # from the fenced heartbeat to A's rejoin answered, and its Fetch
    (4, 25000, 25009, 25015, [A], {A: (0, 1, 2, 3)}, "heartbeat error: FENCED_MEMBER_EPOCH",
     CLIENT[A]),
]


def _beat(b, corr):
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i32, i32Timedelta
    v = VERSION[b.member]
    if v == 1:
        from kio.schema.consumer_group_heartbeat.v1 import request as rq
        from kio.schema.consumer_group_heartbeat.v1 import response as rs
    else:
        from kio.schema.consumer_group_heartbeat.v0 import request as rq
        from kio.schema.consumer_group_heartbeat.v0 import response as rs
    joining = b.epoch == 0
    req = rq.ConsumerGroupHeartbeatRequest(
        group_id=GROUP, member_id=b.sent_id, member_epoch=i32(b.epoch),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(
            milliseconds=300_000 if joining else -1)),
        subscribed_topic_names=b.subscribe, server_assignor="uniform" if joining else None,
        topic_partitions=None if b.owned is None else (
            (rq.TopicPartitions(topic_id=TOPIC_ID, partitions=tuple(map(i32, b.owned))),)
            if b.owned else ()))
    assignment = None
    if b.assigned is not None:
        assignment = rs.Assignment(topic_partitions=(
            (rs.TopicPartitions(topic_id=TOPIC_ID, partitions=tuple(map(i32, b.assigned))),)
            if b.assigned else ()))
    resp = rs.ConsumerGroupHeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode(b.error),
        error_message="the member epoch is fenced" if b.error else None,
        member_id=None if b.error else b.member, member_epoch=i32(b.resp_epoch),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        assignment=assignment)
    return kio_request(req, corr, CLIENT[b.member]), kio_response(resp, corr)


def _metadata(corr):
    from kio.schema.errors import ErrorCode
    from kio.schema.metadata.v12 import request as mq
    from kio.schema.metadata.v12 import response as ms_
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i32, i32Timedelta
    req = mq.MetadataRequest(topics=(mq.MetadataRequestTopic(topic_id=None,
                                                             name=TopicName(TOPIC)),),
                             allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
    resp = ms_.MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(ms_.MetadataResponseBroker(node_id=BrokerId(1), host="10.0.0.2",
                                            port=i32(9092), rack=None),),
        cluster_id="kip848-lab", controller_id=BrokerId(1),
        topics=(ms_.MetadataResponseTopic(
            error_code=ErrorCode(0), name=TopicName(TOPIC), topic_id=TOPIC_ID, is_internal=False,
            partitions=tuple(ms_.MetadataResponsePartition(
                error_code=ErrorCode(0), partition_index=i32(p), leader_id=BrokerId(1),
                leader_epoch=i32(0), replica_nodes=(BrokerId(1),), isr_nodes=(BrokerId(1),),
                offline_replicas=()) for p in range(4))),))
    return kio_request(req, corr, CLIENT[A]), kio_response(resp, corr)


def _fetch(partitions, corr, client_id):
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v13 import request as rq
    from kio.schema.fetch.v13 import response as rs
    from kio.static.primitive import i32, i32Timedelta, i64
    req = rq.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)), min_bytes=i32(1),
        topics=(rq.FetchTopic(topic_id=TOPIC_ID, partitions=tuple(
            rq.FetchPartition(partition=i32(p), fetch_offset=i64(0),
                              partition_max_bytes=i32(1 << 20)) for p in partitions)),),
        forgotten_topics_data=())
    resp = rs.FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode(0),
        responses=(rs.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=tuple(
            rs.PartitionData(partition_index=i32(p), error_code=ErrorCode(0),
                             high_watermark=i64(0), aborted_transactions=None, records=None)
            for p in partitions)),))
    return kio_request(req, corr, client_id), kio_response(resp, corr)


def write(path):
    cap = Capture()
    conns = {A: cap.connection(client_ip="10.0.0.11", client_port=41001, ts=ms(-100)),
             B: cap.connection(client_ip="10.0.0.12", client_port=41002, ts=ms(6900))}
    corr = {A: 1, B: 1}
    req, resp = _metadata(corr[A])
    conns[A].request(ms(-50), req)
    conns[A].response(ms(-48), resp)
    corr[A] += 1
    for b in BEATS:
        req, resp = _beat(b, corr[b.member])
        conns[b.member].request(ms(b.t_req), req)
        conns[b.member].response(ms(b.t_resp), resp)
        corr[b.member] += 1
    leaders = {A: cap.connection(client_ip="10.0.0.11", client_port=41003, ts=ms(-40)),
               B: cap.connection(client_ip="10.0.0.12", client_port=41004, ts=ms(6950))}
    for t_req, t_resp, member, partitions in FETCHES:
        req, resp = _fetch(partitions, corr[member], CLIENT[member])
        leaders[member].request(ms(t_req), req)
        leaders[member].response(ms(t_resp), resp)
        corr[member] += 1
    return cap.write(path)


if __name__ == "__main__":
    SHIPPED.parent.mkdir(exist_ok=True)
    print(write(SHIPPED))
