#!/usr/bin/env python3
# tests/rxe/relisten.py — a server that closes its listener and listens again on the same port
# between connections (as iperf3 -s does between tests), and a client that streams to it.
#
#   relisten.py server ADDR DIR ROUNDS    listen on an ephemeral port of ADDR; for each round:
#                                         write DIR/ready.N (the port) once listening, take one
#                                         connection, read to EOF, answer with the SHA-256 of
#                                         what came, close it and the listener
#   relisten.py client ADDR PORT BYTES SEED
#                                         send BYTES of a seeded stream in 128 KiB writes,
#                                         shut down, and compare the server's digest with ours
# Exit 0 when every digest matched; 1 otherwise.
import hashlib
import os
import random
import socket
import sys


def server(addr, d, rounds):
    port = 0
    for n in range(rounds):
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind((addr, port))
        lst.listen(4)
        port = lst.getsockname()[1]
        tmp = os.path.join(d, "ready.%d.tmp" % n)
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, os.path.join(d, "ready.%d" % n))
        conn, _ = lst.accept()
        h = hashlib.sha256()
        while True:
            b = conn.recv(1 << 17)
            if not b:
                break
            h.update(b)
        conn.sendall(h.hexdigest().encode() + b"\n")
        conn.close()
        lst.close()
    return 0


def client(addr, port, nbytes, seed):
    rng = random.Random(seed)
    h = hashlib.sha256()
    s = socket.create_connection((addr, port))
    left = nbytes
    while left:
        chunk = rng.randbytes(min(left, 1 << 17))
        s.sendall(chunk)
        h.update(chunk)
        left -= len(chunk)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(128)
        if not b:
            break
        got += b
    s.close()
    if got.decode().strip() != h.hexdigest():
        print("relisten: digest mismatch: server %r, client %s" % (got, h.hexdigest()))
        return 1
    print("relisten: client ok bytes=%d sha256=%s" % (nbytes, h.hexdigest()))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        sys.exit(server(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
