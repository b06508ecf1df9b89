#!/usr/bin/env python3
"""switch_duplex.py CLIENT SERVER N — full-duplex connections (t_switch_duplex.sh).

One process forks: the child listens on 127.0.0.1 and serves N connections, the parent opens N
at once. On every connection both ends read and write at the same time. The client sends its
stream (1-4 MiB of seeded pseudo-random bytes, in writes of random sizes from 1 byte to 256 KiB)
while it reads the echo, then shuts its sends down and reads to the end; the server echoes: a
reader (receives of random sizes up to 64 KiB) hands each piece to a writer, which sends it
while the reader goes on, and closes once all is echoed. CLIENT, SERVER: "asyncio" (a writer
task and a reader task, asyncio streams, drain() after each write, write_eof() at the client's
end) or "threads" (a writer thread and a reader thread, blocking sockets).

The asyncio client's writer runs until TCP pushes back (drain() waits only then), so its reader
reads nothing between many writes, while the server receives and sends in turn: before, the
server counted an exchange at each receive after a send, the client none, and the server ended
its window before the client was due. And a client whose stream the kernel took whole before
it was due shut its sends down unproposed (docs/protocol.md §9.7).

Output: one line per connection and end (what it sent and what it received, as lengths and
digests: the same over kernel TCP), then "# pid P" per process; exit 1 if a client's echo is not
its stream.
"""
import asyncio
import hashlib
import os
import queue
import random
import socket
import sys
import threading

CLIENT, SERVER, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
WRITES = [1, 7, 100, 1460, 4096, 16384, 65536, 262144]
TIMEOUT = 60


def stream(i):
    """Connection i's client stream, and the random source of its write sizes."""
    rnd = random.Random(i)
    return rnd.randbytes(rnd.randint(1 << 20, 4 << 20)), rnd


def line(i, side, sent, got):
    return "conn %d %s: sent %d %s, received %d %s" % (
        i, side, sent[0], sent[1].hexdigest()[:16], got[0], got[1].hexdigest()[:16])


def c_line(i, n, h):
    mine = stream(i)[0]
    ok = n == len(mine) and h.digest() == hashlib.sha256(mine).digest()
    return ok, line(i, "client", (len(mine), hashlib.sha256(mine)), (n, h)) + ("" if ok else " BAD")


# ---- clients


async def ac_one(port, i):
    mine, rnd = stream(i)
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(i.to_bytes(4, "big"))

    async def send():
        off = 0
        while off < len(mine):
            k = min(rnd.choice(WRITES), len(mine) - off)
            w.write(mine[off:off + k])
            off += k
            await w.drain()
        w.write_eof()

    st = asyncio.create_task(send())
    h, n, rrnd = hashlib.sha256(), 0, random.Random(-i)
    while True:
        d = await r.read(rrnd.randint(1, 200000))
        if not d:
            break
        h.update(d)
        n += len(d)
    await st
    w.close()
    await w.wait_closed()
    return c_line(i, n, h)


async def ac_all(port):
    return await asyncio.wait_for(asyncio.gather(*(ac_one(port, i) for i in range(N))), TIMEOUT)


def tc_one(port, i, out):
    mine, rnd = stream(i)
    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(TIMEOUT)
    c.sendall(i.to_bytes(4, "big"))
    got = []

    def recv():
        h, n, rrnd = hashlib.sha256(), 0, random.Random(-i)
        while True:
            d = c.recv(rrnd.randint(1, 200000))
            if not d:
                break
            h.update(d)
            n += len(d)
        got.append((n, h))

    rt = threading.Thread(target=recv)
    rt.start()
    off = 0
    while off < len(mine):
        k = min(rnd.choice(WRITES), len(mine) - off)
        c.sendall(mine[off:off + k])
        off += k
    c.shutdown(socket.SHUT_WR)
    rt.join()
    c.close()
    out[i] = c_line(i, *got[0])


def tc_all(port):
    out = {}
    ts = [threading.Thread(target=tc_one, args=(port, i, out)) for i in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return [out.get(i, (False, "conn %d client: failed" % i)) for i in range(N)]


# ---- servers: echo, a reader and a writer at once


async def as_all(lsn):
    out, done = {}, asyncio.Event()

    async def handle(r, w):
        i = int.from_bytes(await r.readexactly(4), "big")
        q, rnd, h = asyncio.Queue(), random.Random(i + N), hashlib.sha256()

        async def send():
            n = 0
            while (d := await q.get()) is not None:
                w.write(d)
                n += len(d)
                await w.drain()
            return n

        st = asyncio.create_task(send())
        while True:
            d = await r.read(rnd.randint(1, 65536))
            h.update(d)
            q.put_nowait(d or None)
            if not d:
                break
        n = await st
        w.close()
        await w.wait_closed()
        out[i] = (True, line(i, "server", (n, h), (n, h)))
        if len(out) == N:
            done.set()

    srv = await asyncio.start_server(handle, sock=lsn)
    async with srv:
        await asyncio.wait_for(done.wait(), TIMEOUT)
    return [out[i] for i in range(N)]


def ts_one(c, out):
    c.settimeout(TIMEOUT)
    i = int.from_bytes(c.recv(4, socket.MSG_WAITALL), "big")
    q, rnd, h, sent = queue.Queue(), random.Random(i + N), hashlib.sha256(), [0]

    def send():
        while (d := q.get()) is not None:
            c.sendall(d)
            sent[0] += len(d)

    wt = threading.Thread(target=send)
    wt.start()
    while True:
        d = c.recv(rnd.randint(1, 65536))
        h.update(d)
        q.put(d or None)
        if not d:
            break
    wt.join()
    c.close()
    out[i] = (True, line(i, "server", (sent[0], h), (sent[0], h)))


def ts_all(lsn):
    out, ts = {}, []
    for _ in range(N):
        c, _ = lsn.accept()
        ts.append(threading.Thread(target=ts_one, args=(c, out)))
        ts[-1].start()
    for t in ts:
        t.join()
    return [out.get(i, (False, "conn %d server: failed" % i)) for i in range(N)]


def report(res):
    print("# pid %d" % os.getpid())
    print("\n".join(t for _, t in res), flush=True)
    return all(ok for ok, _ in res)


lsn = socket.socket()
lsn.bind(("127.0.0.1", 0))
port = lsn.getsockname()[1]
rd, wr = os.pipe()
pid = os.fork()
if pid == 0:
    lsn.listen(N)  # (the serving process listens: a listener of its own)
    os.write(wr, b"l")
    ok = report(asyncio.run(as_all(lsn)) if SERVER == "asyncio" else ts_all(lsn))
    os._exit(0 if ok else 1)
lsn.close()
os.read(rd, 1)  # connect only once the child listens
ok = report(asyncio.run(ac_all(port)) if CLIENT == "asyncio" else tc_all(port))
_, st = os.waitpid(pid, 0)
sys.exit(0 if ok and st == 0 else 1)
