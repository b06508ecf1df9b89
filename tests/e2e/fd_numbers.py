#!/usr/bin/env python3
"""fd_numbers.py — the fd numbers a program gets while its connections switch.

A listener, a connection to it and the accepted end (three request/reply exchanges: switched
when preloaded, in this process), then a file, a pipe and an eventfd-like second socket: prints
every number it got, and the process's open numbers below 100. The kernel hands out the lowest
free number: run over kernel TCP and under the switch, the lines must be the same (the library's
own fds live above them, docs/engine.md), once the library's work for the switch-over is done.
"""
import os
import socket
import time

l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
for _ in range(3):
    c.sendall(b"x" * 10)
    a.recv(10)
    a.sendall(b"y")
    c.recv(1)
# The engine's work for the switch-over (the side channel's fds come in at the lowest free
# numbers before they are moved up) is over by then: a number taken meanwhile may be one higher.
time.sleep(0.3)
f = os.open("/dev/null", os.O_RDONLY)
r, w = os.pipe()
c2 = socket.create_connection(l.getsockname())
a2, _ = l.accept()
print("listener %d client %d accepted %d file %d pipe %d %d second %d %d" % (
    l.fileno(), c.fileno(), a.fileno(), f, r, w, c2.fileno(), a2.fileno()))
print("open below 100: %s" % sorted(n for n in map(int, os.listdir("/proc/self/fd")) if n < 100))
