#!/usr/bin/env python3
"""edge_bell_stuck.py — a doorbell that lands after its reader gave up waiting (t_edge_bell_stuck.sh).

One connection between a parent (accepting, the reader) and a forked child (connecting, the
writer). Two request/reply exchanges first (so that under the switch it is switched); then the
reader spins on nonblocking receives (never waiting for its socket) while the writer sends one
message of 100 bytes: under SANSWITCH_FAULT=bell_stuck the writer rings 50 ms after taking the
reader's flag, so the reader reads the message, then gives up waiting for that doorbell when
its receive finds the ring empty. Then, for 1 s with nothing more sent, the reader waits in
poll() and receives after each wake-up. Prints "# pid P" for both processes and
"idle_wakeups N": wake-ups in that second (kernel TCP: 0; a doorbell left on the socket for
good: a wake-up per poll, thousands).
"""
import os
import select
import socket
import sys
import time


def main():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    print(f"# pid {os.getpid()}", flush=True)
    pid = os.fork()
    if pid == 0:
        lst.close()
        print(f"# pid {os.getpid()}", flush=True)
        c = socket.create_connection(("127.0.0.1", port))
        for _ in range(2):
            c.sendall(b"request")
            assert c.recv(10) == b"ok"
        time.sleep(0.2)  # the reader spins on its receives by now
        c.sendall(b"m" * 100)
        assert c.recv(10) == b"done"
        c.close()
        sys.exit(0)
    s, _ = lst.accept()
    for _ in range(2):
        assert s.recv(10) == b"request"
        s.sendall(b"ok")
    s.setblocking(False)
    got = b""
    deadline = time.monotonic() + 10
    while len(got) < 100 and time.monotonic() < deadline:
        try:
            got += s.recv(100 - len(got))
        except BlockingIOError:
            pass
    assert got == b"m" * 100, got
    try:
        s.recv(10)  # the ring empty: the owed doorbell is waited for, then given up
        assert False, "more data"
    except BlockingIOError:
        pass
    p = select.poll()
    p.register(s.fileno(), select.POLLIN)
    wakeups = 0
    end = time.monotonic() + 1
    while time.monotonic() < end:
        if p.poll(max(1, int((end - time.monotonic()) * 1000))):
            wakeups += 1
            try:
                d = s.recv(10)
                assert False, f"data {d!r}"
            except BlockingIOError:
                pass
    print(f"idle_wakeups {wakeups}", flush=True)
    s.setblocking(True)
    s.sendall(b"done")
    _, st = os.waitpid(pid, 0)
    return 1 if os.waitstatus_to_exitcode(st) else 0


if __name__ == "__main__":
    sys.exit(main())
