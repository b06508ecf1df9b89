#!/usr/bin/env python3
"""edge_bell.py — readiness after a late doorbell (t_edge_bell.sh).

  edge_bell.py MSGS WAIT

One connection between a parent (accepting, the reader) and a forked child (connecting, the
writer). Two request/reply exchanges first (so that under the switch it is switched), then the
child sends MSGS messages of 100 bytes at random moments (0-1 ms apart) and closes. The parent
reads as wrk does: its socket nonblocking, it waits (WAIT: select, poll or epoll), then receives
until EAGAIN, and after an EAGAIN looks once more a moment later (FIONREAD) and goes on
receiving, without waiting, if bytes came meanwhile. Every wait that says readable must be
followed by a receive that returns data or the end: a first receive that says EAGAIN is counted.
Prints "# pid P" for both processes, then "readable-then-EAGAIN K waits W bytes B sha256 H".
Exit 1 on a wrong byte.
"""
import fcntl
import hashlib
import os
import random
import select
import socket
import struct
import sys
import termios
import time


def waiter(s, how):
    if how == "select":
        return lambda: select.select([s], [], [], 10)
    if how == "poll":
        p = select.poll()
        p.register(s, select.POLLIN)
        return lambda: p.poll(10000)
    e = select.epoll()
    e.register(s.fileno(), select.EPOLLIN)
    return lambda: e.poll(10)


def queued(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def writer(port, msgs):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(2):
        c.sendall(b"request")
        if c.recv(10) != b"ok":
            os._exit(1)
    rnd = random.Random(7)
    for i in range(msgs):
        c.sendall(bytes([i % 251]) * 100)
        time.sleep(rnd.random() / 1000)
    c.close()
    os._exit(0)


def main():
    msgs, how = int(sys.argv[1]), sys.argv[2]
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    print("# pid %d" % os.getpid(), flush=True)
    pid = os.fork()
    if pid == 0:
        print("# pid %d" % os.getpid(), flush=True)
        writer(lst.getsockname()[1], msgs)
    s, _ = lst.accept()
    for _ in range(2):
        if s.recv(10) != b"request":
            print("WRONG request", flush=True)
            return 1
        s.sendall(b"ok")
    s.setblocking(False)
    wait = waiter(s, how)
    h = hashlib.sha256()
    got = lies = waits = 0
    end = False
    while not end:
        wait()
        waits += 1
        first = True
        while True:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                if first:
                    lies += 1
                time.sleep(0.0002)
                if queued(s) > 0:
                    first = False
                    continue
                break
            first = False
            if not d:
                end = True
                break
            for k in range(len(d)):
                if d[k] != ((got + k) // 100) % 251:
                    print("WRONG byte at %d" % (got + k), flush=True)
                    return 1
            h.update(d)
            got += len(d)
    _, st = os.waitpid(pid, 0)
    print("readable-then-EAGAIN %d waits %d bytes %d sha256 %s" % (lies, waits, got, h.hexdigest()),
          flush=True)
    return 0 if st == 0 and got == msgs * 100 else 1


if __name__ == "__main__":
    sys.exit(main())
