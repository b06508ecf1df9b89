#!/usr/bin/env python3
"""stats_fork_child.py — a server forks a helper that never touches its connections
(t_stats_fork_child.sh), as redis forks for BGSAVE.

  stats_fork_child.py CONNS EXCHANGES

The server (this process) forks a client process that opens CONNS connections and makes
EXCHANGES exchanges of 10 bytes on each; then the server forks the helper, which sleeps 0.2 s
and _exits; then both sides make 5 more exchanges on every connection and close. Prints
"# helper pid P", then "ok" once every byte was as sent. Exit status 1 on a wrong byte.
"""
import os
import socket
import sys
import time


def client(port, n, ex):
    cs = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for _ in range(ex):
        for c in cs:
            c.sendall(b"x" * 10)
            if c.recv(10) != b"y" * 10:
                os._exit(1)
    time.sleep(0.5)  # the server forks its helper meanwhile
    for _ in range(5):
        for c in cs:
            c.sendall(b"z" * 10)
            if c.recv(10) != b"w" * 10:
                os._exit(1)
    for c in cs:
        c.close()
    os._exit(0)


def main():
    n, ex = int(sys.argv[1]), int(sys.argv[2])
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    pid = os.fork()
    if pid == 0:
        client(lst.getsockname()[1], n, ex)
    ss = [lst.accept()[0] for _ in range(n)]
    for _ in range(ex):
        for s in ss:
            if s.recv(10) != b"x" * 10:
                return 1
            s.sendall(b"y" * 10)
    helper = os.fork()
    if helper == 0:
        time.sleep(0.2)
        os._exit(0)
    print("# helper pid %d" % helper, flush=True)
    os.waitpid(helper, 0)
    for _ in range(5):
        for s in ss:
            if s.recv(10) != b"z" * 10:
                return 1
            s.sendall(b"w" * 10)
    for s in ss:
        if s.recv(10) != b"":
            return 1
        s.close()
    _, st = os.waitpid(pid, 0)
    if st != 0:
        return 1
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
