#!/usr/bin/env python3
"""rxwatch_edges.py — waits that watch switched connections' rings, at their edges (t_rxwatch_edges.sh).

usage: rxwatch_edges.py CASE, one of:

fork   A server's epoll_wait reports a request and its receive reads the connection empty (left
       quiet, its doorbell flag down, when the waits watch its ring); it then forks a handler
       and closes its own copy, as a forking server does. The handler waits in poll() for the
       next request, which the client sends 3 s later. Prints "late_ms N" (from the client's
       send until the handler's poll saw it, or 6000 if it did not) and "idle_ctxsw N" (the server's
       voluntary context switches over 2 s while it only sleeps).
inout  A server's connection, registered level-triggered for EPOLLIN|EPOLLOUT (writable all the
       time), gets 15 requests in turn; for each the server loops in epoll_wait until an event
       says EPOLLIN. Prints "in_ms N": the median time from the client's send to the EPOLLIN
       (3000 if none came).
dup    A server's epoll set gets a second number (dup); the connection is deleted through that
       number, then the client sends. Prints "after_del N": events epoll_wait on the first number
       returns for the deleted connection (kernel TCP: 0).
forkdel The same, the connection deleted from the server's set by a fork child, which then
       exits (the server holds the connection alone again).

Each prints "# pid P" for the client and the server (each has one connection).
"""
import os
import select
import socket
import sys
import time

CASE = sys.argv[1]
ROUNDS = 50
PINGS = 15


def ctxsw(pid):
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        n += int(line.split()[1])
        except OSError:
            pass  # (a thread that ended)
    return n


lsn = socket.socket()
lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsn.bind(("127.0.0.1", 0))
lsn.listen(1)
port = lsn.getsockname()[1]
server = os.getpid()
r_pipe, w_pipe = os.pipe()  # the client's send time (fork, inout)
client = os.fork()
if client == 0:
    lsn.close()
    os.close(r_pipe)
    print(f"# pid {os.getpid()}", flush=True)
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(ROUNDS):
        c.sendall(b"x")
        assert c.recv(10) == b"x"
    if CASE == "fork":
        time.sleep(1.0)  # the handler is asleep in poll by now
        a = ctxsw(server)
        time.sleep(2.0)
        print(f"idle_ctxsw {ctxsw(server) - a}", flush=True)
        os.write(w_pipe, repr(time.time()).encode())
        c.sendall(b"late")
        c.settimeout(10)
        assert c.recv(10) == b"late"
    elif CASE == "inout":
        c.settimeout(10)
        for _ in range(PINGS):
            time.sleep(0.05)  # the server loops in epoll_wait (EPOLLOUT each time)
            os.write(w_pipe, repr(time.time()).encode().ljust(32))
            c.sendall(b"ping")
            assert c.recv(10) == b"ping"
    else:  # dup, forkdel
        time.sleep(0.3 if CASE == "dup" else 1.0)
        c.sendall(b"after-del")
        c.settimeout(10)
        assert c.recv(10) == b"done"
    c.close()
    sys.exit(0)

os.close(w_pipe)
print(f"# pid {os.getpid()}", flush=True)
c, _ = lsn.accept()
lsn.close()
c.setblocking(False)
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN)
for _ in range(ROUNDS):
    while not ep.poll(5):
        pass
    c.send(c.recv(10))

if CASE == "fork":
    handler = os.fork()
    if handler == 0:
        ep.close()
        p = select.poll()
        p.register(c.fileno(), select.POLLIN)
        r = p.poll(6000)
        t = time.time()
        sent = float(os.read(r_pipe, 64).decode())
        print(f"late_ms {max(0, int((t - sent) * 1000)) if r else 6000}", flush=True)
        if r:
            c.setblocking(True)
            c.sendall(c.recv(10))
        os._exit(0)
    c.close()
    ep.close()
    _, st = os.waitpid(handler, 0)
    rc = os.waitstatus_to_exitcode(st)
elif CASE == "inout":
    ep.modify(c.fileno(), select.EPOLLIN | select.EPOLLOUT)
    took = []
    for _ in range(PINGS):
        deadline = time.monotonic() + 3
        got = None
        while time.monotonic() < deadline and not got:
            for _, e in ep.poll(0.1):
                if e & select.EPOLLIN:
                    got = c.recv(10)
                    t = time.time()
        if not got:
            took.append(3000)
            break
        sent = float(os.read(r_pipe, 32).decode())
        took.append(max(0, (t - sent) * 1000))
        c.setblocking(True)
        c.sendall(got)
        c.setblocking(False)
    took.sort()
    print(f"in_ms {int(took[len(took) // 2])}", flush=True)
    rc = 0
elif CASE == "dup":
    ep2 = select.epoll.fromfd(os.dup(ep.fileno()))
    ep2.unregister(c.fileno())  # the same kernel set, through its second number
    time.sleep(0.8)  # the request is there by now, unread
    print(f"after_del {len(ep.poll(0.5))}", flush=True)
    c.setblocking(True)
    assert c.recv(20) == b"after-del"
    c.sendall(b"done")
    rc = 0
else:
    child = os.fork()
    if child == 0:
        ep.unregister(c.fileno())  # the set the parent made, the connection it shares
        sys.exit(0)  # (an exit that lets go of the connection: the parent holds it alone)
    _, st = os.waitpid(child, 0)
    rc = os.waitstatus_to_exitcode(st)
    time.sleep(1.2)  # the request is there by now, unread
    print(f"after_del {len(ep.poll(0.5))}", flush=True)
    c.setblocking(True)
    assert c.recv(20) == b"after-del"
    c.sendall(b"done")
_, st = os.waitpid(client, 0)
sys.exit(rc or (1 if os.waitstatus_to_exitcode(st) else 0))
