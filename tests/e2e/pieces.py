#!/usr/bin/env python3
"""pieces.py — a client that reads one reply in pieces and acknowledges each (t_switch_policy).

    pieces.py server PORTFILE CONNS N   one connection at a time: read "go\\n", answer with one
                                        send of N pieces of 10 bytes, read the N acknowledgements
                                        (3 bytes each) until the client closes
    pieces.py client PORT CONNS N       CONNS connections: send "go\\n", then read the reply 10
                                        bytes at a time and send "ack" after each piece

The client's exchanges (a send after bytes of the server's came) are its acknowledgements, while
the server has made one send: the server cannot count them, and its receive of the
acknowledgements may be asleep in the kernel when the client proposes. Every byte is checked;
exit 1 at the first wrong one. Each process prints "# pid P ROLE" first.
"""
import os
import socket
import sys


def rx(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError("the peer closed after %d of %d bytes" % (len(b), n))
        b += d
    return b


def piece(c, i):
    return b"%03d:%05d\n" % (c % 1000, i)


def server(portfile, conns, n):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", 0))
    l.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(l.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    for c in range(conns):
        s, _ = l.accept()
        if rx(s, 3) != b"go\n":
            sys.exit("server: bad request on connection %d" % c)
        s.sendall(b"".join(piece(c, i) for i in range(n)))
        got = b""
        while True:
            d = s.recv(100)
            if not d:
                break
            got += d
        if got != b"ack" * n:
            sys.exit("server: connection %d: %d bytes of acknowledgements, want %d" % (c, len(got), 3 * n))
        s.close()


def client(port, conns, n):
    for c in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"go\n")
        for i in range(n):
            if rx(s, 10) != piece(c, i):
                sys.exit("client: connection %d: piece %d is wrong" % (c, i))
            s.sendall(b"ack")
        s.close()
    print("client ok conns=%d" % conns)


def main():
    role = sys.argv[1]
    print("# pid %d %s" % (os.getpid(), role), flush=True)
    if role == "server":
        server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))


if __name__ == "__main__":
    main()
