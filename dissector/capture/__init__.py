"""Capture sources: pcap/pcapng readers and link/IP/TCP layer parsing."""
from .errors import CaptureError
from .files import read_packets
from .layers import ACK, FIN, PSH, RST, SYN, URG, format_addr, tcp_segment

__all__ = ["CaptureError", "read_packets", "tcp_segment", "format_addr",
           "FIN", "SYN", "RST", "PSH", "ACK", "URG"]
