"""Group timelines from hand-made bodies (protocols the captures do not show)."""
from analysis import consumers

from .fake import NS, Run, connection, exchange, tables


def test_consumer_group_heartbeat_protocol_events():
    """KIP-848 groups: ConsumerGroupHeartbeat carries the member epoch; joins (epoch 0, at the
    epoch the coordinator gave), failures and rebalance signals reach the timeline."""
    run = Run()
    c = connection(run)
    beats = [exchange(c, i, 68, 0, i * 10, i * 10 + 1,
                      req=NS(group_id="g", member_id="m", member_epoch=epoch),
                      resp=NS(error_code=err, member_epoch=given), error_code=err)
             for i, (epoch, given, err) in enumerate([(0, 1, 0), (1, 1, 0), (1, 0, 110),
                                                      (0, 2, 0), (-1, -1, 0)], start=1)]
    tl = consumers.timeline(tables(run, beats))
    assert tl["event"].tolist() == ["join", "heartbeat", "join", "leave"]
    assert tl["error_name"].astype(str).tolist() == ["NONE", "FENCED_MEMBER_EPOCH", "NONE",
                                                     "NONE"]
    assert tl["generation_id"].astype(object).where(tl["generation_id"].notna(), None).tolist() \
        == [1, 1, 2, None]
