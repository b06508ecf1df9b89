#!/usr/bin/env python3
# tests/e2e/switch_et_sender.py — a pure sender on a switched connection: nonblocking, it never
# reads, so its fd stays the TCP socket while its bytes go on the SAN. It waits for room with
#
#   epoll-et   EPOLLOUT | EPOLLET: each EAGAIN (ring full) must be followed by a new edge
#   epoll-lt   level-triggered EPOLLOUT
#   poll       poll() for POLLOUT
#   select     select() on the write set
#
# and must sleep there: while the reader has not started, the ring stays full, and a wait that
# reports the fd writable anyway (the TCP socket's own readiness) makes the sender spin. Waits
# that end in EAGAIN again before the reader starts are counted; more than 3 is a busy loop.
# The reader, in a thread of the same process, starts late and checks every byte (sha256).
#
#   switch_et_sender.py [MODE...]   (default: all four, each on a new connection)
#
# Prints "et-sender: MODE ok bytes=N waits=W idle_waits=I" per mode; exits 1 on a missing wakeup
# (10 s), a busy wait or a mismatch.
import hashlib
import os
import select
import socket
import sys
import threading
import time

N = 64 << 20  # many times what the ring holds
CHUNK = os.urandom(1 << 20)
IDLE_MAX = 3


def fail(msg):
    print("et-sender: " + msg)
    sys.stdout.flush()
    os._exit(1)


def waiter(mode, fd):
    """A function that waits up to 10 s for fd to be writable; False on timeout."""
    if mode.startswith("epoll"):
        ep = select.epoll()
        ep.register(fd, select.EPOLLOUT | (select.EPOLLET if mode == "epoll-et" else 0))
        return lambda: bool(ep.poll(10))
    if mode == "poll":
        p = select.poll()
        p.register(fd, select.POLLOUT)
        return lambda: bool(p.poll(10000))
    if mode == "select":
        return lambda: bool(select.select([], [fd], [], 10)[1])
    fail("unknown mode " + mode)


def run(mode, lst):
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    got = hashlib.sha256()
    n_got = 0
    started = threading.Event()

    def reader():
        nonlocal n_got
        time.sleep(0.5)  # let the sender fill the ring and wait for room
        started.set()
        while n_got < N:
            b = srv.recv(1 << 20)
            if not b:
                break
            got.update(b)
            n_got += len(b)

    t = threading.Thread(target=reader)
    t.start()
    cli.setblocking(False)
    wait = waiter(mode, cli.fileno())
    want = hashlib.sha256()
    sent = waits = idle = 0
    while sent < N:
        chunk = CHUNK[: min(len(CHUNK), N - sent)]
        try:
            k = cli.send(chunk)
            want.update(chunk[:k])
            sent += k
        except BlockingIOError:
            waits += 1
            if not started.is_set():
                idle += 1
                if idle > IDLE_MAX:
                    fail("%s: busy wait: %d EAGAINs while the ring stayed full" % (mode, idle))
            if not wait():
                fail("%s: no wakeup within 10 s after %d bytes" % (mode, sent))
    t.join()
    cli.close()
    srv.close()
    if n_got != N or got.hexdigest() != want.hexdigest():
        fail("%s: MISMATCH: sent %d, received %d" % (mode, sent, n_got))
    print("et-sender: %s ok bytes=%d waits=%d idle_waits=%d" % (mode, N, waits, idle))
    sys.stdout.flush()


lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen()
for m in sys.argv[1:] or ["epoll-et", "epoll-lt", "poll", "select"]:
    run(m, lst)
