#!/usr/bin/env python3
"""asyncio_probe.py — asyncio streams on the loopback; print what a program sees.

    asyncio_probe.py server PORTFILE     serve until killed
    asyncio_probe.py client PORT

Server: the first line of a connection says what to do. "ECHO": echo until end-of-file, then
close. "LATE N": sleep 1 s, then read N bytes and answer their digest (the client's writes wait
meanwhile). "SINK": read to end-of-file and answer the count and digest (the client closed its
writer with data still in its buffer). "DIGESTS": the server's own record, one line per SINK.
Client: 200 connections at once, each echoing 20 KB in 4 rounds; 5 "writer.close() while data is
in flight" connections (write 1 MB, close at once, the server counts what came); a server that
reads 5 MB late. Every line on stdout is an observation, never a time; the first is "# pid N".
"""
import asyncio
import hashlib
import os
import random
import signal
import sys
import time


def data(n, seed):
    return random.Random(seed * 7919 + n).randbytes(n)


async def handle(reader, writer, record):
    line = (await reader.readline()).decode().split()
    if not line:
        writer.close()
        return
    if line[0] == "ECHO":
        while True:
            d = await reader.read(65536)
            if not d:
                break
            writer.write(d)
            await writer.drain()
    elif line[0] == "LATE":
        await asyncio.sleep(1)
        d = await reader.readexactly(int(line[1]))
        writer.write(hashlib.sha256(d).hexdigest()[:16].encode() + b"\n")
        await writer.drain()
    elif line[0] == "SINK":
        h = hashlib.sha256()
        n = 0
        while True:
            d = await reader.read(65536)
            if not d:
                break
            h.update(d)
            n += len(d)
        record.append("sink %s: %d bytes %s" % (line[1], n, h.hexdigest()[:16]))
    elif line[0] == "DIGESTS":
        writer.write(("\n".join(sorted(record)) + "\n.\n").encode())
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def server(portfile):
    record = []
    srv = await asyncio.start_server(lambda r, w: handle(r, w, record), "127.0.0.1", 0, backlog=512)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.sockets[0].getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    async with srv:
        await srv.serve_forever()


async def echo_conn(port, i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"ECHO\n")
    h = hashlib.sha256()
    for k in range(4):
        d = data(5000 + i, k)
        w.write(d)
        await w.drain()
        got = await r.readexactly(len(d))
        h.update(got)
        if got != d:
            return "different"
    w.write_eof()
    end = await r.read()
    w.close()
    await w.wait_closed()
    return "ok end=%r" % end


async def close_in_flight(port, i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"SINK %d\n" % i)
    w.write(data(1 << 20, 100 + i))
    w.close()  # with most of the megabyte still in the transport's buffer
    await w.wait_closed()
    return hashlib.sha256(data(1 << 20, 100 + i)).hexdigest()[:16]


async def client(port):
    res = await asyncio.gather(*(echo_conn(port, i) for i in range(200)), return_exceptions=True)
    print("200 echo connections: %d echoed every byte and read end-of-file; others: %s" % (
        sum(x == "ok end=b''" for x in res), sorted(set(repr(x) for x in res if x != "ok end=b''"))))
    want = await asyncio.gather(*(close_in_flight(port, i) for i in range(5)))
    r, w = await asyncio.open_connection("127.0.0.1", port)
    d = data(5 << 20, 9)
    w.write(b"LATE %d\n" % len(d))
    t = time.monotonic()
    w.write(d)
    await w.drain()
    print("  late reader: the client's drain took %.3f s" % (time.monotonic() - t), file=sys.stderr)
    got = (await r.readline()).decode().strip()
    print("late reader: digest %s, want %s" % (got, hashlib.sha256(d).hexdigest()[:16]))
    w.close()
    await w.wait_closed()
    await asyncio.sleep(0.5)  # the sinks have read their end-of-file
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"DIGESTS\n")
    lines = []
    while True:
        ln = (await r.readline()).decode().rstrip("\n")
        if ln in (".", ""):
            break
        lines.append(ln)
    for ln in lines:
        print("server saw " + ln)
    for i, h in enumerate(want):
        print("sink %d: the client wrote 1048576 bytes %s" % (i, h))
    w.close()


def main():
    print("# pid %d" % os.getpid(), flush=True)
    if sys.argv[1] == "server":
        # killed with SIGTERM: exit as a program does (the preloaded library prints its line)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        asyncio.run(server(sys.argv[2]))
    else:
        asyncio.run(client(int(sys.argv[2])))


if __name__ == "__main__":
    main()
