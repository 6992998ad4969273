"""Group timelines from hand-made bodies (protocols the captures do not show)."""
from analysis import consumers

from .fake import NS, Run, connection, exchange, tables


def test_consumer_group_heartbeat_protocol_events():
    """KIP-848 groups: ConsumerGroupHeartbeat carries the member epoch; only failures and
    rebalance signals reach the timeline."""
    run = Run()
    c = connection(run)
    beats = [exchange(c, i, 68, 0, i * 10, i * 10 + 1,
                      req=NS(group_id="g", member_id="m", member_epoch=epoch),
                      resp=NS(error_code=err, member_epoch=epoch), error_code=err)
             for i, (epoch, err) in enumerate([(0, 0), (1, 0), (1, 110), (2, 0)], start=1)]
    tl = consumers.timeline(tables(run, beats))
    assert tl["event"].tolist() == ["heartbeat"]
    assert tl["error_name"].astype(str).tolist() == ["FENCED_MEMBER_EPOCH"]
    assert tl["generation_id"].tolist() == [1]
