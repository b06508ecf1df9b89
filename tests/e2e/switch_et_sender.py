#!/usr/bin/env python3
# tests/e2e/switch_et_sender.py — a pure sender on a switched connection: nonblocking, EPOLLET,
# EPOLLOUT; it never reads, so its fd stays the TCP socket while its bytes go on the SAN. After each
# EAGAIN (ring full) it must get a new EPOLLOUT edge once the reader frees room. The reader, in a
# thread of the same process, starts late and checks every byte (sha256).
#
# Prints "et-sender: ok bytes=N waits=W"; exits 1 on a missing edge (10 s) or a mismatch.
import hashlib
import os
import select
import socket
import sys
import threading
import time

N = 64 << 20  # many times what the ring holds
CHUNK = os.urandom(1 << 20)

lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen()
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()
got = hashlib.sha256()
n_got = 0


def reader():
    global n_got
    time.sleep(0.5)  # let the sender fill the ring and wait for EPOLLOUT
    while n_got < N:
        b = srv.recv(1 << 20)
        if not b:
            break
        got.update(b)
        n_got += len(b)


t = threading.Thread(target=reader)
t.start()
cli.setblocking(False)
ep = select.epoll()
ep.register(cli.fileno(), select.EPOLLOUT | select.EPOLLET)
want = hashlib.sha256()
sent = waits = 0
while sent < N:
    chunk = CHUNK[: min(len(CHUNK), N - sent)]
    try:
        k = cli.send(chunk)
        want.update(chunk[:k])
        sent += k
    except BlockingIOError:
        waits += 1
        if not ep.poll(10):
            print("et-sender: no EPOLLOUT edge within 10 s after %d bytes" % sent)
            sys.stdout.flush()
            os._exit(1)
t.join()
if n_got != N or got.hexdigest() != want.hexdigest():
    print("et-sender: MISMATCH: sent %d, received %d" % (sent, n_got))
    sys.exit(1)
print("et-sender: ok bytes=%d waits=%d" % (N, waits))
