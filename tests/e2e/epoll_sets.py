#!/usr/bin/env python3
"""epoll_sets.py MODE CONNS ROUNDS — an event-loop echo server whose connections sit in several
epoll sets at once, against a client that waits with poll() and select() (t_epoll_sets.sh).

One process forks: the parent serves, the child is the client. The parent accepts CONNS
nonblocking connections and registers every one in set A (EPOLLIN, level-triggered) and in set
B (EPOLLIN | EPOLLET if MODE is "et", else level-triggered), and every other one also in set C
(EPOLLIN | EPOLLET). It waits on A, B and C in turn, with a timeout of 10 s on A and B (a
wait that times out while a request is outstanding is a stall) and none on C (it holds only
half of them: a wait there could sleep while the others have requests); for each event it reads once (a
level-triggered set) or until EAGAIN (an edge-triggered one) and echoes what it read. The child
sends, ROUNDS times, a request of 1 to 3000 bytes of seeded random data on each connection,
then reads the echo of each, waiting with poll() in even rounds and select() in odd ones (a
stall after 10 s). Then 50 times on each connection: 100 bytes echoed (waited for in a
level-triggered epoll set), one of them read, and a poll(), a select() and an epoll_wait() with a
timeout of 0 must say the connection is readable ("zero_misses N" counts those that did not). Then the connections sit
idle for 2 s while the parent waits on set A without a timeout, and the child reads the
parent's CPU time (user + system, /proc) over those 2 s: a server asleep costs none.

Prints "# pid P" for both processes; the child prints "echo sha256 H" over everything it read,
and "idle_ms N"; the parent "spurious N" (level-triggered events whose read found nothing:
each wait's events are handled before the next wait, so kernel TCP has none). Exit 1 on a
stall or a short echo.
"""
import errno
import hashlib
import os
import random
import select
import socket
import sys
import time

MODE, CONNS, ROUNDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
B_ET = select.EPOLLET if MODE == "et" else 0

lsn = socket.socket()
lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsn.bind(("127.0.0.1", 0))
lsn.listen(CONNS)
port = lsn.getsockname()[1]
ppid = os.getpid()
pid = os.fork()
if pid == 0:
    lsn.close()
    print(f"# pid {os.getpid()}", flush=True)
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(CONNS)]
    rnd = random.Random(17)
    h = hashlib.sha256()
    p = select.poll()
    for c in conns:
        c.setblocking(False)
        p.register(c.fileno(), select.POLLIN)
    byfd = {c.fileno(): c for c in conns}
    for r in range(ROUNDS):
        want = {}
        for c in conns:
            data = rnd.randbytes(rnd.randint(1, 3000))
            c.setblocking(True)
            c.sendall(data)
            c.setblocking(False)
            want[c.fileno()] = len(data)
        got = {fd: b"" for fd in want}
        while any(len(got[fd]) < want[fd] for fd in want):
            if r % 2:
                ev = [(fd, 0) for fd in select.select(list(byfd), [], [], 10)[0]]
            else:
                ev = p.poll(10000)
            if not ev:
                print(f"client stall in round {r}", flush=True)
                os._exit(1)
            for fd, _ in ev:
                try:
                    d = byfd[fd].recv(65536)
                except BlockingIOError:
                    continue
                if not d:
                    print("client: early end", flush=True)
                    os._exit(1)
                got[fd] += d
        for c in conns:
            h.update(got[c.fileno()])
    print(f"echo sha256 {h.hexdigest()}", flush=True)
    # A read that leaves bytes unread, then a wait that does not wait: it must say readable.
    misses = 0
    for r in range(50):
        for c in conns:
            c.setblocking(True)
            c.sendall(b"z" * 100)
            c.setblocking(False)
            one = select.poll()
            one.register(c.fileno(), select.POLLIN)
            ep = select.epoll()  # level-triggered: the switch finds it in the ring
            ep.register(c.fileno(), select.EPOLLIN)
            ok = ep.poll(10)
            ep.close()
            if not ok:
                print("client stall in the zero-timeout checks", flush=True)
                os._exit(1)
            time.sleep(0.002)  # the whole echo is there (one send of 100 bytes)
            got = c.recv(1)
            misses += not one.poll(0)
            misses += not select.select([c], [], [], 0)[0]
            ep = select.epoll()
            ep.register(c.fileno(), select.EPOLLIN)
            misses += not ep.poll(0)
            ep.close()
            while len(got) < 100:
                try:
                    got += c.recv(100)
                except BlockingIOError:
                    one.poll(10000)
    print(f"zero_misses {misses}", flush=True)
    tck = os.sysconf("SC_CLK_TCK")

    def cpu():
        with open(f"/proc/{ppid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) * 1000 // tck

    t0 = cpu()
    time.sleep(2)
    print(f"idle_ms {cpu() - t0}", flush=True)
    for c in conns:
        c.close()
    os._exit(0)

print(f"# pid {os.getpid()}", flush=True)
conns = []
for _ in range(CONNS):
    c, _ = lsn.accept()
    c.setblocking(False)
    conns.append(c)
byfd = {c.fileno(): c for c in conns}
sets = [(select.epoll(), 0), (select.epoll(), B_ET), (select.epoll(), select.EPOLLET)]
for i, c in enumerate(conns):
    sets[0][0].register(c.fileno(), select.EPOLLIN)
    sets[1][0].register(c.fileno(), select.EPOLLIN | B_ET)
    if i % 2:
        sets[2][0].register(c.fileno(), select.EPOLLIN | select.EPOLLET)
spurious, ended, rc = 0, set(), 0
turn = 0
while len(ended) < CONNS:
    ep, et = sets[turn % 3]
    turn += 1
    # set C holds half the connections: a wait on it could sleep while the others have
    # requests (on kernel TCP too), so it is only looked at; A and B hold them all
    ev = ep.poll(10 if turn % 3 != 0 else 0)
    if not ev and turn % 3 != 0:
        print(f"server stall on set {(turn - 1) % 3}", flush=True)
        rc = 1
        break
    for fd, _ in ev:
        c = byfd[fd]
        while True:
            try:
                d = c.recv(65536)
            except BlockingIOError:
                if not et:
                    spurious += 1
                break
            if not d:
                ended.add(fd)
                for s, _ in sets:
                    try:
                        s.unregister(fd)
                    except (KeyError, OSError):
                        pass
                break
            c.setblocking(True)
            c.sendall(d)
            c.setblocking(False)
            if not et:
                break
    if turn % 3 == 0 and not any(sets[0][0].poll(0)):
        # between rounds (or idle): sleep in set A until something comes
        ev = sets[0][0].poll(-1 if len(ended) < CONNS else 0, 1)
print(f"spurious {spurious}", flush=True)
_, st = os.waitpid(pid, 0)
sys.exit(rc or (1 if os.waitstatus_to_exitcode(st) else 0))
