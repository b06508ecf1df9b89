#!/usr/bin/env python3
# tests/rxe/relisten.py — a server that closes its listener and listens again on the same port
# between connections (as iperf3 -s does between tests), and a client that streams to it.
#
#   relisten.py server ADDR DIR ROUNDS [SECS]
#                                         listen on an ephemeral port of ADDR; for each round:
#                                         write DIR/ready.N (the port) once listening, take one
#                                         connection, sleep SECS (0), read to EOF, answer with
#                                         the SHA-256 of what came, close it and the listener
#   relisten.py client ADDR PORT BYTES SEED [WRITE]
#                                         send BYTES of a seeded stream in WRITE-byte writes
#                                         (128 KiB), shut down, and compare the server's digest
#                                         with ours
# (t_switch_verbs_backlog uses one round with a sleep: a reader that falls behind at once.)
# Exit 0 when every digest matched; 1 otherwise.
import hashlib
import os
import random
import socket
import sys
import time

import digest_reply


def server(addr, d, rounds, secs):
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
        time.sleep(secs)
        digest_reply.answer(conn)
        lst.close()
    return 0


def client(addr, port, nbytes, seed, write):
    rng = random.Random(seed)
    h = hashlib.sha256()
    s = socket.create_connection((addr, port))
    left = nbytes
    while left:
        chunk = rng.randbytes(min(left, write))
        s.sendall(chunk)
        h.update(chunk)
        left -= len(chunk)
    s.shutdown(socket.SHUT_WR)
    got = digest_reply.read(s)
    if got != h.hexdigest():
        print("relisten: digest mismatch: server %r, client %s" % (got, h.hexdigest()))
        return 1
    print("relisten: client ok bytes=%d sha256=%s" % (nbytes, h.hexdigest()))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        secs = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
        sys.exit(server(sys.argv[2], sys.argv[3], int(sys.argv[4]), secs))
    write = int(sys.argv[6]) if len(sys.argv) > 6 else 1 << 17
    sys.exit(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), write))
