"""A producer, a consumer in a group and an ApiVersions v3 client whose names (client ids,
topic, group, software) are markup and terminal escapes: for the clients table in `stats` and
the report (made by hand with tests/analysis/fake.py)."""
from __future__ import annotations

from .fake import NS, Run, connection, exchange, record_set, tables

SCRIPT = '</script><script>alert(1)</script><img src=x onerror="document.title=\'pwned\'">'
TOPIC = "[bold red]topic[/]\x1b[2J " + SCRIPT + " %{y} <br>"
GROUP = "grp|*_`<b>x</b>\x07"
SOFTWARE = "lib\x1b]0;title\x07<i>x</i>"
PRODUCER, CONSUMER = "pro<b>ducer</b>", "con[/]sumer\x1b[31m"


def tables_of_hostile_clients():
    run = Run()
    p, c = connection(run, 1), connection(run, 2, client=("10.0.0.3", 40001))
    records = record_set(120, [5], producer_id=7)
    out = [
        exchange(p, 1, 18, 3, 0, 1, client_id=PRODUCER,
                 req=NS(client_software_name=SOFTWARE, client_software_version="1.0"),
                 resp=NS(error_code=0, api_keys=[NS(api_key=0, min_version=0, max_version=11)])),
        exchange(p, 2, 0, 9, 2, 4, client_id=PRODUCER,
                 req=NS(acks=-1, transactional_id=None, topic_data=[NS(name=TOPIC, partition_data=[
                     NS(index=0, records=records)])]),
                 resp=NS(responses=[NS(name=TOPIC, partition_responses=[
                     NS(index=0, error_code=0, base_offset=0)])])),
        exchange(c, 3, 12, 4, 5, 6, client_id=CONSUMER,
                 req=NS(group_id=GROUP, generation_id=1, member_id="m"), resp=NS(error_code=0)),
        exchange(c, 4, 1, 12, 7, 9, client_id=CONSUMER,
                 req=NS(replica_id=-1, topics=[NS(topic=TOPIC, partitions=[
                     NS(partition=0, fetch_offset=0)])]),
                 resp=NS(error_code=0, responses=[NS(topic=TOPIC, partitions=[
                     NS(partition_index=0, error_code=0, high_watermark=5,
                        records=record_set(120, [5]))])])),
    ]
    return tables(run, out)
