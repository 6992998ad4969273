"""Packets from a network interface through scapy's Linux AF_PACKET socket (no libpcap).

scapy opens and binds the socket (with kernel timestamps and packet auxdata turned on); packets
are then read straight off it with recvmsg_into into one reused buffer, so no scapy packet object
is built per packet. Each packet comes out as (ts_ns, data, wire_len) with the kernel's nanosecond
timestamp, VLAN tags the NIC stripped put back (as libpcap does), and on loopback the outgoing
copy of every packet dropped, so each packet is seen once.
"""
from __future__ import annotations

import logging
import select
import socket
import struct
import time

from . import bpf
from .errors import LiveError

SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_AUXDATA = 8
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
ETH_P_8021Q = 0x8100

ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772
ARPHRD_NONE = 65534
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101

BATCH = 2048
DEFAULT_BUFFER = 32 << 20

_timespec = struct.Struct("=qq")
_auxdata = struct.Struct("=IIIHHHH")   # status, len, snaplen, mac, net, vlan_tci, vlan_tpid
_stats = struct.Struct("=II")          # tp_packets (received + dropped), tp_drops
_vlan = struct.Struct("!HH")


def interface_names() -> list[str]:
    return [name for _, name in sorted(socket.if_nameindex())]


def _open_scapy_socket(iface, promisc):
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)   # no import-time chatter
    try:
        from scapy.arch.linux import L2ListenSocket
    except ImportError:
        raise LiveError("live capture needs scapy: pip install 'kafka-dissector[live]'") from None
    try:
        return L2ListenSocket(iface=iface, promisc=promisc)
    except PermissionError:
        raise LiveError(f"capturing on {iface} needs root or the CAP_NET_RAW capability "
                        "(run with sudo, or grant it: setcap cap_net_raw+ep on the Python "
                        "interpreter)") from None
    except OSError as exc:
        raise LiveError(f"cannot capture on {iface}: {exc.strerror or exc}") from None


class Sniffer:
    """One AF_PACKET socket on one interface, filtered in the kernel.

    ports/auto build the default filter (TCP to or from the ports; all TCP with auto); `bpf`, a
    tcpdump expression, replaces it."""

    def __init__(self, iface, *, ports=(), auto=False, bpf_expr=None, buffer_bytes=DEFAULT_BUFFER,
                 promisc=True):
        names = interface_names()
        if iface not in names:
            raise LiveError(f"no interface named {iface!r}; the interfaces here are: "
                            f"{', '.join(names)}")
        self.iface = iface
        self.kernel_packets = 0
        self.kernel_drops = 0
        self._scapy = _open_scapy_socket(iface, promisc)
        try:
            self._setup(ports, auto, bpf_expr, buffer_bytes)
        except BaseException:
            self._scapy.close()
            raise

    def _setup(self, ports, auto, bpf_expr, buffer_bytes):
        sock = self.sock = self._scapy.ins
        hatype = sock.getsockname()[3]
        self.loopback = hatype == ARPHRD_LOOPBACK
        if hatype in (ARPHRD_ETHER, ARPHRD_LOOPBACK):
            self.linktype = LINKTYPE_ETHERNET
        elif hatype == ARPHRD_NONE:
            self.linktype = LINKTYPE_RAW
        else:
            raise LiveError(f"{self.iface}: hardware type {hatype} is not supported for live "
                            "capture (Ethernet, loopback and raw-IP devices are)")
        if bpf_expr:
            expr = f"({bpf_expr}) and inbound" if self.loopback else bpf_expr
            try:
                program = bpf.compile_expression(expr, self.iface, self.linktype)
            except bpf.FilterError as exc:
                raise LiveError(str(exc)) from None
        else:
            program = bpf.port_filter(() if auto else ports, raw_ip=self.linktype == LINKTYPE_RAW,
                                      drop_outgoing=self.loopback)
        bpf.attach(sock, program)
        self.filter_program = program
        try:   # root may exceed net.core.rmem_max; a busy link needs the room
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, buffer_bytes)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._drain()   # packets queued before the filter was attached were not filtered
        self._buf = bytearray(bpf.SNAPLEN)
        self._view = memoryview(self._buf)
        self._ancsize = socket.CMSG_SPACE(_auxdata.size) + socket.CMSG_SPACE(_timespec.size)
        self._poller = select.poll()
        self._poller.register(sock.fileno(), select.POLLIN)

    def _drain(self):
        while True:
            try:
                self.sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_TRUNC)
            except BlockingIOError:
                break
        self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _stats.size)   # reading resets them

    def read(self, timeout: float) -> list:
        """Wait up to `timeout` seconds, then return the packets queued (at most BATCH) as
        (ts_ns, data, wire_len) tuples; an empty list when none came."""
        if not self._poller.poll(int(timeout * 1000)):
            return []
        out = []
        recv = self.sock.recvmsg_into
        bufs = [self._buf]
        view = self._view
        ancsize = self._ancsize
        flags = socket.MSG_DONTWAIT
        loopback = self.loopback
        for _ in range(BATCH):
            try:
                n, anc, _flags, addr = recv(bufs, ancsize, flags)
            except BlockingIOError:
                break
            if loopback and addr[2] == bpf.PACKET_OUTGOING:
                continue
            data = bytes(view[:n])
            ts = None
            wire_len = n
            for level, kind, cdata in anc:
                if level == SOL_PACKET and kind == PACKET_AUXDATA:
                    status, wire_len, _, _, _, tci, tpid = _auxdata.unpack_from(cdata)
                    if status & TP_STATUS_VLAN_VALID and self.linktype == LINKTYPE_ETHERNET:
                        if not status & TP_STATUS_VLAN_TPID_VALID:
                            tpid = ETH_P_8021Q
                        data = data[:12] + _vlan.pack(tpid, tci) + data[12:]
                        wire_len += 4
                elif level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = _timespec.unpack_from(cdata)
                    ts = sec * 1_000_000_000 + nsec
            out.append((ts if ts is not None else time.time_ns(), data, wire_len))
        return out

    def update_kernel_stats(self) -> None:
        """Add the kernel's counters since the last call (reading them resets them)."""
        packets, drops = _stats.unpack(self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS,
                                                             _stats.size))
        self.kernel_packets += packets
        self.kernel_drops += drops

    def close(self) -> None:
        if self._scapy is not None:
            self._scapy.close()
            self._scapy = None
