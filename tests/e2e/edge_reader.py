#!/usr/bin/env python3
"""edge_reader.py — what a sender sees when its reader goes away (t_edge_reader.sh).

  edge_reader.py CASE WAIT

CASE says how the reader (a forked child, the connecting side) ends after it has read 1000
bytes: kill (SIGKILL), exit (_exit), close (close, then stays alive). The sender (the parent,
the accepting side) keeps sending 64 KiB pieces; WAIT says how: block (blocking send),
sendfile (blocking sendfile of 256 KiB from a file), poll, epoll (nonblocking send, then that
wait for POLLOUT). Prints one line: how the sending ended
("error ECONNRESET", "error EPIPE", ...) or "HANG" if it had not ended 10 s after the reader
went, and the reader's line. Also CASE "reply": the reader sends a request and closes at once;
the sender reads the request and EOF, then writes a reply twice: prints each result and the
poll flags between, as TCP shows a write to a closed peer (accepted once, then EPIPE).
"""
import errno
import os
import select
import signal
import socket
import sys
import time


def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def flags(fd):
    p = select.poll()
    p.register(fd, select.POLLIN | select.POLLOUT | select.POLLRDHUP)
    r = p.poll(0)
    ev = r[0][1] if r else 0
    out = [n for n, b in (("IN", select.POLLIN), ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
                          ("HUP", select.POLLHUP), ("RDHUP", select.POLLRDHUP)) if ev & b]
    return " ".join(out) or "-"


def main():
    case, wait = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        c = socket.create_connection(("127.0.0.1", port))
        if case == "reply":
            c.sendall(b"request")
            c.close()
            os._exit(0)
        got = 0
        while got < 1000:
            got += len(c.recv(1000 - got))
        os.write(wr, b"x")
        if case == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if case == "exit":
            os._exit(0)
        c.close()
        time.sleep(12)
        os._exit(0)
    os.close(wr)
    print("# pid %d" % os.getpid(), flush=True)
    s, _ = lst.accept()
    if case == "reply":
        req = b""
        while True:
            d = s.recv(100)
            if not d:
                break
            req += d
        out = ["request %r then EOF" % req, "flags before %s" % flags(s)]
        for i in (1, 2, 3):
            try:
                out.append("write%d %d" % (i, s.send(b"reply")))
            except OSError as e:
                out.append("write%d %s" % (i, name(e)))
            time.sleep(0.05)
            out.append("flags %s" % flags(s))
        try:
            out.append("recv %r" % s.recv(10))
        except OSError as e:
            out.append("recv %s" % name(e))
        print("; ".join(out), flush=True)
        os.waitpid(pid, 0)
        return 0
    if wait not in ("block", "sendfile"):
        s.setblocking(False)
    ep = None
    if wait == "epoll":
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLOUT)
    piece = b"z" * 65536
    if wait == "sendfile":
        # a blocking sendfile() from a file of 64 KiB pieces, from the start each time
        import tempfile
        src = tempfile.TemporaryFile()
        src.write(piece * 4)
        src.flush()
    gone = None
    result = "HANG"
    while True:
        if gone is None:
            r, _, _ = select.select([rd], [], [], 0)
            if r:
                os.read(rd, 1)
                gone = time.monotonic()
        if gone is not None and time.monotonic() - gone > 10:
            break
        try:
            if wait == "sendfile":
                os.sendfile(s.fileno(), src.fileno(), 0, 4 * len(piece))
            else:
                s.send(piece)
        except BlockingIOError:
            if wait == "poll":
                select.poll().register(s, select.POLLOUT)
                p = select.poll()
                p.register(s, select.POLLOUT)
                p.poll(200)
            elif ep is not None:
                ep.poll(0.2)
            continue
        except OSError as e:
            result = "error " + name(e)
            # a blocking send may hear of the end before we looked at the pipe: look now
            if gone is None and select.select([rd], [], [], 2)[0]:
                gone = time.monotonic()
            break
    if gone is None:
        result += " (before the reader went)"
    print("%s %s: %s" % (case, wait, result), flush=True)
    os.kill(pid, signal.SIGKILL) if case == "close" else None
    os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
