#!/usr/bin/env python3
"""upload_eof.py — an upload that ends with a half-close (t_switch_policy.sh, "eof").

  upload_eof.py server PORTFILE CONNS     serve CONNS connections one after the other: read to
                                          end-of-file (receives of up to 64 KiB, as they come),
                                          then answer with the SHA-256 of what came, and close
  upload_eof.py client PORT CONNS SIZE CHUNK
                                          CONNS connections in turn: send SIZE seeded bytes in
                                          sends of CHUNK, shutdown(SHUT_WR), read the answer to
                                          end-of-file and check it

The client's last call on its sends is the shutdown, before it reads a byte: the shape of an
upload that half-closes to say "done" (nc -N, an HTTP/1.0 body without a length). Each process
prints "# pid P role"; the client prints "conn I ok" per connection, or exits 1.
"""
import hashlib
import os
import random
import socket
import sys


def say(role):
    print("# pid %d %s" % (os.getpid(), role), flush=True)


def server(portfile, conns):
    say("listener")
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(conns)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    for _ in range(conns):
        c, _ = ls.accept()
        h = hashlib.sha256()
        while True:
            d = c.recv(65536)
            if not d:
                break
            h.update(d)
        c.sendall(h.digest())
        c.close()
    return 0


def client(port, conns, size, chunk):
    say("client")
    for i in range(conns):
        data = random.Random(i).randbytes(size)
        s = socket.create_connection(("127.0.0.1", port))
        for off in range(0, size, chunk):
            s.sendall(data[off:off + chunk])
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            d = s.recv(64)
            if not d:
                break
            got += d
        s.close()
        if got != hashlib.sha256(data).digest():
            print("conn %d: WRONG answer (%d bytes)" % (i, len(got)), flush=True)
            return 1
        print("conn %d ok" % i, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        sys.exit(server(sys.argv[2], int(sys.argv[3])))
    sys.exit(client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
