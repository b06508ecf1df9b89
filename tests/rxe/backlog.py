#!/usr/bin/env python3
# tests/rxe/backlog.py — a receiver that falls behind by many transfers at once: the client
# sends all its writes while the server, connected, sleeps; then the server reads them all.
#
#   backlog.py server ADDR DIR SECS       listen on an ephemeral port of ADDR, write DIR/port
#                                         once listening, take one connection, sleep SECS, read
#                                         to EOF, answer with the SHA-256 of what came
#   backlog.py client ADDR PORT COUNT SIZE SEED
#                                         send COUNT writes of SIZE bytes of a seeded stream,
#                                         shut down, and compare the server's digest with ours
# Exit 0 when the digests matched; 1 otherwise.
import hashlib
import os
import random
import socket
import sys
import time


def server(addr, d, secs):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind((addr, 0))
    lst.listen(1)
    tmp = os.path.join(d, "port.tmp")
    with open(tmp, "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(tmp, os.path.join(d, "port"))
    conn, _ = lst.accept()
    time.sleep(secs)
    h = hashlib.sha256()
    n = 0
    while True:
        b = conn.recv(1 << 17)
        if not b:
            break
        h.update(b)
        n += len(b)
    conn.sendall(h.hexdigest().encode() + b"\n")
    conn.close()
    print("backlog: server read %d bytes" % n)
    return 0


def client(addr, port, count, size, seed):
    rng = random.Random(seed)
    h = hashlib.sha256()
    s = socket.create_connection((addr, port))
    for _ in range(count):
        chunk = rng.randbytes(size)
        s.sendall(chunk)
        h.update(chunk)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(128)
        if not b:
            break
        got += b
    s.close()
    if got.decode().strip() != h.hexdigest():
        print("backlog: client digest mismatch: server %r, ours %s" % (got, h.hexdigest()))
        return 1
    print("backlog: client ok bytes=%d sha256=%s" % (count * size, h.hexdigest()))
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "server":
        return server(argv[2], argv[3], float(argv[4]))
    if len(argv) == 7 and argv[1] == "client":
        return client(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6]))
    sys.stderr.write(__doc__ if __doc__ else "usage: backlog.py server|client ...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
