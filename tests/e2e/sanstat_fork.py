#!/usr/bin/env python3
# tests/e2e/sanstat_fork.py — a forking server and its client, for t_sanstat.
#
#   sanstat_fork.py server PORTFILE PIDFILE   accept one connection, fork; the child echoes it
#                                             until EOF (its pid in PIDFILE), the parent closes
#                                             its copy at once and waits for the child
#   sanstat_fork.py client PORT PIDFILE SECONDS
#                                             connect, wait for PIDFILE (the fork is done: the
#                                             child holds a candidate, not a connection that a
#                                             proposal refused before the fork left on TCP),
#                                             then send 4 KiB and read the echo, every 20 ms
#   sanstat_fork.py share-server PORTFILE PIDFILE
#   sanstat_fork.py share-client PORT PIDFILE SECONDS
#                                             the same, but both ends first exchange one-byte
#                                             pings until each sees its fd switched, and the
#                                             server's parent keeps its copy open (the fork
#                                             shares a switched connection, engine.md §7.1)
#                                             until the child has served it
import os
import socket
import sys
import time

from sockx import listen_portfile, ping_until_switched


def server(portfile, pidfile, share=False):
    lst = listen_portfile(portfile)
    conn, _ = lst.accept()
    if share:
        if not ping_until_switched(conn, False):
            sys.exit("the connection did not switch")
    pid = os.fork()
    if pid == 0:
        lst.close()
        with open(pidfile + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(pidfile + ".tmp", pidfile)
        while True:
            data = conn.recv(1 << 16)
            if not data:
                break
            conn.sendall(data)
        conn.close()
        os._exit(0)
    if not share:
        conn.close()
    _, status = os.waitpid(pid, 0)
    conn.close()
    sys.exit(0 if status == 0 else 1)


def client(port, pidfile, seconds, share=False):
    s = socket.create_connection(("127.0.0.1", port))
    if share:
        if not ping_until_switched(s, True):
            sys.exit("the connection did not switch")
    deadline = time.monotonic() + 10
    while not os.path.exists(pidfile):
        if time.monotonic() > deadline:
            sys.exit("the server did not fork")
        time.sleep(0.01)
    end = time.monotonic() + seconds
    block = b"x" * 4096
    while time.monotonic() < end:
        s.sendall(block)
        got = 0
        while got < len(block):
            data = s.recv(len(block) - got)
            if not data:
                sys.exit("server closed early")
            got += len(data)
        time.sleep(0.02)
    s.close()


if __name__ == "__main__":
    shared = sys.argv[1].startswith("share-")
    if sys.argv[1].endswith("server"):
        server(sys.argv[2], sys.argv[3], shared)
    else:
        client(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), shared)
