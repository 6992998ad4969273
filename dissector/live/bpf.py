"""Kernel packet filters (classic BPF) for the live socket.

The filter for `--port` is assembled here, so live capture needs no libpcap: TCP over IPv4 or
IPv6 (no extension headers) to or from one of the ports, IPv4 fragments after the first dropped
(they carry no TCP header), and on loopback the outgoing copy of each packet dropped (AF_PACKET
sees every loopback packet twice: once leaving, once arriving). The instruction layout is the one
libpcap emits for `tcp port P` (checked against `tcpdump -d` in the tests). A user's `--bpf`
expression needs a compiler: libpcap through scapy, else `tcpdump -ddd`.
"""
from __future__ import annotations

import ctypes
import shutil
import socket
import struct
import subprocess

SO_ATTACH_FILTER = 26
SNAPLEN = 262144
MAX_PORTS = 32            # beyond this the jump offsets of one program get long: filter tcp only

# opcodes (linux/bpf_common.h)
_LDH_ABS = 0x28           # A = u16 at [k]
_LDB_ABS = 0x30           # A = u8 at [k]
_LDH_IND = 0x48           # A = u16 at [x + k]
_LDXB_MSH = 0xB1          # X = 4 * ([k] & 0xf): the IPv4 header length
_AND_K = 0x54             # A &= k
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_PKTTYPE = 0xFFFFF000 + 4  # SKF_AD_OFF + SKF_AD_PKTTYPE: the packet type ancillary field
PACKET_OUTGOING = 4

_insn = struct.Struct("=HBBI")


class FilterError(Exception):
    """A filter expression that cannot be compiled here."""


def _assemble(prog):
    """(code, k, jt_label, jf_label) rows and bare label strings -> [(code, jt, jf, k)]."""
    labels, rows = {}, []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(rows)
        else:
            rows.append(item)
    out = []
    for i, (code, k, jt, jf) in enumerate(rows):
        jt = labels[jt] - i - 1 if jt else 0
        jf = labels[jf] - i - 1 if jf else 0
        out.append((code, jt, jf, k))
    return out


def _port_checks(offset_insn, offset, ports, last_fail):
    """Load the u16 at offset and jump to accept when it is one of ports."""
    prog = [(offset_insn, offset, None, None)]
    for i, port in enumerate(ports):
        prog.append((_JEQ_K, port, "accept", last_fail if i == len(ports) - 1 else None))
    return prog


def port_filter(ports=(), *, raw_ip=False, drop_outgoing=False):
    """Instructions accepting TCP packets to or from any of `ports` (all TCP when empty).

    Ethernet framing (Ethernet and loopback devices) unless raw_ip (tun-style devices, packets
    start at the IP header)."""
    ports = sorted(set(ports)) if len(set(ports)) <= MAX_PORTS else []
    nh = 0 if raw_ip else 14
    prog = []
    if raw_ip:
        prog += [(_LDB_ABS, 0, None, None), (_AND_K, 0xF0, None, None),
                 (_JEQ_K, 0x60, "v6", None), (_JEQ_K, 0x40, "v4", "reject")]
    else:
        prog += [(_LDH_ABS, 12, None, None),
                 (_JEQ_K, 0x86DD, "v6", None), (_JEQ_K, 0x0800, "v4", "reject")]
    prog += ["v6", (_LDB_ABS, nh + 6, None, None)]
    if ports:
        prog += [(_JEQ_K, 6, None, "reject")]
        prog += _port_checks(_LDH_ABS, nh + 40, ports, None)
        prog += _port_checks(_LDH_ABS, nh + 42, ports, "reject")
    else:
        prog += [(_JEQ_K, 6, "accept", "reject")]
    prog += ["v4", (_LDB_ABS, nh + 9, None, None), (_JEQ_K, 6, None, "reject"),
             (_LDH_ABS, nh + 6, None, None), (_JSET_K, 0x1FFF, "reject", None)]
    if ports:
        prog += [(_LDXB_MSH, nh, None, None)]
        prog += _port_checks(_LDH_IND, nh, ports, None)
        prog += _port_checks(_LDH_IND, nh + 2, ports, "reject")
    prog += ["accept"]
    if drop_outgoing:
        prog += [(_LDH_ABS, _PKTTYPE, None, None), (_JEQ_K, PACKET_OUTGOING, "reject", None)]
    prog += [(_RET_K, SNAPLEN, None, None), "reject", (_RET_K, 0, None, None)]
    return _assemble(prog)


def compile_expression(expr, iface, linktype):
    """A tcpdump filter expression compiled by libpcap (through scapy), else by `tcpdump -ddd`,
    accepting whole packets (scapy compiles for a 65535-byte snaplen, which would cut loopback's
    64 KiB segments)."""
    return [(code, jt, jf, SNAPLEN if code == _RET_K and k else k)
            for code, jt, jf, k in _compile(expr, iface, linktype)]


def _compile(expr, iface, linktype):
    try:
        from scapy.arch.common import compile_filter, free_filter
        bp = compile_filter(expr, linktype=linktype)
        try:
            return [(i.code, i.jt, i.jf, i.k & 0xFFFFFFFF) for i in bp.bf_insns[:bp.bf_len]]
        finally:
            free_filter(bp)
    except ImportError:
        pass      # no libpcap for ctypes: try the tcpdump binary
    except Exception as exc:  # scapy wraps libpcap's syntax errors in its own exception types
        raise FilterError(f"bad --bpf expression {expr!r}: {exc}") from None
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        raise FilterError("--bpf needs libpcap or tcpdump to compile the expression; "
                          "neither is installed (--port filters need neither)")
    proc = subprocess.run([tcpdump, "-i", iface, "-ddd", expr], capture_output=True, text=True,
                          timeout=20)
    if proc.returncode != 0:
        raise FilterError(f"bad --bpf expression {expr!r}: {proc.stderr.strip()}")
    lines = proc.stdout.split("\n")
    return [tuple(int(v) for v in line.split()) for line in lines[1:1 + int(lines[0])]]


def attach(sock: socket.socket, program) -> None:
    """Install the program on the socket; the kernel copies it during the call."""
    buf = ctypes.create_string_buffer(b"".join(_insn.pack(*ins) for ins in program))
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
