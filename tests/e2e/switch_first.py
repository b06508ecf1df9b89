#!/usr/bin/env python3
# tests/e2e/switch_first.py — a server that speaks first: it accepts, sends a greeting of known
# bytes before it has read anything, then echoes until EOF. The client reads the whole greeting
# first, then sends a file and checks the echo.
#
#   switch_first.py server PORTFILE GREETING_BYTES
#   switch_first.py client PORT GREETING_BYTES DATAFILE
#
# The server writes its port (and "\n") to PORTFILE atomically once listening, serves one
# connection (the listener stays open meanwhile), prints "first: pid=P server echoed bytes=N" and
# exits 0 once the client has closed. The client prints "first: pid=P greeting ok bytes=N" and
# "first: pid=P echo ok bytes=N sha256=HEX". Both exit 1 on any mismatch (printing where the
# bytes differ), 2 on an error.
import hashlib
import os
import random
import socket
import sys
import threading

TIMEOUT = 20.0


def greeting(n):
    """The greeting: seeded pseudo-random bytes, the same at both ends."""
    return random.Random(0x5EED).randbytes(n)


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def mismatch(what, got, want):
    i = first_diff(got, want)
    print("first: %s: MISMATCH: got %d bytes, want %d; first difference at offset %d"
          " (got %r, want %r)" % (what, len(got), len(want), i, got[i:i + 16], want[i:i + 16]))
    sys.stdout.flush()
    sys.exit(1)


def server(portfile, n):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(tmp, portfile)
    conn, _ = lst.accept()
    # The listener stays open while the connection runs, like any server's: the switch's side
    # channel, through which the client proposes the upgrade, lives as long as the listener.
    conn.settimeout(TIMEOUT)
    # Speak first: the whole greeting goes out before a single byte is read.
    conn.sendall(greeting(n))
    total = 0
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        conn.sendall(data)
        total += len(data)
    conn.shutdown(socket.SHUT_WR)
    conn.close()
    lst.close()
    print("first: pid=%d server echoed bytes=%d" % (os.getpid(), total))


def client(port, n, path):
    data = open(path, "rb").read()
    # No timeout on the socket until the greeting is in: the first data call is the read.
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(TIMEOUT)
    want = greeting(n)
    got = recv_exact(s, n)
    if got != want:
        mismatch("greeting", got, want)
    print("first: pid=%d greeting ok bytes=%d" % (os.getpid(), n))
    sys.stdout.flush()

    err = []

    def sender():
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except Exception as e:  # reported by the main thread
            err.append(e)

    t = threading.Thread(target=sender)
    t.start()
    buf = bytearray()
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    t.join()
    s.close()
    if err:
        raise err[0]
    if bytes(buf) != data:
        mismatch("echo", bytes(buf), data)
    print("first: pid=%d echo ok bytes=%d sha256=%s"
          % (os.getpid(), len(buf), hashlib.sha256(buf).hexdigest()))


def main():
    try:
        if sys.argv[1] == "server":
            server(sys.argv[2], int(sys.argv[3]))
        else:
            client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    except (OSError, ValueError, IndexError) as e:
        print("first: pid=%d %s: error: %r" % (os.getpid(), sys.argv[1:2], e))
        sys.exit(2)


if __name__ == "__main__":
    main()
