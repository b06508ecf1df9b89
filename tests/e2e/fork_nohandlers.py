"""fork_nohandlers.py: a switched connection survives a _Fork() child (no fork handlers) closing its copy (t_fdtable)."""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
if not hasattr(libc, "_Fork"):
    print("skip")
    raise SystemExit(0)
rfd, wfd = os.pipe()
srv = os.fork()
if srv == 0:  # the server: its own process, its own listener
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(1)
    os.write(wfd, b"%d\n" % l.getsockname()[1])
    a, _ = l.accept()
    while True:
        d = a.recv(4096)
        if not d:
            os._exit(0)
        a.sendall(d)
os.close(wfd)
port = int(os.read(rfd, 64))
addr = ("127.0.0.1", port)
c = socket.create_connection(addr)
def echo(m):
    c.sendall(m)
    got = b""
    while len(got) < len(m):
        d = c.recv(4096)
        if not d:
            return got + b"<EOF>"
        got += d
    return got
before = [echo(b"ping%d" % i) for i in range(3)]
pid = libc._Fork()
if pid == 0:
    os.close(c.fileno())
    os._exit(0)
os.waitpid(pid, 0)
after = [echo(b"pong%d" % i) for i in range(3)]
print("ok" if before == [b"ping0", b"ping1", b"ping2"] and after == [b"pong0", b"pong1", b"pong2"]
      else "bad %r %r" % (before, after))
c.close()
os.waitpid(srv, 0)
