#!/usr/bin/env python3
"""tests/e2e/midswitch_fork.py PORTFILE BYTES — t_edge_midswitch's forking server.

Accepts one connection, waits 100 ms (its engine answers the client's PROPOSE meanwhile), forks,
and closes its own copy at once: the connection is the child's, which sends BYTES bytes of the
pattern of tests/tools/sanedge.c 900 ms later, closes it, and lives on for 8 s (a server's child
goes on serving others), as does the parent, waiting for it: the test stops both once the
client is done. The client's SWITCH, sent 500 ms after the ACCEPT (SANSWITCH_FAULT=switch_late),
meets a parent that has let go of the connection while its child holds a copy of the parent's
side channel: the let-go must reach the client at once, not when the child ends (the client
waited for the channel's end 5 s, then reset the connection).
"""
import os
import struct
import sys
import time

from sockx import listen_portfile

MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def pattern(n, seed=0x5A17ED6E0DDBA115):
    """The first n bytes of sanedge's stream pattern (byte i: byte i%8 of splitmix64(i/8 ^ seed))."""
    out = bytearray()
    for k in range((n + 7) // 8):
        out += struct.pack("<Q", splitmix64(k ^ seed))
    return bytes(out[:n])


def main():
    portfile, nbytes = sys.argv[1], int(sys.argv[2])
    lst = listen_portfile(portfile)
    c, _ = lst.accept()
    lst.close()
    time.sleep(0.1)
    pid = os.fork()
    if pid == 0:
        time.sleep(0.9)
        c.sendall(pattern(nbytes))
        c.close()
        time.sleep(8)
        os._exit(0)
    c.close()
    os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
