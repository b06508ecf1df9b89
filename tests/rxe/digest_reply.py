# tests/rxe/digest_reply.py — the exchange that relisten.py ends its connections with: the client
# sends its stream and shuts down its side, the server answers with the SHA-256 of everything it
# read, a line, and the client compares it with its own. (quick_listen.py reads its server's
# answer, build/sanquick's CRC-32, with read() too.)
import hashlib


def answer(conn):
    """Read conn to EOF, answer with the hex SHA-256 of what came (a line), close it."""
    h = hashlib.sha256()
    while True:
        b = conn.recv(1 << 17)
        if not b:
            break
        h.update(b)
    conn.sendall(h.hexdigest().encode() + b"\n")
    conn.close()


def read(s):
    """After the stream and shutdown(SHUT_WR): the server's answer, a str; s closed."""
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(128)
        if not b:
            break
        got += b
    s.close()
    return got.decode(errors="replace").strip()
