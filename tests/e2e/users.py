#!/usr/bin/env python3
"""users.py — the server and the long-lived client of t_shape_users.sh (shapes.py's protocol:
an 8-byte length and the bytes; the reply is the bytes reversed).

  users.py server PORTFILE CONNS [HOST]
                                     listen on HOST (default 127.0.0.1; 0.0.0.0: the wildcard),
                                     accept CONNS connections, serve each in its own thread
                                     (a connection the peer broke is reported, not fatal:
                                     "# conn reset"), exit 0 when all have ended
  users.py holder PORT SIZE HOLDFILE two exchanges, print "holder port=P" (its own port), wait
                                     for HOLDFILE to exist, two more exchanges, close; "holder
                                     ok", or exit 1 at a wrong byte

Every process prints "# pid P role" so that the test can pick its stats line.
"""
import os
import socket
import struct
import sys
import threading
import time

from shapes import publish, recv_exact, say


def serve(c, lock, ended):
    try:
        while True:
            try:
                head = recv_exact(c, 8)
            except EOFError:
                break
            data = recv_exact(c, struct.unpack("!Q", head)[0])
            c.sendall(data[::-1])
        what = "ok"
    except (OSError, EOFError) as e:
        what = "reset (%s)" % e
    c.close()
    with lock:
        ended.append(what)
    print("# conn %s" % what, flush=True)


def server(portfile, conns, host="127.0.0.1"):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((host, 0))
    lst.listen(64)
    say("listener")
    publish(portfile, lst.getsockname()[1])
    lock, ended, threads = threading.Lock(), [], []
    for _ in range(conns):
        c, _ = lst.accept()
        t = threading.Thread(target=serve, args=(c, lock, ended))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return 0


def exchange(s, data):
    s.sendall(struct.pack("!Q", len(data)) + data)
    return recv_exact(s, len(data)) == data[::-1]


def holder(port, size, holdfile):
    say("holder")
    data = os.urandom(size)
    s = socket.create_connection(("127.0.0.1", port))
    if not (exchange(s, data) and exchange(s, data)):
        print("holder: WRONG reply", flush=True)
        return 1
    print("holder port=%d" % s.getsockname()[1], flush=True)
    end = time.monotonic() + 60
    while not os.path.exists(holdfile):
        if time.monotonic() > end:
            print("holder: %s never came" % holdfile, flush=True)
            return 1
        time.sleep(0.01)
    if not (exchange(s, data) and exchange(s, data)):
        print("holder: WRONG reply", flush=True)
        return 1
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        print("holder: bytes after the replies", flush=True)
        return 1
    s.close()
    print("holder ok", flush=True)
    return 0


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "server":
        sys.exit(server(a[2], int(a[3]), *a[4:5]))
    sys.exit(holder(int(a[2]), int(a[3]), a[4]))
