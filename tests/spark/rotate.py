"""Split a capture into rotated files, as `tcpdump -C`/`-G` leaves them: consecutive packets,
each file a complete capture of its own. Connections then span files."""
from __future__ import annotations

from pathlib import Path

from dissector.capture.files import read_packets
from dissector.capture.writer import PcapngWriter, PcapWriter


def rotate(capture, directory, pieces: int, prefix="part", pcapng=False) -> list[Path]:
    """Write `capture`'s packets into `pieces` files of about equal packet counts (names sort in
    packet order); the paths in packet order."""
    packets = [(no, ts, lt, bytes(data)) for no, ts, lt, data in read_packets(capture)]
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    per = -(-len(packets) // pieces)
    paths = []
    for i in range(pieces):
        chunk = packets[i * per:(i + 1) * per]
        if not chunk:
            break
        path = directory / f"{prefix}{i:03d}.{'pcapng' if pcapng else 'pcap'}"
        linktype = chunk[0][2]
        writer = PcapngWriter(path, linktype) if pcapng else PcapWriter(path, linktype)
        with writer:
            for _no, ts_ns, lt, data in chunk:
                if pcapng:
                    writer.write(ts_ns, data, linktype=lt)
                else:
                    writer.write(ts_ns, data)
        paths.append(path)
    return paths
