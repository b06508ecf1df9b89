#!/usr/bin/env python3
"""edge_ready.py — readiness around the switch-over (t_edge_ready.sh).

  edge_ready.py N SIDE WAIT

N connections in turn between a parent (accepting) and a forked child (connecting). SIDE says who
waits for the first bytes: "server" (the client sends a request first, the server's accepted
socket is nonblocking and waits for it), "client" (the server sends a greeting first, the
client's socket is nonblocking and waits for it). WAIT: select, poll, epoll, or mix (connection i
waits with select, poll and epoll in turn). The pair meets on 127.0.0.1, or on $E2E_ADDR
(tests/rxe: the RDMA device's address). Whenever the wait
says readable, the receive must return data (EOF or an error would be wrong here too): a
receive that says EAGAIN is counted. Prints "# pid P" for the parent and the child, then
"readable-then-EAGAIN K of N" for the waiting side. Exit 1 on a wrong byte.
"""
import os
import select
import socket
import sys


ADDR = os.environ.get("E2E_ADDR") or "127.0.0.1"
WAITS = ("select", "poll", "epoll")


def wait_readable(s, how):
    if how == "select":
        select.select([s], [], [], 10)
    elif how == "poll":
        p = select.poll()
        p.register(s, select.POLLIN)
        p.poll(10000)
    else:
        e = select.epoll()
        e.register(s.fileno(), select.EPOLLIN)
        e.poll(10)
        e.close()


def get(s, how, want):
    """Wait, receive; returns (bytes, lies): lies counts waits that said readable for nothing."""
    lies = 0
    while True:
        wait_readable(s, how)
        try:
            d = s.recv(len(want))
        except BlockingIOError:
            lies += 1
            continue
        if d != want:
            print("WRONG bytes %r (wanted %r)" % (d, want), flush=True)
            sys.exit(1)
        return lies


def main():
    n, side, how = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    lst = socket.socket()
    lst.bind((ADDR, 0))
    lst.listen(64)
    port = lst.getsockname()[1]
    print("# pid %d" % os.getpid(), flush=True)
    pid = os.fork()
    if pid == 0:
        print("# pid %d" % os.getpid(), flush=True)
        lies = 0
        for i in range(n):
            c = socket.create_connection((ADDR, port))
            if side == "server":
                c.sendall(b"request")
                if c.recv(10) != b"ok":
                    os._exit(1)
            else:
                c.setblocking(False)
                lies += get(c, WAITS[i % 3] if how == "mix" else how, b"greeting")
                c.setblocking(True)
                c.sendall(b"ok")
            c.close()
        if side == "client":
            print("readable-then-EAGAIN %d of %d" % (lies, n), flush=True)
        os._exit(0)
    lies = 0
    for i in range(n):
        s, _ = lst.accept()
        if side == "server":
            s.setblocking(False)
            lies += get(s, WAITS[i % 3] if how == "mix" else how, b"request")
            s.setblocking(True)
            s.sendall(b"ok")
        else:
            s.sendall(b"greeting")
            if s.recv(10) != b"ok":
                return 1
        s.close()
    _, st = os.waitpid(pid, 0)
    if side == "server":
        print("readable-then-EAGAIN %d of %d" % (lies, n), flush=True)
    return 0 if st == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
