#!/usr/bin/env python3
"""edge_bufsize.py — socket buffer sizes the application set bound what a connection holds
(t_edge_bufsize.sh).

  edge_bufsize.py CASE [ADDR]

ADDR: where the server listens and the client connects (default 127.0.0.1; the verbs test
passes the rxe device's address, tests/rxe/t_switch_verbs_bufsize.sh).

Both ends set SO_SNDBUF / SO_RCVBUF to 4 KiB (the server on its listener, as the kernel hands
the listener's sizes to what it accepts). The client (a forked child, the connecting side)
sends; the server (the parent) reads.
  close-send, close-sendfile: the client sends 256 KiB (8 KiB sends; or sendfile from a file);
      the server reads 1 KiB and closes: prints how the sending ended.
  fill: the client sends nonblocking 1 KiB pieces until EAGAIN while the server does not read:
      prints "fill: accepted N KiB before EAGAIN" rounded down to 16 KiB steps ("<16", "16-31"...).
  slow: the client sends 1 MiB; the server reads it slowly (4 KiB reads, 1 ms apart): prints
      whether every byte arrived in order.
Prints "# pid P" for both processes first.
"""
import errno
import os
import socket
import sys
import tempfile
import time

SZ = 4096


def pattern(n):
    """bytes((i * 7 + i // 251) & 255 for i in range(n)), made by slices: a generator over a
    million items takes seconds in the emulated guest of tests/rxe."""
    ident = bytes(range(256))
    base = bytes(ident[(7 * i) & 255] for i in range(256)) * 3  # 7i & 255, periodic in 256
    out = bytearray()
    for lo in range(0, n, 251):
        b = (lo // 251) & 255
        table = ident[b:] + ident[:b]  # x -> (x + b) & 255
        out += base[lo & 255:(lo & 255) + min(251, n - lo)].translate(table)
    return bytes(out)


def client(addr, port, case, data):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SZ)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SZ)
    c.connect((addr, port))
    c.sendall(b"h")  # the first byte: the connection switches here (not measured)
    sent = 0
    try:
        if case == "close-sendfile":
            with tempfile.TemporaryFile() as f:
                f.write(data)
                f.flush()
                while sent < len(data):
                    sent += os.sendfile(c.fileno(), f.fileno(), sent, len(data) - sent)
        elif case == "fill":
            c.setblocking(False)
            try:
                while True:
                    sent += c.send(b"f" * 1024)
            except BlockingIOError:
                pass
            k = sent // 1024 // 16 * 16
            print("fill: accepted %s KiB before EAGAIN" % ("<16" if k == 0 else "%d-%d" % (k, k + 15)),
                  flush=True)
            return
        else:
            while sent < len(data):
                sent += c.send(data[sent:sent + 8192])
        print("%s: all %d sent" % (case, sent), flush=True)
    except OSError as e:
        print("%s: error %s" % (case, errno.errorcode[e.errno]), flush=True)


def main():
    case = sys.argv[1]
    addr = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SZ)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SZ)
    lst.bind((addr, 0))
    lst.listen(1)
    data = pattern(1 << 20 if case == "slow" else 256 * 1024)
    print("# pid %d" % os.getpid(), flush=True)
    pid = os.fork()
    if pid == 0:
        print("# pid %d" % os.getpid(), flush=True)
        client(addr, lst.getsockname()[1], case, data)
        os._exit(0)
    s, _ = lst.accept()
    assert s.recv(1) == b"h"
    if case.startswith("close"):
        got = b""
        while len(got) < 1024:
            got += s.recv(1024 - len(got))
        time.sleep(0.2)
        s.close()
    elif case == "fill":
        os.waitpid(pid, 0)
        s.close()
        return 0
    else:
        got = bytearray()
        while True:
            d = s.recv(4096)
            if not d:
                break
            got += d
            time.sleep(0.001)
        print("slow: %s" % ("every byte, in order" if bytes(got) == data else
                            "WRONG: %d bytes" % len(got)), flush=True)
    os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
