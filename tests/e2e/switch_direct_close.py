#!/usr/bin/env python3
# tests/e2e/switch_direct_close.py — a direct grant answered just before the sender's close():
# the receiver must deliver the bytes, then EOF (t_switch_direct_close.sh runs this preloaded).
#
#   switch_direct_close.py ROUNDS          (the parent: the sender)
#   switch_direct_close.py child PORT      (the receiver, started by the parent)
#
# Each round: a child process connects and switches (one byte each way), then sleeps in a blocking
# recv(1 MiB), which offers its buffer (direct grant). The parent waits until the child's thread
# sleeps in poll, stops the child (SIGSTOP), sends 1 MiB (written straight into the offered
# buffer, answered by WRITE_DONE), closes, and only then continues the child (SIGCONT): the child
# wakes with the WRITE_DONE in its ring and its anchor at EOF at once. A race under load made that
# order rare but real; here it is every round. Output: "round N: ok" or "round N: WRONG ...";
# "direct BYTES": what the parent's sends were meant to move into the offered buffers. Exit 0 if
# every round read every byte (sha256) then EOF, 1 otherwise.
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import time

from sockx import recv_exact

TIMEOUT = 10.0


def child(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"w")
    if recv_exact(s, 1) != b"v":
        raise RuntimeError("warm-up byte lost")
    print("ready", flush=True)
    buf = bytearray()
    end = "EOF"
    while True:
        try:
            c = s.recv(1 << 20)
        except OSError as e:
            end = os.strerror(e.errno) if e.errno else type(e).__name__
            break
        if not c:
            break
        buf += c
    print("got %d %s then %s" % (len(buf), hashlib.sha256(buf).hexdigest()[:16], end), flush=True)


def thread_state(pid):
    with open("/proc/%d/task/%d/stat" % (pid, pid)) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def in_poll(pid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            return f.read().split()[0] in ("7", "271")  # poll, ppoll (x86_64)
    except (OSError, IndexError):
        return False


def wait_until(cond, what):
    end = time.monotonic() + TIMEOUT
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting until " + what)
        time.sleep(0.001)


def one_round(i, rnd):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "child",
                          str(lst.getsockname()[1])], stdout=subprocess.PIPE, text=True)
    try:
        b, _ = lst.accept()
        lst.close()
        if recv_exact(b, 1) != b"w":
            raise RuntimeError("warm-up byte lost")
        b.sendall(b"v")
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("the child did not get ready")
        wait_until(lambda: in_poll(p.pid), "the receiver sleeps in poll")
        os.kill(p.pid, signal.SIGSTOP)
        wait_until(lambda: thread_state(p.pid) == "T", "the receiver is stopped")
        data = rnd.randbytes(1 << 20)
        b.sendall(data)
        b.close()
        time.sleep(0.02)  # the FIN reaches the child's anchor
        os.kill(p.pid, signal.SIGCONT)
        out = p.stdout.read().strip()
        p.wait(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    want = "got %d %s then EOF" % (len(data), hashlib.sha256(data).hexdigest()[:16])
    print("round %d: %s" % (i, "ok" if out == want else "WRONG: %s (want %s)" % (out, want)),
          flush=True)
    return out == want


def main():
    if sys.argv[1] == "child":
        child(int(sys.argv[2]))
        return
    rounds = int(sys.argv[1])
    rnd = random.Random(20261127)
    print("# pid %d" % os.getpid(), flush=True)
    ok = sum(one_round(i, rnd) for i in range(rounds))
    print("direct %d" % (rounds << 20), flush=True)
    sys.exit(0 if ok == rounds else 1)


if __name__ == "__main__":
    main()
