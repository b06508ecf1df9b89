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
import os
import socket
import sys
import time


def server(portfile, pidfile):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    conn, _ = lst.accept()
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
    conn.close()
    _, status = os.waitpid(pid, 0)
    sys.exit(0 if status == 0 else 1)


def client(port, pidfile, seconds):
    s = socket.create_connection(("127.0.0.1", port))
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
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
    else:
        client(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
