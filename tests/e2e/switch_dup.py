#!/usr/bin/env python3
# tests/e2e/switch_dup.py — dup() of a connection that has committed to the switch but not yet
# read the peer's MARK: the second number must read the peer's bytes (never its MARK) and the
# connection must go on both ways. Prints "dup: ok ..."; exits 1 on a mismatch.
import hashlib
import os
import socket
import sys

lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen()
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()
cli.sendall(b"hello")  # the connecting side commits in its first data call; nothing read yet
d = os.dup(cli.fileno())  # a second number, taken before the swap
if srv.recv(5) != b"hello":
    print("dup: MISMATCH on the first bytes")
    sys.exit(1)
want = os.urandom(300000)
srv.sendall(want)
got = b""
while len(got) < len(want):
    b = os.read(d, 65536)  # through the dup
    if not b:
        break
    got += b
if got != want:
    print("dup: MISMATCH through the dup: %d of %d bytes, sha %s" %
          (len(got), len(want), hashlib.sha256(got).hexdigest()[:16]))
    sys.exit(1)
back = os.urandom(200000)
cli.sendall(back)
n = b""
while len(n) < len(back):
    n += srv.recv(65536)
if n != back:
    print("dup: MISMATCH on the way back")
    sys.exit(1)
os.close(d)
cli.close()
srv.close()
print("dup: ok bytes=%d+%d" % (len(want), len(back)))
