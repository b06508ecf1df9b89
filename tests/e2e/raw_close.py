#!/usr/bin/env python3
"""raw_close.py — a connection closed by syscall(SYS_close, fd), as libuv (node) closes every fd.

    raw_close.py PORT FILE      (a tcpecho.py server on PORT; FILE: a file to read)

Per round: a connection that moves 300 KB each way (switched, preloaded), closed through libc's
syscall() instead of close() (SYS_close three times, then SYS_close_range); then the file opened (the kernel gives it the lowest free number:
the one just closed) and read; then a new connection on which 5 bytes go and come back. Prints
what the program saw; the run over kernel TCP and the one under the switch must print the same.
Before the library saw syscall(SYS_close): the file read said EAGAIN (the read went to the dead
connection), the new connection's send said EPIPE.
"""
import ctypes
import os
import socket
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_CLOSE = {"x86_64": 3, "aarch64": 57}[os.uname().machine]
SYS_CLOSE_RANGE = 436  # the same on every architecture


def round_trip(s, data):
    s.sendall(data)
    got = bytearray()
    while len(got) < len(data):
        d = s.recv(1 << 16)
        if not d:
            break
        got += d
    return bytes(got) == data


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    print("# pid %d" % os.getpid(), flush=True)
    for rnd in range(4):
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        ok = round_trip(s, b"a" * 150000) and round_trip(s, b"b" * 150000)
        fd = s.detach()
        if rnd < 3:
            r = libc.syscall(ctypes.c_long(SYS_CLOSE), ctypes.c_long(fd))
        else:  # the last round by close_range(fd, fd, 0)
            r = libc.syscall(ctypes.c_long(SYS_CLOSE_RANGE), ctypes.c_long(fd), ctypes.c_long(fd),
                             ctypes.c_long(0))
        print("round %d: echo %s, raw close -> %d" % (rnd, ok, r))
        f = os.open(path, os.O_RDONLY)
        try:
            print("round %d: file on the number just closed: %s, read %r" % (
                rnd, f == fd, os.read(f, 100)))
        except OSError as e:
            print("round %d: file read -> %s" % (rnd, os.strerror(e.errno)))
        os.close(f)
        t = socket.create_connection(("127.0.0.1", port), timeout=20)
        try:
            print("round %d: new connection: echo %s" % (rnd, round_trip(t, b"hello")))
        except OSError as e:
            print("round %d: new connection -> %s" % (rnd, os.strerror(e.errno)))
        t.close()


if __name__ == "__main__":
    main()
