#!/usr/bin/env python3
"""shapes.py — one server shape and its client, for t_shape_*.sh.

  shapes.py server SHAPE PORTFILE CONNS     serve CONNS connections in SHAPE, then exit 0
  shapes.py client PORT CONNS SIZE REQS [CHUNK [FORK]]
                                            CONNS connections in turn: connect, REQS times send
                                            SIZE bytes (in sends of CHUNK bytes after the 8-byte
                                            length, if given) and read the reply (the bytes
                                            back, reversed), close; FORK=1: after connect(), a
                                            forked child talks and the parent closes its copy

Shapes: single (one process accepts and serves), dup (single, each connection dup()ed: read
through one number, written through the other, the first closed after the first reply), fork (the parent accepts, a forked child
serves each connection, the parent closes its copy; forkshared: the parent keeps its copy
until the child is done; forkmoved: the parent reads the first request's length before it
closes its copy; forkhelper: a forked child closes its copy and exits, the parent serves), workers (the parent listens; two forked
workers accept on the inherited listener, nginx style; the parent never accepts), reuseport
(two forked workers, each with its own SO_REUSEPORT listener on the same port; the parent
makes one first only to learn a free port, and closes it), thread (one thread accepts, a new
thread serves each connection), activated (the listener handed to an exec'd program, as systemd's
socket activation does; the parent closes its copy), inetd (the parent accepts, a forked
child puts the connection on its stdin and stdout and execs a program that serves it with
read(2) and write(2); inetdspawn: the same through subprocess.Popen(stdin=c, stdout=c), a vfork
child; inetdstdio: with C stdio, tests/tools/sanstdio), passed (an exec'd program
receives the listener over a UNIX socket, SCM_RIGHTS; the parent closes its copy), handoff
(the parent accepts each connection and hands it over SCM_RIGHTS to an exec'd program that
serves it, keeping its own copy open: such a connection must stay TCP, since the process that
would answer a proposal is not the one that reads it).
Environment: SHAPES_HOST, the address to listen on and connect to (127.0.0.1: the rxe tests
give the Soft-RoCE device's); SHAPES_WAIT, how a worker of "workers" waits for a connection:
select (the default: select() on the nonblocking listener), epoll (epoll_wait() on it) or block
(a blocking accept(); the parent ends it with SIGUSR1 once every connection is served).
Each request is a 8-byte length and the bytes; the reply is the bytes reversed; a connection is
served until the client closes it. The client prints one line per connection: "conn I ok
first_ms=T" (T: connect to the first whole reply), or exits 1 at the first wrong byte. Every
process prints "# pid P role" so that the test can pick its stats line.
"""
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HOST = os.environ.get("SHAPES_HOST", "127.0.0.1")
WAIT = os.environ.get("SHAPES_WAIT", "select")


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError("EOF after %d of %d bytes" % (len(buf), n))
        buf += d
    return bytes(buf)


def serve_one(c):
    while True:
        try:
            head = recv_exact(c, 8)
        except EOFError:
            break
        n = struct.unpack("!Q", head)[0]
        data = recv_exact(c, n)
        c.sendall(data[::-1])
    c.close()


def say_for(pid, role):
    # one write: the workers share the parent's stdout, and print() may write in two parts
    sys.stdout.flush()
    os.write(1, ("# pid %d %s\n" % (pid, role)).encode())


def say(role):
    say_for(os.getpid(), role)


def listener(port=0, reuseport=False):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuseport:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    lst.bind((HOST, port))
    lst.listen(64)
    return lst


def publish(portfile, port):
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(portfile + ".tmp", portfile)


def server(shape, portfile, conns):
    lst = listener(reuseport=shape == "reuseport")
    say("listener")
    port = lst.getsockname()[1]
    if shape != "reuseport":
        publish(portfile, port)
    if shape == "single":
        for _ in range(conns):
            c, _ = lst.accept()
            serve_one(c)
        return 0
    if shape == "dup":
        # One process; each connection dup()ed at once (bash's >&3, perl's open(STDOUT, ">&")):
        # the first request is read through the first number and its reply written through the
        # second; the first number is then closed and the rest goes through the second.
        for _ in range(conns):
            c, _ = lst.accept()
            d = c.dup()
            r = c
            while True:
                try:
                    head = recv_exact(r, 8)
                except EOFError:
                    break
                data = recv_exact(r, struct.unpack("!Q", head)[0])
                d.sendall(data[::-1])
                if r is c:
                    c.close()
                    r = d
            d.close()
        return 0
    if shape == "handoff":
        me = [sys.executable, os.path.abspath(__file__)]
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        kid = subprocess.Popen(me + ["serve-conns", str(b.fileno()), str(conns)],
                               pass_fds=[b.fileno()])
        b.close()
        for _ in range(conns):
            c, _ = lst.accept()
            socket.send_fds(a, [b"C"], [c.fileno()])
            # our copy stays open, unused, until the worker has served the connection (the
            # client's EOF waits for the last copy's close)
            if a.recv(1) != b"D":
                return 1
            c.close()
        a.close()
        return kid.wait()
    if shape in ("activated", "passed"):
        # The program that serves is exec'd: it never saw the listener made.
        me = [sys.executable, os.path.abspath(__file__)]
        if shape == "activated":
            kid = subprocess.Popen(me + ["serve-fd", str(lst.fileno()), str(conns)],
                                   pass_fds=[lst.fileno()])
        else:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            kid = subprocess.Popen(me + ["serve-recv", str(b.fileno()), str(conns)],
                                   pass_fds=[b.fileno()])
            b.close()
            socket.send_fds(a, [b"L"], [lst.fileno()])
            a.close()
        lst.close()
        return kid.wait()
    if shape == "inetdspawn":
        # inetd's shape through subprocess: Python execs the child from a vfork child whose
        # dup2() of the connection onto 0 and 1 runs in our memory, not its own fd table.
        kids = []
        for _ in range(conns):
            c, _ = lst.accept()
            kids.append(subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                          "serve-stdio"], stdin=c, stdout=c))
            c.close()
            say_for(kids[-1].pid, "worker")
        bad = 0
        for k in kids:
            bad |= k.wait()
        return 0 if not bad else 1
    if shape in ("fork", "inetd", "inetdstdio"):
        # Accept, fork a child that serves, close our copy (the classic pre-fork daemon's and
        # database's shape); each child prints its own stats line. inetd: the child puts the
        # connection on its stdin and stdout and execs the program that serves (socat's EXEC with
        # nofork too): that program never saw the connection made; it reads and writes with
        # read(2) and write(2) (serve-stdio below). inetdstdio: with C stdio
        # (tests/tools/sanstdio, $SANSTDIO), whose system calls glibc makes inside itself.
        prog = {"inetd": [sys.executable, os.path.abspath(__file__), "serve-stdio"],
                "inetdstdio": [os.environ.get("SANSTDIO", ""), "serve"]}.get(shape)
        kids = []
        for _ in range(conns):
            c, _ = lst.accept()
            # fork: the child serves once our copy is closed (a copy still open when the client
            # proposes keeps the connection on TCP, docs/protocol.md §9.8, and A proposes at
            # its second and third exchanges only: a parent descheduled between its fork and
            # its close under load left 1 connection in 30 runs on TCP). inetd's exec takes
            # longer than our close by itself.
            gr, gw = os.pipe() if not prog else (-1, -1)
            pid = os.fork()
            if pid == 0:
                lst.close()
                if gw >= 0:
                    os.close(gw)
                    os.read(gr, 1)
                    os.close(gr)
                if prog:
                    os.dup2(c.fileno(), 0)
                    os.dup2(c.fileno(), 1)
                    c.close()
                    os.execv(prog[0], prog)
                say("worker")
                try:
                    serve_one(c)
                except Exception as e:
                    print("worker: %r" % e, file=sys.stderr, flush=True)
                    os._exit(1)
                os._exit(0)
            c.close()
            if gw >= 0:
                os.close(gr)
                os.write(gw, b"c")
                os.close(gw)
            if prog:
                say_for(pid, "worker")  # (its stdout is the connection)
            kids.append(pid)
        bad = 0
        for pid in kids:
            bad |= os.waitpid(pid, 0)[1]
        return 0 if not bad else 1
    if shape in ("forkshared", "forkmoved"):
        # forkshared: the parent keeps its copy open, unused, until the child has served the
        # connection (it must stay TCP: another process holds it). forkmoved: the parent reads
        # the first request's length itself, hands it to the child over a pipe and closes its
        # copy (the child's counts miss those 8 bytes: it must stay TCP).
        bad = 0
        for _ in range(conns):
            c, _ = lst.accept()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                lst.close()
                os.close(w)
                say("worker")
                try:
                    if shape == "forkmoved":
                        n = struct.unpack("!Q", os.read(r, 8))[0]
                        c.sendall(recv_exact(c, n)[::-1])
                    serve_one(c)
                except Exception as e:
                    print("worker: %r" % e, file=sys.stderr, flush=True)
                    os._exit(1)
                os._exit(0)
            os.close(r)
            if shape == "forkmoved":
                os.write(w, recv_exact(c, 8))
                c.close()
                bad |= os.waitpid(pid, 0)[1]
            else:
                bad |= os.waitpid(pid, 0)[1]
                c.close()
            os.close(w)
        return 0 if not bad else 1
    if shape == "forkhelper":
        # Accept, fork a helper that closes its copy and exits at once (system(), a logger),
        # then serve the connection ourselves: it switches here, once the helper is gone.
        for _ in range(conns):
            c, _ = lst.accept()
            pid = os.fork()
            if pid == 0:
                c.close()
                os._exit(0)
            if os.waitpid(pid, 0)[1]:
                return 1
            serve_one(c)
        return 0
    if shape == "thread":
        for _ in range(conns):
            c, _ = lst.accept()
            t = threading.Thread(target=serve_one, args=(c,))
            t.start()
            t.join()
        return 0
    if shape in ("workers", "reuseport"):
        # The parent counts what its workers served: each writes a byte per connection.
        r, w = os.pipe()
        ready_r, ready_w = os.pipe()
        stop_r, stop_w = os.pipe()  # closed by the parent: the workers exit (and print stats)
        kids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.close(stop_w)
                say("worker")
                try:
                    mine = lst
                    if shape == "reuseport":
                        lst.close()  # else it stays in the group, taking connections
                        mine = listener(port, True)
                    if WAIT == "block":
                        # ended by the parent's SIGUSR1 once all is served (out of accept())
                        signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))
                    else:
                        mine.setblocking(False)
                    ep = None
                    if WAIT == "epoll":
                        ep = select.epoll()
                        ep.register(mine.fileno(), select.EPOLLIN)
                        ep.register(stop_r, select.EPOLLIN)
                    os.write(ready_w, b"r")
                    while True:
                        if WAIT == "block":
                            c, _ = mine.accept()
                        else:
                            if ep:
                                rd = [fd for fd, _ in ep.poll()]
                                rd = [stop_r if fd == stop_r else mine for fd in rd]
                            else:
                                rd, _, _ = select.select([mine, stop_r], [], [])
                            if stop_r in rd:
                                sys.exit(0)
                            try:
                                c, _ = mine.accept()
                            except BlockingIOError:
                                continue  # the other worker took it
                        c.setblocking(True)
                        serve_one(c)
                        os.write(w, b"x")
                except Exception as e:
                    print("worker: %r" % e, file=sys.stderr, flush=True)
                    os._exit(1)
            kids.append(pid)
        os.close(w)
        for _ in kids:
            os.read(ready_r, 1)
        if shape == "reuseport":
            lst.close()  # only the workers' listeners take connections
            publish(portfile, port)
        served = 0
        while served < conns:
            d = os.read(r, 64)
            if not d:
                break
            served += len(d)
        os.close(stop_w)
        if WAIT == "block":
            for pid in kids:
                os.kill(pid, signal.SIGUSR1)
        bad = 0
        for pid in kids:
            bad |= os.waitpid(pid, 0)[1]
        return 0 if served == conns and not bad else 1
    print("unknown shape %s" % shape, file=sys.stderr)
    return 2


def client(port, conns, size, reqs, chunk=0, fork=0):
    say("client")
    data = os.urandom(size)
    worst = 0.0
    for i in range(conns):
        t0 = time.monotonic()
        s = socket.create_connection((HOST, port))
        if not fork:
            ms = talk(i, s, size, reqs, chunk, data, t0)
        else:
            # connect, then let a child talk (it prints its own stats line); our copy closes
            # first (a copy still open when the child is due keeps the connection on TCP, as
            # docs/protocol.md §9.8 says: 3 exchanges leave no room for a parent descheduled
            # under load, 1 run in 30 of 12 connections here)
            r, w = os.pipe()
            gr, gw = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.close(gw)
                os.read(gr, 1)
                say("client")
                ms = talk(i, s, size, reqs, chunk, data, t0)
                os.write(w, b"%.3f" % ms)
                os._exit(0 if ms >= 0 else 1)
            os.close(w)
            os.close(gr)
            s.close()
            os.write(gw, b"c")
            os.close(gw)
            got = os.read(r, 64)
            os.close(r)
            ms = float(got) if os.waitpid(pid, 0)[1] == 0 and got else -1
        if ms < 0:
            return 1
        worst = max(worst, ms)
    print("client ok conns=%d worst_ms=%.3f" % (conns, worst), flush=True)
    return 0


def talk(i, s, size, reqs, chunk, data, t0):
    """REQS exchanges on s, then the end: the first reply's time in ms, or -1 (said why)."""
    ms = -1.0
    for k in range(reqs):
        if chunk:
            s.sendall(struct.pack("!Q", size))
            for off in range(0, size, chunk):
                s.sendall(data[off:off + chunk])
        else:
            s.sendall(struct.pack("!Q", size) + data)
        back = recv_exact(s, size)
        if back != data[::-1]:
            print("conn %d request %d: WRONG reply" % (i, k), flush=True)
            return -1
        if k == 0:
            ms = (time.monotonic() - t0) * 1000
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"":
        print("conn %d: bytes after the replies" % i, flush=True)
        return -1
    s.close()
    print("conn %d ok first_ms=%.3f" % (i, ms), flush=True)
    return ms


def serve_stdio():
    # the connection is stdin and stdout (inetd): read(2) and write(2) only, as a shell's
    # programs and most inetd services use them; every other fd closed first, as inetd
    # services do (sshd -i: closefrom(3))
    os.closerange(3, 1 << 16)
    def read_exact(n):
        buf = bytearray()
        while len(buf) < n:
            d = os.read(0, n - len(buf))
            if not d:
                return None
            buf += d
        return bytes(buf)

    while True:
        head = read_exact(8)
        if head is None:
            return 0
        data = read_exact(struct.unpack("!Q", head)[0])
        if data is None:
            return 1
        out = memoryview(data[::-1])
        while out:
            out = out[os.write(1, out):]


def serve_fd(fd, conns):
    say("worker")
    lst = socket.socket(fileno=fd)
    for _ in range(conns):
        c, _ = lst.accept()
        serve_one(c)
    return 0


def serve_conns(fd, conns):
    say("worker")
    u = socket.socket(fileno=fd)
    for _ in range(conns):
        _, fds, _, _ = socket.recv_fds(u, 1, 1)
        serve_one(socket.socket(fileno=fds[0]))
        u.send(b"D")
    return 0


def serve_recv(fd, conns):
    u = socket.socket(fileno=fd)
    _, fds, _, _ = socket.recv_fds(u, 1, 1)
    u.close()
    return serve_fd(fds[0], conns)


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "serve-stdio":
        sys.exit(serve_stdio())
    if a[1] == "serve-fd":
        sys.exit(serve_fd(int(a[2]), int(a[3])))
    if a[1] == "serve-conns":
        sys.exit(serve_conns(int(a[2]), int(a[3])))
    if a[1] == "serve-recv":
        sys.exit(serve_recv(int(a[2]), int(a[3])))
    if a[1] == "server":
        sys.exit(server(a[2], a[3], int(a[4])))
    sys.exit(client(*[int(x) for x in a[2:]]))
