"""The parent and its workers talk over two pipes per worker: pickled messages, each after its
length. Plain pipes and os.fork rather than multiprocessing, whose import, queues and feeder
threads cost the start of every run (before the workers start, where it adds to the wall time)
and a thread switch per message.

A worker writes blocking (the parent always reads); the parent never blocks on a write: what a
worker has not read yet waits in the parent's buffer and goes out when its pipe has room, so a
worker blocked writing to a parent blocked writing to it cannot happen. The pipes hold PIPE_SIZE
bytes where the system allows (Linux): a step's rendered exchanges (half a MiB on dense traffic)
then go out in one write instead of a wait for the parent every 64 KiB, the default, with every
CPU busy with a worker.

A worker's message carrying SHARED_FROM bytes or more of buffers (the records' Arrow columns, a
step's tables) sends them through shared memory where the system has it (Linux: memfd): pickled
with those buffers out of band, written once into a memory file whose descriptor goes to the
parent over a Unix socket beside the pipes, and mapped by the parent, which reads the columns in
place. Through the pipe every byte was copied four times (into the pickle, into and out of the
pipe, out of the pickle): the 450 MB of record values of the 400 MB benchmark capture took the
parent and the workers about 2 s of system time, more than --jobs 2 gained.
"""
from __future__ import annotations

import mmap
import os
import select
import struct
import time
import fcntl
# the compiled cores of pickle, signal and socket: importing the modules themselves (pickle.py's
# names, signal's and socket's enums) took ~9 ms of each parallel run's start, before the
# workers start
import _socket
from _pickle import dumps, loads
from _signal import SIG_DFL, SIGINT, SIGKILL, signal

_LEN = struct.Struct("<Q")      # a frame: its length, then its kind (one byte) and body
_INBAND, _SHARED = 0, 1         # kinds: the pickle; the buffers' sizes and the pickle
_COUNT = struct.Struct("<I")
SHARED_FROM = 1 << 20   # a message's out-of-band buffers this large go through shared memory
_MEMFD = hasattr(os, "memfd_create") and hasattr(_socket, "SCM_RIGHTS")   # Linux
_FD = struct.Struct("i")   # a descriptor in an SCM_RIGHTS message
_READ = 1 << 20
_PROTOCOL = 5   # pickle.HIGHEST_PROTOCOL (since Python 3.8)
PIPE_SIZE = 1 << 20   # Linux's limit for unprivileged processes by default (pipe-max-size)
_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", None)   # Linux only


def _frame(msg) -> bytes:
    return _inband(dumps(msg, _PROTOCOL))


def _inband(data) -> bytes:
    return _LEN.pack(len(data) + 1) + bytes((_INBAND,)) + data


def _shared_frame(msg, sock):
    """The frame of `msg`, its large buffers sent through a memory file on `sock` first (the
    parent receives the descriptor before it reads the frame), else _frame(msg)."""
    buffers = []
    data = dumps(msg, _PROTOCOL, buffer_callback=buffers.append)
    if not buffers:
        return _inband(data)
    raws = [b.raw() for b in buffers]
    sizes = [r.nbytes for r in raws]
    if sum(sizes) < SHARED_FROM:
        return _frame(msg)
    fd = _memory_file(raws)
    if fd is None:
        return _frame(msg)
    try:
        _send_fd(sock, fd)
    finally:
        os.close(fd)   # the one in flight keeps the file
    head = _COUNT.pack(len(sizes)) + b"".join(map(_LEN.pack, sizes))
    return _LEN.pack(1 + len(head) + len(data)) + bytes((_SHARED,)) + head + data


def _memory_file(raws):
    """A memory file holding the buffers `raws` one after another (its descriptor), or None
    where none can be made or filled (no memory files, descriptors or memory left)."""
    try:
        fd = os.memfd_create("kafka-dissect", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        for raw in raws:
            while raw:
                raw = raw[os.write(fd, raw):]
    except OSError:
        os.close(fd)
        return None
    return fd


def _mapped(sock, sizes):
    """The buffers of a _SHARED frame: views of the memory file received on `sock`, mapped
    copy-on-write (what is built on them may be written; the worker's file stays as it was)."""
    fd = _recv_fd(sock)
    if fd is None:   # dropped by the kernel: this process is out of file descriptors
        raise RuntimeError("a worker's columns did not arrive (out of file descriptors?)")
    try:
        view = memoryview(mmap.mmap(fd, sum(sizes), access=mmap.ACCESS_COPY))
    finally:
        os.close(fd)   # the map holds its own
    buffers, at = [], 0
    for size in sizes:
        buffers.append(view[at:at + size])
        at += size
    return buffers


def _send_fd(sock, fd):
    """Pass descriptor `fd` over Unix socket `sock` (socket.send_fds, without the module)."""
    sock.sendmsg([b"f"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _FD.pack(fd))])


def _recv_fd(sock):
    """The descriptor _send_fd passed on `sock` (now this process's), or None if the kernel
    dropped it."""
    _, ancillary, _, _ = sock.recvmsg(1, _socket.CMSG_LEN(_FD.size))
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(data) >= _FD.size:
            return _FD.unpack_from(data)[0]
    return None


def _enlarge(fd):
    if _SETPIPE_SZ is not None:
        try:
            fcntl.fcntl(fd, _SETPIPE_SZ, PIPE_SIZE)
        except OSError:   # a lower limit: the default size
            pass


class _Frames:
    """Bytes read from a pipe -> the complete messages among them (`sock`: where the memory
    files of _SHARED frames come from)."""

    def __init__(self, sock=None):
        self.buf = bytearray()
        self.sock = sock

    def take(self):
        """The complete messages buffered, oldest first."""
        buf, msgs, at = self.buf, [], 0
        while len(buf) - at >= 8:
            size = _LEN.unpack_from(buf, at)[0]
            if len(buf) - at - 8 < size:
                break
            with memoryview(buf)[at + 8:at + 8 + size] as body:
                msgs.append(self._message(body))
            at += 8 + size
        del buf[:at]
        return msgs

    def _message(self, body):
        if body[0] == _INBAND:
            return loads(body[1:])
        count = _COUNT.unpack_from(body, 1)[0]
        sizes = struct.unpack_from(f"<{count}Q", body, 1 + _COUNT.size)
        start = 1 + _COUNT.size + 8 * count
        return loads(body[start:], buffers=_mapped(self.sock, sizes))


class Link:
    """A worker's end: put() a message to the parent, get() the next from it (None: the parent
    is gone or said nothing yet, with block=False). `sock`: where large buffers go (None:
    through the pipe)."""

    def __init__(self, up, down, sock=None):
        self.up, self.down, self.sock = up, down, sock
        self.frames = _Frames()
        self.ready = []
        os.set_blocking(down, False)

    def put(self, msg):
        frame = _frame(msg) if self.sock is None else _shared_frame(msg, self.sock)
        view = memoryview(frame)
        while view:
            view = view[os.write(self.up, view):]

    def get(self, block=True):
        while not self.ready:
            try:
                data = os.read(self.down, _READ)
            except BlockingIOError:
                if not block:
                    return None
                select.select([self.down], [], [])
                continue
            if not data:   # the parent closed its end
                return None
            self.frames.buf += data
            self.ready = self.frames.take()
        return self.ready.pop(0)


class Workers:
    """The parent's end: `start(n, body)` forks n workers running body(w, Link) (then exiting);
    `put(w, msg)` queues a message for worker w; `messages(timeout)` waits until a worker says
    something (or the timeout passes) and returns what they said, writing queued messages
    meanwhile. A worker whose pipe closes before it said it was done is an error."""

    def __init__(self):
        self.pids = []
        self.ups, self.downs, self.socks = [], [], []
        self.frames, self.out = [], []
        self.done = set()

    def start(self, n, body):
        for w in range(n):
            up_r, up_w = os.pipe()
            down_r, down_w = os.pipe()
            _enlarge(up_w)
            _enlarge(down_w)
            mine, theirs = _socket.socketpair() if _MEMFD else (None, None)
            pid = os.fork()
            if pid == 0:   # the worker: its ends only, and no return into the parent's code
                status = 1
                try:
                    os.close(up_r)
                    os.close(down_w)
                    for fd in (*self.ups, *self.downs):
                        os.close(fd)
                    for sock in (mine, *self.socks):
                        if sock is not None:
                            sock.close()
                    signal(SIGINT, SIG_DFL)
                    body(w, Link(up_w, down_r, theirs))
                    status = 0
                finally:
                    os._exit(status)
            os.close(up_w)
            os.close(down_r)
            if theirs is not None:
                theirs.close()
            os.set_blocking(down_w, False)
            self.pids.append(pid)
            self.ups.append(up_r)
            self.downs.append(down_w)
            self.socks.append(mine)
            self.frames.append(_Frames(mine))
            self.out.append(bytearray())

    def put(self, w, msg):
        self.out[w] += _frame(msg)
        self._send(w)

    def _send(self, w):
        out = self.out[w]
        if out:
            try:
                del out[:os.write(self.downs[w], out)]
            except BlockingIOError:
                pass
            except BrokenPipeError:   # it ended: its pipe up says how
                out.clear()

    def finished(self, w):
        """Worker w has said all it will."""
        self.done.add(w)

    def messages(self, timeout=None):
        reading = [fd for w, fd in enumerate(self.ups) if w not in self.done]
        writing = [fd for w, fd in enumerate(self.downs) if self.out[w]]
        readable, writable, _ = select.select(reading, writing, [], timeout)
        for fd in writable:
            self._send(self.downs.index(fd))
        msgs = []
        for fd in readable:
            w = self.ups.index(fd)
            data = os.read(fd, _READ)
            if not data:
                raise RuntimeError(f"a worker process ended with status {self._status(w)}")
            frames = self.frames[w]
            frames.buf += data
            msgs.extend(frames.take())
        return msgs

    def _status(self, w):
        try:
            _, status = os.waitpid(self.pids[w], 0)
        except ChildProcessError:
            return None
        self.pids[w] = None
        return os.waitstatus_to_exitcode(status)

    def stop(self, grace=2.0):
        """Close the pipes and reap the workers: those that said they were done get `grace`
        seconds to exit, the others (the run failed) are killed."""
        for fd in (*self.ups, *self.downs):
            os.close(fd)
        for sock in self.socks:
            if sock is not None:
                sock.close()
        self.ups = self.downs = self.socks = []
        deadline = time.monotonic() + grace
        for w, pid in enumerate(self.pids):
            if pid is None:
                continue
            if w not in self.done:
                os.kill(pid, SIGKILL)
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(pid, SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.001)
