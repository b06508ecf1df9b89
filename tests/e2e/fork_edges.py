"""fork_edges.py — edges of a connection shared by fork() (t_fork_shared_edges.sh says the cases).

leak N: a server forks a child per accepted connection; each child answers one byte and _exits
without a close (as pre-fork servers' children do). Prints the parent's shared anonymous mappings
(the socks' slab chunks: core/san_slab.h) after N connections.

thr N: N times, a client thread sleeps in a receive on a switched connection while the main
thread forks; the child closes its copy and _exits; the parent's close comes last. Prints the
client's shared anonymous mappings after N (its count of references in the child was the
parent's, with the sleeping thread's: it never came to 0 there, the child never let go of the
slot, and the parent's last close did not free it).

forkfail N: N times, a switched connection, then a fork() that fails (run as a user other than
root, RLIMIT_NPROC 1); the parent goes on alone and closes. Prints its shared anonymous mappings
after N (glibc runs the parent handlers after a failed fork too: the child's raise of holders and
users stayed, and the last close could not free the slot).

exitlast N: N times, a switched connection shared by fork(); the parent closes its copy first,
then the child _exits without a close. Prints the parent's shared anonymous mappings after N
(an exit let go of the child's use, not of its hold on the slot: nobody freed it).

nomem N: SANSWITCH_FAULT=fork_nomem, N times: a switched connection, a fork whose child finds no
copy of it; the child's receive must fail ECONNRESET, the parent goes on.
"""
import os
import socket
import subprocess
import sys
import threading
import time

from sockx import ping_until_switched


def shared_maps():
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "/dev/zero" in line)


def leak(n):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    port = lst.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        lst.close()
        resets = 0
        for _ in range(n):
            c = socket.create_connection(("127.0.0.1", port))
            try:
                c.recv(1)
            except ConnectionResetError:
                resets += 1  # (the slots are what this case counts; see the report)
            c.close()
        os._exit(min(resets, 100))
    child_resets = 0
    for _ in range(n):
        c, _ = lst.accept()
        k = os.fork()
        if k == 0:
            try:
                c.send(b"x")
            except ConnectionResetError:
                os._exit(1)
            os._exit(0)
        c.close()
        _, st = os.waitpid(k, 0)
        child_resets += os.WEXITSTATUS(st)
    _, st = os.waitpid(pid, 0)
    if os.WEXITSTATUS(st):
        print("client: %d resets" % os.WEXITSTATUS(st), file=sys.stderr, flush=True)
    if child_resets:
        print("server children: %d resets" % child_resets, file=sys.stderr, flush=True)
    print("shared mappings after %d: %d" % (n, shared_maps()), flush=True)


def thr_server(n):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    print(lst.getsockname()[1], flush=True)
    ok = True
    for _ in range(n):
        c, _ = lst.accept()
        ok = ping_until_switched(c, False) and ok
        ok = c.recv(1) == b"g" and ok
        c.sendall(b"A")  # frees the client's thread
        ok = c.recv(1) == b"" and ok
        c.close()
    print("server: all switched, all ended", ok, flush=True)


def rounds(n, what, at_fork, after_close=None):
    """n connections to thr_server, each switched, then at_fork(c, reader) with a thread asleep in
    a receive (reader); then the server frees it and reads this end's close. The last lines
    printed: what was seen, the server's, the shared anonymous mappings left here. after_close()
    after this end's close."""
    srv = subprocess.Popen([sys.executable, __file__, "thr-server", str(n)], stdout=subprocess.PIPE)
    port = int(srv.stdout.readline())
    ok = True
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        ok = ping_until_switched(c, True) and ok
        got = []
        t = threading.Thread(target=lambda: got.append(c.recv(1)))
        t.start()
        time.sleep(0.05)
        ok = at_fork(c) and ok
        c.sendall(b"g")
        t.join()
        ok = got == [b"A"] and ok
        c.close()
        if after_close:
            ok = after_close() and ok
    print("client: all switched, %s, all read %s" % (what, ok), flush=True)
    sys.stdout.write(srv.stdout.read().decode())
    print("server exit", srv.wait(), flush=True)
    print("shared mappings after %d: %d" % (n, shared_maps()), flush=True)


def thr(n):
    def at_fork(c):
        pid = os.fork()
        if pid == 0:
            c.close()
            os._exit(0)
        return os.waitpid(pid, 0)[1] == 0
    rounds(n, "the children closed", at_fork)


def forkfail(n):
    """The fork fails: EAGAIN from RLIMIT_NPROC 1 (as a user other than root)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)

    def at_fork(c):
        resource.setrlimit(resource.RLIMIT_NPROC, (1, hard))
        try:
            pid = os.fork()
        except BlockingIOError:
            return True
        finally:
            resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return False  # the fork was to fail
    rounds(n, "all forks failed", at_fork)


def exitlast(n):
    """The child _exits (no close) once the parent has closed its copy."""
    child = {}

    def at_fork(c):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        os.close(r)
        child.update(pid=pid, w=w)
        return True

    def after_close():
        os.close(child["w"])
        return os.waitpid(child["pid"], 0)[1] == 0
    rounds(n, "the children exited last", at_fork, after_close)


def nomem(n):
    """The fork finds no memory for the child's copies (SANSWITCH_FAULT=fork_nomem): the child's
    receive on the switched number fails ECONNRESET (the number is X: passing through, it would
    read doorbell bytes as data, or sleep)."""
    def at_fork(c):
        pid = os.fork()
        if pid == 0:
            c.settimeout(3)
            try:
                got = c.recv(1)
                print("child: read %r" % got, file=sys.stderr, flush=True)
            except ConnectionResetError:
                os._exit(0)
            except Exception as e:
                print("child: %r" % e, file=sys.stderr, flush=True)
            os._exit(1)
        return os.waitpid(pid, 0)[1] == 0
    rounds(n, "the children read ECONNRESET", at_fork)


if __name__ == "__main__":
    {"leak": lambda: leak(int(sys.argv[2])), "thr": lambda: thr(int(sys.argv[2])),
     "thr-server": lambda: thr_server(int(sys.argv[2])),
     "forkfail": lambda: forkfail(int(sys.argv[2])),
     "exitlast": lambda: exitlast(int(sys.argv[2])),
     "nomem": lambda: nomem(int(sys.argv[2]))}[sys.argv[1]]()
