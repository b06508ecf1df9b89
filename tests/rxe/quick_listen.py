#!/usr/bin/env python3
# tests/rxe/quick_listen.py — the client of t_switch_verbs_listen: it connects to servers
# (build/sanquick, a new process each, that take one connection) the moment it can and sends at
# once.
#
#   quick_listen.py client ADDR BYTES     one process for many servers (a new one costs seconds
#                                         in the emulated guest), told what to do on stdin, a
#                                         line each:
#       spin SEED      pick a free port of ADDR, print "port N", then connect to it again and
#                      again (refused: no one listens yet) until the kernel takes it
#       connect PORT SEED
#                      connect once, now
#     then send BYTES of a stream seeded by SEED, shut down, and compare the server's answer,
#     the CRC-32 of what it read (8 hex digits, a line), with ours: "ok connects=K" or
#     "bad ...", a line on stdout. EOF on stdin ends it (exit 0).
import errno
import random
import socket
import sys
import time
import zlib

import digest_reply


def free_port(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((addr, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connect_spinning(addr, port):
    deadline = time.monotonic() + 60
    tries = 0
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tries += 1
        try:
            s.connect((addr, port))
            return s, tries
        except OSError as e:
            s.close()
            if e.errno != errno.ECONNREFUSED or time.monotonic() > deadline:
                raise
        time.sleep(0.0005)


def exchange(s, data):
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = digest_reply.read(s)
    return got == "%08x" % zlib.crc32(data), got


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def client(addr, nbytes):
    for cmd in sys.stdin:
        w = cmd.split()
        data = random.Random(int(w[-1])).randbytes(nbytes)
        if w[0] == "spin":
            port = free_port(addr)
            say("port %d" % port)
            s, tries = connect_spinning(addr, port)
        else:
            s, tries = socket.create_connection((addr, int(w[1]))), 1
        ok, got = exchange(s, data)
        say("ok connects=%d" % tries if ok else "bad digest: server %r" % got)
    return 0


if __name__ == "__main__":
    if sys.argv[1] != "client":
        sys.exit("usage: quick_listen.py client ADDR BYTES")
    sys.exit(client(sys.argv[2], int(sys.argv[3])))
