#!/usr/bin/env python3
"""edge_cork.py — what a reader sees of a sender that corks its socket (t_edge_cork.sh).

    edge_cork.py CASE WAIT

The parent listens, forks the reader (the child, which connects), accepts, and exchanges a byte
each way three times (the connection switches, preloaded); 100 ms later, the reader asleep in
WAIT (block: a blocking recv; poll; epoll_et: epoll with EPOLLET, reads until EAGAIN), the parent
sets TCP_CORK and sends, by CASE:
  uncork  100 bytes, uncorks 300 ms later;
  never   100 bytes, never uncorks (TCP sends them when its 200 ms cork timer ends);
  big     64 KiB in 1 KiB sends, never uncorks;
  close   100 bytes, then closes at once;
  pieces  100 bytes, 1000 bytes 20 ms later, then uncorks (a response's header and body): TCP
          sends them as one segment, and its reader reads them in one call.
The reader reports what came within 1.5 s (bytes, whether they are the bytes sent, end of file
for close; for pieces the size of each read) and the parent prints that line: the run over
kernel TCP and the one under the switch must print the same. Switched, a corked send holds its
doorbell until the uncork: a hold that never ended would leave this reader asleep, and one
that did not hold would wake it for the first piece alone (reads 100, 1000).
"""
import hashlib
import os
import select
import socket
import struct
import sys
import time

SIZES = {"uncork": 100, "never": 100, "big": 65536, "close": 100, "pieces": 1100}


def payload(n):
    return bytes((i * 31 + 7) & 255 for i in range(n))


def reader(port, case, wait, wr):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(3):
        c.recv(1)
        c.sendall(b"r")
    want = SIZES[case]
    got = bytearray()
    reads = []
    eof = False
    end = time.monotonic() + 1.5
    if wait == "epoll_et":
        c.setblocking(False)
        ep = select.epoll()
        ep.register(c.fileno(), select.EPOLLIN | select.EPOLLET)
    while time.monotonic() < end and not eof and (len(got) < want or case == "close"):
        left = end - time.monotonic()
        if wait == "block":
            # a blocking socket (settimeout would make it nonblocking and poll): SO_RCVTIMEO
            us = max(int(left * 1e6), 1000)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                         struct.pack("ll", us // 1000000, us % 1000000))
            try:
                d = c.recv(65536)
            except (BlockingIOError, socket.timeout):
                break
            got += d
            reads.append(len(d))
            eof = not d
        elif wait == "poll":
            p = select.poll()
            p.register(c.fileno(), select.POLLIN)
            if not p.poll(max(int(left * 1000), 1)):
                break
            d = c.recv(65536)
            got += d
            reads.append(len(d))
            eof = not d
        else:
            if not ep.poll(max(left, 0.001)):
                break
            while True:
                try:
                    d = c.recv(65536)
                except BlockingIOError:
                    break
                got += d
                reads.append(len(d))
                if not d:
                    eof = True
                    break
    line = "%s %s: %d of %d bytes within 1.5 s, %s%s" % (
        case, wait, len(got), want,
        "the bytes sent" if bytes(got) == payload(want) else "NOT the bytes sent",
        ", then EOF" if eof else "")
    if case == "pieces":
        line += ", reads %s" % "+".join(str(n) for n in reads if n)
    os.write(wr, line.encode())
    os._exit(0)


def main():
    case, wait = sys.argv[1], sys.argv[2]
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        reader(lst.getsockname()[1], case, wait, wr)
    os.close(wr)
    print("# pid %d" % os.getpid(), flush=True)
    s, _ = lst.accept()
    for _ in range(3):
        s.sendall(b"s")
        s.recv(1)
    time.sleep(0.1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    data = payload(SIZES[case])
    if case == "big":
        for i in range(0, len(data), 1024):
            s.sendall(data[i:i + 1024])
    elif case == "pieces":
        s.sendall(data[:100])
        time.sleep(0.02)
        s.sendall(data[100:])
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    else:
        s.sendall(data)
    if case == "uncork":
        time.sleep(0.3)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    if case == "close":
        s.close()
    line = os.read(rd, 4096).decode()
    os.waitpid(pid, 0)
    print(line)
    print("# sha %s" % hashlib.sha256(data).hexdigest()[:12])


if __name__ == "__main__":
    main()
