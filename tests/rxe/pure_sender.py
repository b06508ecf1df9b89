#!/usr/bin/env python3
# tests/rxe/pure_sender.py — a sender that never reads, then closes; a receiver that reads late.
#
#   pure_sender.py recv ADDR PORTFILE DELAY   listen, accept one, sleep DELAY s, read to EOF
#   pure_sender.py send ADDR PORT MODE [END]  MODE: block (sendall 4 MiB), idle (64 KiB, then
#                                             4 s with nothing queued) or
#                                             fill (nonblocking 1000-byte sends until EAGAIN,
#                                             so the outbound ring is full); END: close (the
#                                             default), exit (_exit without close), shutexit
#                                             (shutdown(SHUT_WR), then _exit without close)
#
# Both print "pure_sender: ROLE bytes=N sha256=H"; the test compares the two lines. The sender
# never reads, so the switch keeps its TCP number (no swap) and its close() must not let the
# TCP FIN overtake frames still queued for the SAN.
import hashlib
import random
import socket
import sys
import time


def pattern(n, seed=7):
    """N bytes of a stream seeded by SEED, made in C (a loop in Python that made 8 bytes a turn
    took 5 s for 4 MiB in the emulated guest)."""
    return random.Random(seed).randbytes(n)


def recv(addr, portfile, delay):
    ls = socket.socket()
    ls.bind((addr, 0))
    ls.listen(1)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    c, _ = ls.accept()
    time.sleep(delay)
    h = hashlib.sha256()
    n = 0
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    print("pure_sender: recv bytes=%d sha256=%s" % (n, h.hexdigest()), flush=True)


def send(addr, port, mode, end="close"):
    # the bytes first: made after the connect, 4 MiB once took the guest's Python 5 s, past B's
    # window for a PROPOSE (docs/protocol.md §9), and a receiver that first reads later than
    # that then keeps the connection on TCP
    data = pattern(4 << 20 if mode == "block" else 64 << 10) if mode in ("block", "idle") else b""
    s = socket.create_connection((addr, port))
    h = hashlib.sha256()
    n = 0
    if mode in ("block", "idle"):
        s.sendall(data)
        h.update(data)
        n = len(data)
        if mode == "idle":
            time.sleep(4)  # the receiver (reading after 2 s) has it all: nothing left queued
    else:
        s.setblocking(False)
        chunk = pattern(1000, seed=11)
        idle = 0
        # EAGAIN 20 times in a row, 5 ms apart: the ring is full. Bounded in time as well: a
        # switch slower than the receiver's sleep would let it drain, and the loop never end.
        until = time.monotonic() + 1.5
        while idle < 20 and time.monotonic() < until:
            try:
                k = s.send(chunk)
                h.update(chunk[:k])
                n += k
                idle = 0
            except BlockingIOError:
                idle += 1
                time.sleep(0.005)
    print("pure_sender: send bytes=%d sha256=%s" % (n, h.hexdigest()), flush=True)
    if end == "shutexit":
        s.shutdown(socket.SHUT_WR)
    if end != "close":
        import os
        os._exit(0)  # no close(): the process's end closes the connection, as a kernel would
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4], *sys.argv[5:6])
