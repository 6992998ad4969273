"""What a Dissector produced, as plain values: exchanges (rows, frames' bytes and places, issues,
in output order with their index), capture-level issues and the connections table. Two ways of
feeding the same packets must give equal snapshots."""
from dissector.tables import exchange_row, issue_row


def _frame(f):
    if f is None:
        return None
    return (f.direction, f.stream_offset, f.length, bytes(f.data), f.first_packet, f.last_packet,
            f.first_ts, f.last_ts)


def exchange(ex):
    return (exchange_row(ex), _frame(ex.request), _frame(ex.response),
            [issue_row(i) for i in ex.issues])


def snapshot(d, exchanges):
    """d: the Dissector after finish(); exchanges: what came out of it, in order."""
    conns = [(c.connection_id, c.client_ip, c.client_port, c.broker_ip, c.broker_port, c.first_ts,
              c.last_ts, c.first_packet) for c in d.connections]
    return ([exchange(ex) for ex in exchanges], [issue_row(i) for i in d.issues], d.issue_count,
            conns, d.packets)
