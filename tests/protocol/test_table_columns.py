"""The exchange table's body columns (error_code, error_name, error_count, throttle_time_ms,
topics, partition_count) for responses written by kio (Aiven's Kafka types) to requests written
by kafka-python, through the whole pipeline. Expected values follow from what each message holds."""
import datetime

import pytest

from tests.support import require_module

from .test_special_cases import run

pytest.importorskip("kio")
pytest.importorskip("kafka")

from kio.schema.errors import ErrorCode as E  # noqa: E402
from kio.schema.types import BrokerId, TopicName  # noqa: E402
from kio.static.primitive import i32, i64  # noqa: E402

from tests.analysis.build import kio_response  # noqa: E402
from tests.oracles.kafka_python import build, encode_request, framed  # noqa: E402

MS = datetime.timedelta(milliseconds=1)


def exchange(tmp_path, request_cls, request_values, version, response):
    require_module("kio")
    req = framed(encode_request(build(request_cls, request_values, version), 11))
    _, rows = run(tmp_path, [(req, kio_response(response, 11))])
    (row,) = rows
    assert (row["status"], row["issue_count"], row["api_version"]) == ("ok", 0, version)
    return {k: row[k] for k in ("error_code", "error_name", "error_count", "throttle_time_ms",
                                "topics", "partition_count")}


def test_produce(tmp_path):
    from kafka.protocol.producer import ProduceRequest
    from kio.schema.produce.v9 import response as r
    req = dict(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        dict(name="a", partition_data=[dict(index=0, records=None), dict(index=1, records=None)]),
        dict(name="b", partition_data=[dict(index=0, records=None)])])
    resp = r.ProduceResponse(throttle_time=5 * MS, responses=(
        r.TopicProduceResponse(name=TopicName("a"), partition_responses=(
            r.PartitionProduceResponse(index=i32(0), error_code=E.none, base_offset=i64(10), record_errors=()),
            r.PartitionProduceResponse(index=i32(1), error_code=E.not_leader_or_follower,
                                       base_offset=i64(-1), record_errors=()))),
        r.TopicProduceResponse(name=TopicName("b"), partition_responses=(
            r.PartitionProduceResponse(index=i32(0), error_code=E.invalid_record, base_offset=i64(-1),
                                       record_errors=(r.BatchIndexAndErrorMessage(batch_index=i32(0)),)),))))
    assert exchange(tmp_path, ProduceRequest, req, 9, resp) == dict(
        error_code=6, error_name="NOT_LEADER_OR_FOLLOWER", error_count=2, throttle_time_ms=5,
        topics=["a", "b"], partition_count=3)


def test_fetch(tmp_path):
    from kafka.protocol.consumer import FetchRequest
    from kio.schema.fetch.v12 import response as r
    part = dict(fetch_offset=0, partition_max_bytes=1 << 20)
    req = dict(replica_id=-1, max_wait_ms=500, min_bytes=1, topics=[
        dict(topic="a", partitions=[dict(part, partition=0), dict(part, partition=1)])])

    def pd(i, code):
        return r.PartitionData(partition_index=i32(i), error_code=code, high_watermark=i64(0),
                               aborted_transactions=None, records=None)
    resp = r.FetchResponse(throttle_time=0 * MS, error_code=E.none, responses=(
        r.FetchableTopicResponse(topic=TopicName("a"), partitions=(
            pd(0, E.offset_out_of_range), pd(1, E.not_leader_or_follower))),))
    assert exchange(tmp_path, FetchRequest, req, 12, resp) == dict(
        error_code=1, error_name="OFFSET_OUT_OF_RANGE", error_count=2, throttle_time_ms=0,
        topics=["a"], partition_count=2)


def test_fetch_top_level_error_comes_first(tmp_path):
    from kafka.protocol.consumer import FetchRequest
    from kio.schema.fetch.v12 import response as r
    req = dict(replica_id=-1, max_wait_ms=500, min_bytes=1, session_id=7, session_epoch=3, topics=[])
    resp = r.FetchResponse(throttle_time=3 * MS, error_code=E.fetch_session_id_not_found, responses=())
    assert exchange(tmp_path, FetchRequest, req, 12, resp) == dict(
        error_code=70, error_name="FETCH_SESSION_ID_NOT_FOUND", error_count=1, throttle_time_ms=3,
        topics=[], partition_count=0)


def test_metadata(tmp_path):
    from kafka.protocol.metadata import MetadataRequest
    from kio.schema.metadata.v9 import response as r
    req = dict(topics=[dict(name="a"), dict(name="b")], allow_auto_topic_creation=False)

    def p(i, code):
        return r.MetadataResponsePartition(error_code=code, partition_index=i32(i), leader_id=BrokerId(1))
    resp = r.MetadataResponse(throttle_time=2 * MS, brokers=(
        r.MetadataResponseBroker(node_id=BrokerId(1), host="h", port=i32(9092)),), topics=(
        r.MetadataResponseTopic(error_code=E.none, name=TopicName("a"), partitions=(
            p(0, E.none), p(1, E.replica_not_available))),
        r.MetadataResponseTopic(error_code=E.unknown_topic_or_partition, name=TopicName("b"), partitions=())))
    cols = exchange(tmp_path, MetadataRequest, req, 9, resp)
    assert {k: cols[k] for k in ("error_code", "error_name", "error_count", "throttle_time_ms", "topics")} == dict(
        error_code=9, error_name="REPLICA_NOT_AVAILABLE", error_count=2, throttle_time_ms=2,
        topics=["a", "b"])


def test_offset_commit(tmp_path):
    from kafka.protocol.consumer import OffsetCommitRequest
    from kio.schema.offset_commit.v8 import response as r
    req = dict(group_id="g", generation_id_or_member_epoch=1, member_id="m", group_instance_id=None,
               topics=[dict(name="a", partitions=[
                   dict(partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""),
                   dict(partition_index=1, committed_offset=6, committed_leader_epoch=-1, committed_metadata="")])])
    resp = r.OffsetCommitResponse(throttle_time=0 * MS, topics=(
        r.OffsetCommitResponseTopic(name=TopicName("a"), partitions=(
            r.OffsetCommitResponsePartition(partition_index=i32(0), error_code=E.unknown_member_id),
            r.OffsetCommitResponsePartition(partition_index=i32(1), error_code=E.unknown_member_id))),))
    assert exchange(tmp_path, OffsetCommitRequest, req, 8, resp) == dict(
        error_code=25, error_name="UNKNOWN_MEMBER_ID", error_count=2, throttle_time_ms=0,
        topics=["a"], partition_count=2)


def test_list_offsets(tmp_path):
    from kafka.protocol.consumer import ListOffsetsRequest
    from kio.schema.list_offsets.v7 import response as r
    req = dict(replica_id=-1, isolation_level=0, topics=[
        dict(name="a", partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=-1)]),
        dict(name="b", partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=-2)])])
    resp = r.ListOffsetsResponse(throttle_time=12 * MS, topics=(
        r.ListOffsetsTopicResponse(name=TopicName("a"), partitions=(
            r.ListOffsetsPartitionResponse(partition_index=i32(0), error_code=E.none, offset=i64(42)),)),
        r.ListOffsetsTopicResponse(name=TopicName("b"), partitions=(
            r.ListOffsetsPartitionResponse(partition_index=i32(0), error_code=E.unknown_topic_or_partition),))))
    assert exchange(tmp_path, ListOffsetsRequest, req, 7, resp) == dict(
        error_code=3, error_name="UNKNOWN_TOPIC_OR_PARTITION", error_count=1, throttle_time_ms=12,
        topics=["a", "b"], partition_count=2)


def _metadata_all_topics(tmp_path):
    from kafka.protocol.metadata import MetadataRequest
    from kio.schema.metadata.v9 import response as r
    req = dict(topics=None, allow_auto_topic_creation=False)   # all topics

    def p(i):
        return r.MetadataResponsePartition(error_code=E.none, partition_index=i32(i), leader_id=BrokerId(1))
    resp = r.MetadataResponse(throttle_time=0 * MS, brokers=(), topics=(
        r.MetadataResponseTopic(error_code=E.none, name=TopicName("a"), partitions=(p(0), p(1))),
        r.MetadataResponseTopic(error_code=E.none, name=TopicName("b"), partitions=(p(0),))))
    return exchange(tmp_path, MetadataRequest, req, 9, resp)


def test_metadata_topics_and_partitions_come_from_the_response(tmp_path):
    cols = _metadata_all_topics(tmp_path)
    assert (cols["topics"], cols["partition_count"]) == (["a", "b"], 3)
