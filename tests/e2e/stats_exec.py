#!/usr/bin/env python3
# tests/e2e/stats_exec.py — an image that counted a TCP connection, then execs (same pid): where
# do its counts go? (t_stats, SANSWITCH_STATS=1)
#
#   stats_exec.py CASE
#
# Prints its pid, makes one connection to itself over 127.0.0.1 (listen, connect, accept, 5 bytes
# each way, every fd closed), then, by CASE:
#   sh       execs /bin/sh -c 'exit 0' (a program that never opens a TCP socket)
#   again    execs this script again, case "none": the next image makes its own connection
#   none     exits
#   clean    execs /bin/sh -c 'exit 0' without LD_PRELOAD: the next program runs no library
#   failed   an exec without LD_PRELOAD that fails, then exits
#   failed+  the same, then makes one more connection, then exits
# Exits 1 on anything unexpected.
import os
import socket
import sys


def conn():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    c = socket.create_connection(lst.getsockname())
    a, _ = lst.accept()
    for src, dst in ((a, c), (c, a)):
        src.sendall(b"hello")
        got = b""
        while len(got) < 5:
            chunk = dst.recv(5 - len(got))
            if not chunk:
                sys.exit("stats_exec: early EOF")
            got += chunk
        if got != b"hello":
            sys.exit("stats_exec: got %r" % got)
    a.close()
    c.close()
    lst.close()


def without_preload():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def main():
    case = sys.argv[1]
    print(os.getpid())
    sys.stdout.flush()
    conn()
    if case == "sh":
        os.execv("/bin/sh", ["sh", "-c", "exit 0"])
    elif case == "again":
        os.execv(sys.executable, [sys.executable, sys.argv[0], "none"])
    elif case == "clean":
        os.execve("/bin/sh", ["sh", "-c", "exit 0"], without_preload())
    elif case in ("failed", "failed+"):
        try:
            os.execve("/nonexistent/stats_exec", ["x"], without_preload())
        except OSError:
            pass
        else:
            sys.exit("stats_exec: the exec did not fail")
        if case == "failed+":
            conn()
    elif case != "none":
        sys.exit("stats_exec: unknown case " + case)


if __name__ == "__main__":
    main()
