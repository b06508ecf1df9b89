#!/usr/bin/env python3
# tests/e2e/sockx.py — socket exchanges the switch must leave untouched (UDP, UNIX), plus TCP.
#
#   sockx.py KIND...     KIND: udp4 udp6 unix-stream unix-abstract unix-dgram unix-seqpacket
#                              socketpair-stream socketpair-dgram tcp4 tcp6
#
# Each exchange runs both ends in this process (a thread echoes), moves seeded pseudo-random bytes
# through every send/recv flavour Python offers and checks every byte that comes back. Prints
# "sockx: KIND ok fds=A,B bytes=N sha256=…" per kind; exits 1 on any mismatch, 2 on an error.
import hashlib
import os
import random
import select
import socket
import sys
import tempfile
import threading
import time
import zlib

TIMEOUT = 20.0


def listen_portfile(portfile, backlog=1):
    """A TCP listener on 127.0.0.1 port 0, its port written to portfile (whole, by a rename)."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(backlog)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    return lst


def unix_inodes():
    """Inodes of every AF_UNIX socket in our network namespace (tells a switched fd's
    notification socket from a TCP socket)."""
    out = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 7:
                out.add(parts[6])
    return out


def ping_until_switched(c, first):
    """Ping-pong one byte until both ends see their fd number swapped (switched: the
    notification socket took it, so its /proc/self/fd link changed); each byte says whether its
    sender has. False if the peer closed or it did not switch."""
    def link():
        return os.readlink("/proc/self/fd/%d" % c.fileno())

    before = link()
    for _ in range(2000):
        mine = b"1" if link() != before else b"0"
        if first:
            c.sendall(mine)
            got = c.recv(1)
        else:
            got = c.recv(1)
            c.sendall(mine)
        if not got:
            return False
        if mine == b"1" and got == b"1":
            return True
        time.sleep(0.002)
    return False


def payloads(seed, count, maxlen):
    rnd = random.Random(seed)
    for _ in range(count):
        n = rnd.randint(1, maxlen)
        yield rnd.randbytes(n)


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise RuntimeError("EOF after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


SLEEPING = {"7", "271"}  # poll, ppoll (x86_64)


def asleep(tid, secs=10.0):
    """Wait until thread tid sleeps in poll/ppoll; False if it never does."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            with open("/proc/self/task/%d/syscall" % tid) as f:
                if f.read().split()[0] in SLEEPING:
                    return True
        except (OSError, IndexError):
            pass
        time.sleep(0.0005)
    return False


class RecvThread(threading.Thread):
    """Receives on s until n bytes came (or EOF, or an error: self.err): recv(bufsize, flags)
    in a loop, each preceded by poll() for POLLIN when poll_first (an application that waits in
    poll, then reads) or blocking in recv itself. self.calls lists what each recv returned;
    self.tid (set before self.ready) is for asleep()."""

    def __init__(self, s, n, bufsize, flags=0, poll_first=False):
        super().__init__(daemon=True)
        self.s, self.n, self.bufsize, self.flags = s, n, bufsize, flags
        self.poll_first = poll_first
        self.data = bytearray()
        self.calls = []
        self.err = None
        self.tid = None
        self.ready = threading.Event()

    def run(self):
        self.tid = threading.get_native_id()
        self.ready.set()
        p = select.poll() if self.poll_first else None
        if p:
            p.register(self.s, select.POLLIN)
        try:
            while len(self.data) < self.n:
                if p:
                    p.poll()
                c = self.s.recv(self.bufsize, self.flags)
                if not c:
                    break
                self.calls.append(len(c))
                self.data += c
        except OSError as e:
            self.err = e


def switched_pair():
    """A connected TCP pair on 127.0.0.1 (or $SOCKX_TCP_ADDR: tests/rxe uses the RDMA device's
    address) (a: connected, b: accepted) and its listener, with one byte each way read by the
    other end: with both ends preloaded that switches the pair (A proposes in its first data
    call, each side swaps when it reads the other's MARK)."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind((os.environ.get("SOCKX_TCP_ADDR", "127.0.0.1"), 0))
    lst.listen(8)
    a = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    a.connect(lst.getsockname())
    b, _ = lst.accept()
    a.sendall(b"w")
    if recv_exact(b, 1) != b"w":
        raise RuntimeError("warm-up byte a->b lost")
    b.sendall(b"v")
    if recv_exact(a, 1) != b"v":
        raise RuntimeError("warm-up byte b->a lost")
    return a, b, lst


def echo_dgram(srv, stop):
    """Echo every datagram back to its sender, alternating recvfrom/recvmsg and sendto/sendmsg."""
    i = 0
    while not stop.is_set():
        try:
            if i % 2:
                data, _, _, peer = srv.recvmsg(1 << 16)
            else:
                data, peer = srv.recvfrom(1 << 16)
        except socket.timeout:
            continue
        if data == b"STOP":
            return
        if i % 2:
            srv.sendmsg([data[: len(data) // 2], data[len(data) // 2:]], [], 0, peer)
        else:
            srv.sendto(data, peer)
        i += 1


def dgram_exchange(kind, srv, cli, srv_addr, count, maxlen, connected):
    stop = threading.Event()
    srv.settimeout(0.5)
    cli.settimeout(TIMEOUT)
    t = threading.Thread(target=echo_dgram, args=(srv, stop))
    t.start()
    h = hashlib.sha256()
    total = 0
    try:
        if connected:
            cli.connect(srv_addr)
        for i, p in enumerate(payloads(zlib.crc32(kind.encode()), count, maxlen)):
            if connected:
                cli.send(p) if i % 2 else cli.sendmsg([p])
            else:
                cli.sendto(p, srv_addr)
            back = cli.recv(1 << 16) if i % 2 else cli.recvmsg(1 << 16)[0]
            if back != p:
                print("sockx: %s: datagram %d differs (%d vs %d bytes)" % (kind, i, len(back), len(p)))
                sys.exit(1)
            h.update(p)
            total += len(p)
        if connected:
            cli.send(b"STOP")
        else:
            cli.sendto(b"STOP", srv_addr)
    finally:
        stop.set()
        t.join()
    return total, h.hexdigest()


def echo_stream(conn):
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)


def stream_exchange(kind, a, b, nbytes):
    """a sends nbytes (sendall/send/sendmsg mixed), b echoes, a checks the echo and the EOF."""
    a.settimeout(TIMEOUT)
    b.settimeout(TIMEOUT)
    t = threading.Thread(target=echo_stream, args=(b,))
    t.start()
    data = random.Random(nbytes).randbytes(nbytes)
    got = bytearray()
    sender_err = []

    def send_all():
        try:
            off, i = 0, 0
            rnd = random.Random(7)
            while off < len(data):
                n = rnd.randint(1, 256 * 1024)
                chunk = data[off: off + n]
                if i % 3 == 0:
                    a.sendall(chunk)
                    sent = len(chunk)
                elif i % 3 == 1:
                    sent = a.send(chunk)
                else:
                    sent = a.sendmsg([chunk[:1], chunk[1:]])
                off += sent
                i += 1
            a.shutdown(socket.SHUT_WR)
        except Exception as e:  # reported by the main thread
            sender_err.append(e)

    st = threading.Thread(target=send_all)
    st.start()
    while True:
        chunk = a.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    st.join()
    t.join()
    if sender_err:
        raise sender_err[0]
    if bytes(got) != data:
        print("sockx: %s: echoed stream differs (%d vs %d bytes)" % (kind, len(got), len(data)))
        sys.exit(1)
    return len(data), hashlib.sha256(data).hexdigest()


def listen_pair(family, kind, addr):
    """A connected (client, server-side) pair through a listener at addr; the listener is closed."""
    lst = socket.socket(family, kind)
    lst.bind(addr)
    lst.listen(1)
    cli = socket.socket(family, kind)
    cli.connect(lst.getsockname() if family != socket.AF_UNIX or addr else addr)
    srv, _ = lst.accept()
    fds = [lst.fileno(), cli.fileno(), srv.fileno()]
    lst.close()
    return cli, srv, fds


def run(kind, tmp):
    total, digest, fds, socks = run_kind(kind, tmp)
    for s in socks:
        s.close()
    print("sockx: %s ok fds=%s bytes=%d sha256=%s" % (kind, ",".join(map(str, fds)), total, digest))
    sys.stdout.flush()


def run_kind(kind, tmp):
    """Returns (bytes, digest, fds used, sockets to close)."""
    if kind in ("udp4", "udp6"):
        fam, host = (socket.AF_INET, "127.0.0.1") if kind == "udp4" else (socket.AF_INET6, "::1")
        srv = socket.socket(fam, socket.SOCK_DGRAM)
        srv.bind((host, 0))
        cli = socket.socket(fam, socket.SOCK_DGRAM)
        fds = [srv.fileno(), cli.fileno()]
        r1 = dgram_exchange(kind, srv, cli, srv.getsockname(), 300, 8000, False)
        cli2 = socket.socket(fam, socket.SOCK_DGRAM)
        fds.append(cli2.fileno())
        r2 = dgram_exchange(kind + "-connected", srv, cli2, srv.getsockname(), 300, 60000, True)
        total, digest = r1[0] + r2[0], r1[1][:32] + r2[1][:32]
    elif kind == "unix-dgram":
        sp, cp = os.path.join(tmp, "d.srv"), os.path.join(tmp, "d.cli")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        srv.bind(sp)
        cli = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        cli.bind(cp)
        fds = [srv.fileno(), cli.fileno()]
        total, digest = dgram_exchange(kind, srv, cli, sp, 300, 60000, False)
    elif kind == "socketpair-dgram":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        fds = [a.fileno(), b.fileno()]
        a.settimeout(TIMEOUT)
        h, total = hashlib.sha256(), 0
        for p in payloads(5, 300, 60000):
            a.send(p)
            if b.recv(1 << 16) != p:
                print("sockx: %s: datagram differs" % kind)
                sys.exit(1)
            h.update(p)
            total += len(p)
        digest = h.hexdigest()
    elif kind == "socketpair-stream":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds = [a.fileno(), b.fileno()]
        total, digest = stream_exchange(kind, a, b, 8 << 20)
    elif kind in ("unix-stream", "unix-seqpacket", "unix-abstract"):
        st = socket.SOCK_SEQPACKET if kind == "unix-seqpacket" else socket.SOCK_STREAM
        if kind == "unix-abstract":
            addr = "\0sanswitch-e2e-%d" % os.getpid()
        else:
            addr = os.path.join(tmp, kind)
        cli, srv, fds = listen_pair(socket.AF_UNIX, st, addr)
        if st == socket.SOCK_SEQPACKET:
            cli.settimeout(TIMEOUT)
            srv.settimeout(TIMEOUT)
            h, total = hashlib.sha256(), 0
            for p in payloads(9, 200, 30000):
                cli.sendall(p)
                if srv.recv(1 << 16) != p:
                    print("sockx: %s: record differs" % kind)
                    sys.exit(1)
                h.update(p)
                total += len(p)
            digest = h.hexdigest()
        else:
            total, digest = stream_exchange(kind, cli, srv, 8 << 20)
    elif kind in ("tcp4", "tcp6"):
        fam, host = (socket.AF_INET, "127.0.0.1") if kind == "tcp4" else (socket.AF_INET6, "::1")
        cli, srv, fds = listen_pair(fam, socket.SOCK_STREAM, (host, 0))
        total, digest = stream_exchange(kind, cli, srv, 8 << 20)
    else:
        print("sockx: unknown kind %r" % kind, file=sys.stderr)
        sys.exit(2)
    return total, digest, fds, [s for s in list(locals().values()) if isinstance(s, socket.socket)]


def main():
    if len(sys.argv) < 2:
        print(__doc__ or "usage: sockx.py KIND...", file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="sockx.") as tmp:
        for kind in sys.argv[1:]:
            run(kind, tmp)


if __name__ == "__main__":
    main()
