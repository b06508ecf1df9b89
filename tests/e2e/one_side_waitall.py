#!/usr/bin/env python3
# tests/e2e/one_side_waitall.py — a preloaded server, a plain client (run with LD_PRELOAD removed
# from its environment): the server's candidate window closes on the client's first bytes (a
# switch would have proposed before sending any), in the middle of a MSG_WAITALL receive that
# must still return everything it asked for, in order.
#
#   one_side_waitall.py           (the server; it starts the client itself)
#   one_side_waitall.py client PORT
#
# Prints "ok N bytes" and "# pid P" (the server's) and exits 0, or says what went wrong, exit 1.
import os
import socket
import subprocess
import sys
import time

PARTS = [b"0123456789", b"abcde", b"X" * 70000]


def client(port):
    s = socket.create_connection(("127.0.0.1", port))
    for p in PARTS:
        s.sendall(p)
        time.sleep(0.1)  # separate arrivals (the test holds whether or not they coalesce)
    back = s.recv(16)
    s.close()
    sys.exit(0 if back == b"ok" else 1)


def server():
    print("# pid %d" % os.getpid())
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    cli = subprocess.Popen([sys.executable, __file__, "client", str(lst.getsockname()[1])], env=env)
    c, _ = lst.accept()
    want = b"".join(PARTS)
    got = c.recv(len(want), socket.MSG_WAITALL)
    c.sendall(b"ok" if got == want else b"no")
    rc = cli.wait(30)
    c.close()
    lst.close()
    if got != want:
        print("WRONG: %d of %d bytes" % (len(got), len(want)))
        sys.exit(1)
    if rc != 0:
        print("client exited %d" % rc)
        sys.exit(1)
    print("ok %d bytes" % len(got))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "client":
        client(int(sys.argv[2]))
    server()
