#!/usr/bin/env python3
"""edge_rcvlowat.py N WHO [MODE] — SO_RCVLOWAT around the switch-over (t_edge_rcvlowat.sh).

One process forks: the child listens on 127.0.0.1 and serves N connections one after the other,
the parent connects N times. Each connection makes 20 exchanges of a 100-byte request and a
100-byte reply, every receive waiting with a 5 s timeout (a hang prints "timeout", never blocks
the test). WHO sets SO_RCVLOWAT=100 before the first exchange: server, client or both; "late":
both set 100 after the fifth exchange (after a switch under the suite's default policy). Each
side reads SO_RCVLOWAT back after the last exchange and prints it: the value the application set,
as the kernel keeps it. Output: one line per connection and side, "# pid P" per process.
MODE "timeout" (the default): Python's settimeout, which makes the socket nonblocking and waits in
poll(); "block": the socket stays blocking and the kernel's own SO_RCVTIMEO (5 s) bounds each
receive, so a receive sleeps in the receive call itself, where a low-water mark above the peer's
16-byte MARK could keep it asleep through a switch-over (a timeout is reported, as EAGAIN).
"""
import os
import socket
import sys

import struct

N, WHO = int(sys.argv[1]), sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "timeout"
K, SIZE, LOWAT = 20, 100, 100


def recvn(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def lowat(c, side, k):
    if (WHO in (side, "both") and k == 0) or (WHO == "late" and k == 5):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, LOWAT)


def talk(c, side, i):
    if MODE == "block":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 5, 0))
    else:
        c.settimeout(5)
    try:
        for k in range(K):
            lowat(c, side, k)
            if side == "client":
                c.sendall(bytes([k]) * SIZE)
                got = recvn(c, SIZE)
            else:
                got = recvn(c, SIZE)
                c.sendall(got)
            if got != bytes([k]) * SIZE:
                return "conn %d %s: wrong bytes at exchange %d" % (i, side, k)
        v = c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        return "conn %d %s: %d exchanges, SO_RCVLOWAT %d" % (i, side, K, v)
    except socket.timeout:
        return "conn %d %s: timeout at exchange %d" % (i, side, k)
    except (EOFError, OSError) as e:
        return "conn %d %s: %s at exchange %d" % (i, side, e, k)


lsn = socket.socket()
lsn.bind(("127.0.0.1", 0))
port = lsn.getsockname()[1]
rd, wr = os.pipe()
pid = os.fork()
if pid == 0:
    lsn.listen(8)  # (the serving process listens: a listener of its own)
    os.write(wr, b"l")
    out = []
    for i in range(N):
        c, _ = lsn.accept()
        out.append(talk(c, "server", i))
        c.close()
    print("# pid %d" % os.getpid())
    print("\n".join(out), flush=True)
    os._exit(0)
lsn.close()
os.read(rd, 1)  # connect only once the child listens
out = []
for i in range(N):
    c = socket.create_connection(("127.0.0.1", port))
    out.append(talk(c, "client", i))
    c.close()
_, st = os.waitpid(pid, 0)
print("# pid %d" % os.getpid())
print("\n".join(out), flush=True)
sys.exit(0 if st == 0 else 1)
