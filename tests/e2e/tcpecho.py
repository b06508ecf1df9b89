#!/usr/bin/env python3
# tests/e2e/tcpecho.py — a TCP echo server for shell clients: echoes every connection until EOF.
#
#   tcpecho.py PORTFILE [4|6]
#
# Listens on an ephemeral loopback port, writes the port (and "\n") to PORTFILE atomically once
# listening, and serves connections in threads until killed.
import os
import socket
import sys
import threading


def serve(conn):
    with conn:
        while True:
            data = conn.recv(1 << 16)
            if not data:
                break
            conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)


def main():
    v6 = len(sys.argv) > 2 and sys.argv[2] == "6"
    lst = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("::1" if v6 else "127.0.0.1", 0))
    lst.listen(16)
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(tmp, sys.argv[1])
    while True:
        conn, _ = lst.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
