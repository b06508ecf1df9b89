#!/usr/bin/env python3
# tests/e2e/lite_promote.py CASE — a server's lite candidate (docs/engine.md §3) and what makes
# it a sock, both ends in this process, every reply checked:
#   epoll: registered in an epoll set after the first exchange (the lite candidate keeps the
#          registration), each later request waited for with that set: the client's second
#          request switches, and the swap must have moved the registration (or the wait hangs);
#   dup:   dup()ed after the first exchange: made a sock then, and the second request switches,
#          read through the dup;
#   sendfull: after the first exchange the server sends 8 MiB with one blocking send the
#          client does not read yet (held by full buffers, seen waiting in the kernel); the
#          client's second request switches the connection all the same, every byte arriving;
#   busy:  dup()ed while another thread's receive is in the kernel (seen in
#          /proc/self/task/TID/syscall, not guessed with a sleep): the connection stays TCP
#          (that receive cannot be paused), and every byte still arrives.
# And the client's lite candidate (A), its replies read by a reader thread that waits in the
# kernel for each one before the request goes (seen as above), the server a thread of its own:
#   cwant: the second request, due, finds that receive inside the gate: it goes on TCP, and the
#          reader's next receive makes the sock, which proposes: the connection switches;
#   cdup:  dup()ed while that receive is in the kernel: the client's connection stays TCP.
# And what must not make the client's sock while such a receive is inside its gate (it would
# stay TCP): another thread's epoll_wait over a set that holds it, once a connection of the
# process has switched (cwatch: the wait watches switched rings); setting SO_RCVBUF, reading
# SO_RCVLOWAT (csockopt). Three exchanges follow; the connection switches. And cshut: the
# client's whole upload (1 MiB) in one send, then shutdown(SHUT_WR), the server echoing it
# after the end: that shutdown, due by bytes, proposes (its sock made there, not in a send).
# Prints "lite CASE: ok"; exits 1 on a mismatch.
import os
import select
import socket
import sys
import threading

case = sys.argv[1]
lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen()
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            break
        b += c
    return b


def fail(msg):
    print("lite %s: MISMATCH %s" % (case, msg))
    sys.exit(1)


def exchange(i, server_sock, wait=None):
    req = (b"req%02d" % i) * 200
    if wait:
        # sent 0.2 s into the wait, which by then sleeps in the kernel: only the registration
        # the swap re-made (not a look at the ring before sleeping) can wake it
        t = threading.Timer(0.2, cli.sendall, (req,))
        t.start()
        if not wait.poll(10):
            fail("request %d: the epoll set never reported it" % i)
        t.join()
    else:
        cli.sendall(req)
    got = recv_exact(server_sock, len(req))
    if got != req:
        fail("request %d: %d bytes" % (i, len(got)))
    server_sock.sendall(got[::-1])
    back = recv_exact(cli, len(req))
    if back != req[::-1]:
        fail("reply %d: %d bytes" % (i, len(back)))


def in_call(tid, calls):
    try:
        with open("/proc/self/task/%d/syscall" % tid) as f:
            return f.read().split()[0] in calls
    except OSError:
        return False


def in_recv(tid):
    # x86_64: recvfrom 45, recvmsg 47 (the preload receives with recvmsg); a sock's
    # candidate path waits in poll 7 / ppoll 271 (SANSWITCH_LITE=0)
    return in_call(tid, ("45", "47", "7", "271"))


def wait_until(pred, what):
    for _ in range(1000000):
        if pred():
            return
    fail(what)


ep = select.epoll()
if case == "epoll":
    exchange(0, srv)
    ep.register(srv.fileno(), select.EPOLLIN)
    for i in range(1, 4):
        exchange(i, srv, ep)
elif case == "dup":
    exchange(0, srv)
    d = socket.socket(fileno=os.dup(srv.fileno()))
    for i in range(1, 4):
        exchange(i, d)
    d.close()
elif case == "sendfull":
    exchange(0, srv)
    big = os.urandom(8 << 20)
    box = {}

    def sender():
        box["tid"] = threading.get_native_id()
        srv.sendall(big)

    t = threading.Thread(target=sender)
    t.start()
    wait_until(lambda: "tid" in box, "no sender thread")
    # waiting for room: sendto 44 / sendmsg 46 in the kernel, or poll 7 / ppoll 271 (lite)
    wait_until(lambda: in_call(box["tid"], ("44", "46", "7", "271")),
               "the sender never waited for room")
    req = b"second" * 100
    cli.sendall(req)  # the client's second exchange: it proposes first
    got = recv_exact(cli, len(big))
    t.join()
    if got != big:
        fail("the big reply: %d bytes" % len(got))
    if recv_exact(srv, len(req)) != req:
        fail("the second request")
    srv.sendall(req[::-1])
    if recv_exact(cli, len(req)) != req[::-1]:
        fail("the second reply")
elif case == "busy":
    first = (b"first") * 100
    box = {}
    ready = threading.Event()

    def reader():
        box["tid"] = threading.get_native_id()
        ready.set()
        box["got"] = recv_exact(srv, len(first))

    t = threading.Thread(target=reader)
    t.start()
    ready.wait()
    wait_until(lambda: in_recv(box["tid"]), "the reader thread never waited in the kernel")
    d = os.dup(srv.fileno())  # another thread's call is inside the gate
    cli.sendall(first)
    t.join()
    if box["got"] != first:
        fail("first request: %d bytes" % len(box["got"]))
    srv.sendall(first[::-1])
    if recv_exact(cli, len(first)) != first[::-1]:
        fail("first reply")
    for i in range(1, 4):
        exchange(i, srv)
    os.close(d)
elif case in ("cwant", "cdup"):
    n = 6
    reqs = [(b"c%02d" % i) * 300 for i in range(n)]
    box = {"got": []}
    got_one = threading.Semaphore(0)

    def server():
        for r in reqs:
            srv.sendall(recv_exact(srv, len(r))[::-1])

    def reader():
        box["tid"] = threading.get_native_id()
        for r in reqs:
            box["got"].append(recv_exact(cli, len(r)))
            got_one.release()

    ts = [threading.Thread(target=server), threading.Thread(target=reader)]
    for t in ts:
        t.start()
    wait_until(lambda: "tid" in box, "no reader thread")
    d = None
    for i, r in enumerate(reqs):
        wait_until(lambda: in_recv(box["tid"]), "the reader never waited in the kernel")
        if case == "cdup" and i == 1:
            d = os.dup(cli.fileno())  # its receive is inside the gate
        cli.sendall(r)
        got_one.acquire()
    for t in ts:
        t.join()
    for i, r in enumerate(reqs):
        if box["got"][i] != r[::-1]:
            fail("reply %d: %d bytes" % (i, len(box["got"][i])))
    if d is not None:
        os.close(d)
elif case in ("cwatch", "csockopt"):
    if case == "cwatch":
        exchange(0, srv)
        exchange(1, srv)  # (this connection switched: waits watch rings from now on)
        cli2 = socket.create_connection(lst.getsockname())
        srv2, _ = lst.accept()
        ep.register(cli2.fileno(), select.EPOLLIN)
    else:
        cli2, srv2 = cli, srv
    box = {}

    def reader2():
        box["tid"] = threading.get_native_id()
        box["got"] = recv_exact(cli2, 100)

    t = threading.Thread(target=reader2)
    t.start()
    wait_until(lambda: "tid" in box and in_recv(box["tid"]), "the reader never waited")
    if case == "cwatch":
        ep.poll(0.05)
    else:
        cli2.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        cli2.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
    srv2.sendall(b"r" * 100)
    t.join()
    if box["got"] != b"r" * 100:
        fail("the pushed bytes: %d" % len(box["got"]))
    if case == "cwatch":
        ep.unregister(cli2.fileno())
    for i in range(2, 5):
        req = (b"w%02d" % i) * 100
        cli2.sendall(req)
        if recv_exact(srv2, len(req)) != req:
            fail("request %d" % i)
        srv2.sendall(req[::-1])
        if recv_exact(cli2, len(req)) != req[::-1]:
            fail("reply %d" % i)
    if case == "cwatch":
        cli2.close()
        if srv2.recv(1) != b"":
            fail("no end of file (second connection)")
        srv2.close()
elif case == "cshut":
    data = os.urandom(1 << 20)
    box = {}

    def echo():
        b = bytearray()
        while True:
            c = srv.recv(65536)
            if not c:
                break
            b += c
        box["n"] = len(b)
        srv.sendall(bytes(b[::-1]))
        srv.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=echo)
    t.start()
    cli.sendall(data)
    cli.shutdown(socket.SHUT_WR)
    got = recv_exact(cli, len(data) + 1)
    t.join()
    if box["n"] != len(data) or got != data[::-1]:
        fail("echo: %d bytes up, %d back" % (box["n"], len(got)))
else:
    print("lite: unknown case %s" % case)
    sys.exit(2)
ep.close()
cli.close()
if srv.recv(1) != b"":
    fail("no end of file")
srv.close()
print("lite %s: ok" % case)
