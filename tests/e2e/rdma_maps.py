#!/usr/bin/env python3
# tests/e2e/rdma_maps.py — which of rdma-core's libraries this process maps, for the checks that
# the preload loads them only when the verbs provider needs them (core/san_rdma_syms.c).
#
#   rdma_maps.py [--idle] [ADDR]
#
# Listens on ADDR (default 127.0.0.1; a listener is where the verbs provider first looks for
# rdma_cm), connects to itself and moves a few bytes each way, then prints the names among
# "libibverbs librdmacm" that /proc/self/maps holds, or "none". --idle: no socket at all.
import socket
import sys


def main():
    args = sys.argv[1:]
    if not args or args[0] != "--idle":
        addr = args[0] if args else "127.0.0.1"
        lst = socket.socket()
        lst.bind((addr, 0))
        lst.listen(1)
        cli = socket.create_connection(lst.getsockname())
        srv, _ = lst.accept()
        for _ in range(3):
            cli.sendall(b"x" * 100)
            srv.recv(4096)
            srv.sendall(b"y" * 100)
            cli.recv(4096)
    with open("/proc/self/maps") as f:
        maps = f.read()
    print(" ".join(n for n in ("libibverbs", "librdmacm") if n in maps) or "none")


if __name__ == "__main__":
    main()
