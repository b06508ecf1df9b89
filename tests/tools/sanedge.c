/*
 * tests/tools/sanedge — how a sender's process ends, as the reader sees it
 * (tests/e2e/t_edge_endings.sh).
 *
 * The same pair runs once over kernel TCP and once with both processes preloaded; the reader's one
 * line must be the same. Two roles:
 *
 *   sanedge read --port-file F [--accept | --connect PORT] [--hello] [--delay MS]
 *                [--wait block|poll|select|epoll|nonblock-spin] [--rsize N] [--slow-us U]
 *                [--timeout S]
 *     --accept (default): listen on 127.0.0.1 port 0, write the port to F, accept one connection.
 *     --connect PORT: connect to 127.0.0.1:PORT (the sender is the accepting side); F is unused.
 *     (Both roles use SANEDGE_ADDR instead of 127.0.0.1 when it is set: an IPv4 address of this
 *     host, the rxe device's in tests/rxe, where the connection is switched onto verbs.)
 *     --hello: send one byte first (the sender, given --hello too, reads it before sending). With
 *     the sender accepting, this makes the reader's first data call a send, so the connecting side
 *     proposes the switch before the sender can be gone (a switch is otherwise a race).
 *     Then sleep MS ms and read until the end, recv() of up to N bytes at a time (with poll, select
 *     or epoll the socket is nonblocking and the call waits before each recv; nonblock-spin retries
 *     EAGAIN with sched_yield), sleeping U us between reads. Every byte is checked against the
 *     pattern. Prints exactly one line on stdout:
 *       read bytes=N first_bad=-1|OFFSET end=EOF|<errno name>|TIMEOUT fnv=<FNV-1a 64> ms=T
 *     (fnv: of the bytes read; T: milliseconds from the connection to the end, informative: it is
 *     not the contract) and exits 0 (2 on a usage or set-up error). After S s (default 60) it
 *     gives up: end=TIMEOUT.
 *
 *   sanedge send (--port P | --listen-port-file F) [--hello] --bytes N [--chunk C] --end MODE
 *                [--timeout S] [--corrupt OFFSET] [--end-after MS] [--stay MS]
 *     Connect to 127.0.0.1:P (or listen on port 0, write the port to F and accept: the accepting
 *     side), send N bytes of the pattern in blocking send() calls of C bytes (partial sends
 *     looped), write "sent=N\n" to stdout with write(2) once the last send returned, then end as
 *     MODE says (the table `endings` below; `sanedge modes` lists them). Modes that leave a
 *     process behind for a while print "child=PID\n" (fork_parent_exit) so the test can wait for
 *     it. A send that fails prints "send_error=<errno name> at=OFFSET" and exits 1. --corrupt
 *     flips the byte at OFFSET (the test's check that a wrong byte is seen). --end-after sleeps MS ms
 *     between "sent=" and the ending, and --stay MS after the close of the ending "close" (an
 *     application that ends its side while the peer's switch-over is under way, and goes on
 *     living: tests/e2e/t_edge_midswitch.sh). A send stuck for S s
 *     (default 60) ends the process (SIGALRM).
 *
 * The pattern: the byte at stream offset i is byte i%8 of splitmix64(i/8 ^ seed): a function of i
 * with no period (a block repeated, dropped or shifted, by any amount, is seen).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEED 0x5a17ed6e0ddba115ULL

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* pat_fill — the pattern's bytes [off, off + len) into b. */
static void pat_fill(unsigned char *b, uint64_t off, size_t len)
{
	size_t k = 0;

	while (k < len) {
		uint64_t i = off + k, r = mix((i >> 3) ^ SEED);
		unsigned s;

		for (s = (unsigned)(i & 7); s < 8 && k < len; s++, k++)
			b[k] = (unsigned char)(r >> (8 * s));
	}
}

static void die(const char *what)
{
	fprintf(stderr, "sanedge: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sanedge read --port-file F [--accept|--connect PORT] [--hello]\n"
		"         [--delay MS] [--wait block|poll|select|epoll|nonblock-spin] [--rsize N]\n"
		"         [--slow-us U] [--timeout S]\n"
		"       sanedge send (--port P|--listen-port-file F) [--hello] --bytes N\n"
		"         [--chunk C] --end MODE [--timeout S] [--corrupt OFFSET]\n"
		"         [--end-after MS] [--stay MS]\n"
		"       sanedge modes\n");
	exit(2);
}

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	static char buf[24];

	if (n)
		return n;
	snprintf(buf, sizeof(buf), "errno%d", e);
	return buf;
}

static unsigned long long num(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		usage();
	return v;
}

/* write_port — the port into F, whole or not at all (a temp file renamed: the test polls F). */
static void write_port(const char *f, int lfd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char tmp[4096], line[16];
	int fd, n;

	if (getsockname(lfd, (struct sockaddr *)&sin, &len))
		die("getsockname");
	snprintf(tmp, sizeof(tmp), "%s.tmp", f);
	n = snprintf(line, sizeof(line), "%u\n", ntohs(sin.sin_port));
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) || rename(tmp, f))
		die("port file");
}

/* edge_addr — 127.0.0.1:PORT, or SANEDGE_ADDR:PORT (tests/rxe runs the cases over verbs). */
static struct sockaddr_in edge_addr(unsigned port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	const char *env = getenv("SANEDGE_ADDR");

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (env && *env && inet_pton(AF_INET, env, &sin.sin_addr) != 1) {
		fprintf(stderr, "sanedge: SANEDGE_ADDR=%s is not an IPv4 address\n", env);
		exit(2);
	}
	return sin;
}

/* listen_accept — listen on 127.0.0.1 (or SANEDGE_ADDR) port 0, publish the port, accept one
 * connection. */
static int listen_accept(const char *port_file)
{
	struct sockaddr_in sin = edge_addr(0);
	int l, c, one = 1;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 1))
		die("bind/listen");
	write_port(port_file, l);
	/* not accept4(SOCK_CLOEXEC): the exec mode needs the fd inherited */
	do
		c = accept(l, NULL, NULL);
	while (c < 0 && errno == EINTR);
	if (c < 0)
		die("accept");
	close(l);
	return c;
}

static int connect_to(unsigned port)
{
	struct sockaddr_in sin = edge_addr(port);
	int c;

	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		die("socket");
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect");
	return c;
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK))
		die("fcntl");
}

/* ------------------------------------------------------------------------------ reader */

/* The reader's progress, also read by the timeout handler. */
static volatile uint64_t r_bytes, r_fnv = 0xcbf29ce484222325ULL;
static volatile int64_t r_bad = -1;
static volatile sig_atomic_t r_timed_out;
static struct timespec r_t0; /* connected */

/* A signal-safe formatter for the one line (the timeout handler prints it too). */
struct obuf {
	char b[160];
	size_t n;
};

static void o_str(struct obuf *o, const char *s)
{
	while (*s && o->n < sizeof(o->b) - 1)
		o->b[o->n++] = *s++;
}

static void o_u64(struct obuf *o, uint64_t v, unsigned base)
{
	char t[24];
	int k = 0;

	do {
		t[k++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (k && o->n < sizeof(o->b) - 1)
		o->b[o->n++] = t[--k];
}

static void print_line(const char *end)
{
	struct obuf o = { .n = 0 };
	int64_t bad = r_bad;
	struct timespec t;

	o_str(&o, "read bytes=");
	o_u64(&o, r_bytes, 10);
	o_str(&o, " first_bad=");
	if (bad < 0)
		o_str(&o, "-1");
	else
		o_u64(&o, (uint64_t)bad, 10);
	o_str(&o, " end=");
	o_str(&o, end);
	o_str(&o, " fnv=");
	o_u64(&o, r_fnv, 16);
	if (clock_gettime(CLOCK_MONOTONIC, &t) == 0) {
		o_str(&o, " ms=");
		int64_t ms = (int64_t)(t.tv_sec - r_t0.tv_sec) * 1000 +
			     (t.tv_nsec - r_t0.tv_nsec) / 1000000;

		o_u64(&o, (uint64_t)ms, 10);
	}
	o_str(&o, "\n");
	if (write(1, o.b, o.n) < 0)
		_exit(2);
}

/* SIGALRM: the first one asks the loop to stop (the wait returns EINTR: no SA_RESTART); if the
 * loop has not printed within 2 s more (a wait that does not return), print from here and go. */
static void on_alarm(int sig)
{
	if (!r_timed_out) {
		r_timed_out = 1;
		alarm(2);
		return;
	}
	print_line("TIMEOUT");
	_exit(0);
}

enum waitk { W_BLOCK, W_POLL, W_SELECT, W_EPOLL, W_SPIN };

/* wait_readable — 0 when the fd may be read (or has an error/EOF to give), -1 on EINTR. */
static int wait_readable(int fd, enum waitk w, int ep)
{
	int r;

	switch (w) {
	case W_POLL: {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		r = poll(&p, 1, 1000);
		break;
	}
	case W_SELECT: {
		fd_set rs;
		struct timeval tv = { .tv_sec = 1 };
		FD_ZERO(&rs);
		FD_SET(fd, &rs);
		r = select(fd + 1, &rs, NULL, NULL, &tv);
		break;
	}
	case W_EPOLL: {
		struct epoll_event ev;
		r = epoll_wait(ep, &ev, 1, 1000);
		break;
	}
	case W_SPIN:
		sched_yield();
		return 0;
	default:
		return 0;
	}
	if (r < 0 && errno != EINTR)
		die("wait");
	return r < 0 ? -1 : 0; /* a wait that timed out just loops (the alarm bounds the whole) */
}

static int do_read(int argc, char **argv)
{
	const char *port_file = NULL, *wname = "block";
	unsigned long long cport = 0, delay = 0, rsize = 65536, slow = 0, tmo = 60;
	int hello = 0, i, fd, ep = -1;
	enum waitk w;
	unsigned char *buf, *want;
	struct sigaction sa;
	const char *end = NULL;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--accept"))
			cport = 0;
		else if (!strcmp(a, "--hello"))
			hello = 1;
		else if (!v)
			usage();
		else if (!strcmp(a, "--port-file"))
			port_file = v, i++;
		else if (!strcmp(a, "--connect"))
			cport = num(v), i++;
		else if (!strcmp(a, "--delay"))
			delay = num(v), i++;
		else if (!strcmp(a, "--wait"))
			wname = v, i++;
		else if (!strcmp(a, "--rsize"))
			rsize = num(v), i++;
		else if (!strcmp(a, "--slow-us"))
			slow = num(v), i++;
		else if (!strcmp(a, "--timeout"))
			tmo = num(v), i++;
		else
			usage();
	}
	if (!strcmp(wname, "block"))
		w = W_BLOCK;
	else if (!strcmp(wname, "poll"))
		w = W_POLL;
	else if (!strcmp(wname, "select"))
		w = W_SELECT;
	else if (!strcmp(wname, "epoll"))
		w = W_EPOLL;
	else if (!strcmp(wname, "nonblock-spin"))
		w = W_SPIN;
	else
		usage();
	if ((!cport && !port_file) || !rsize || !tmo)
		usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: the wait or recv returns EINTR */
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)tmo);

	buf = malloc(rsize);
	want = malloc(rsize);
	if (!buf || !want)
		die("malloc");
	fd = cport ? connect_to((unsigned)cport) : listen_accept(port_file);
	clock_gettime(CLOCK_MONOTONIC, &r_t0);
	if (hello && send(fd, "h", 1, 0) != 1)
		die("hello");
	if (delay)
		usleep((useconds_t)(delay * 1000));
	if (w != W_BLOCK)
		set_nonblock(fd, 1);
	if (w == W_SELECT && fd >= FD_SETSIZE)
		die("select: fd too large");
	if (w == W_EPOLL) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
			die("epoll");
	}

	while (!end) {
		ssize_t n;
		uint64_t h;

		if (r_timed_out) {
			end = "TIMEOUT";
			break;
		}
		if (wait_readable(fd, w, ep) < 0)
			continue;
		n = recv(fd, buf, rsize, 0);
		if (n == 0) {
			end = "EOF";
			break;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			end = errname(errno);
			break;
		}
		if (r_bad < 0) {
			pat_fill(want, r_bytes, (size_t)n);
			if (memcmp(buf, want, (size_t)n)) {
				ssize_t k = 0;
				while (buf[k] == want[k])
					k++;
				r_bad = (int64_t)(r_bytes + (uint64_t)k);
			}
		}
		h = r_fnv;
		for (ssize_t k = 0; k < n; k++) {
			h ^= buf[k];
			h *= 0x100000001b3ULL;
		}
		r_fnv = h;
		r_bytes += (uint64_t)n;
		if (slow)
			usleep((useconds_t)slow);
	}
	alarm(0);
	print_line(end);
	if (ep >= 0)
		close(ep);
	close(fd);
	free(buf);
	free(want);
	return 0;
}

/* ------------------------------------------------------------------------------ sender */

/* How the sender's process ends, right after its last send returned (and "sent=N" was written).
 * To add one: a function and a row. */
/* --stay: the process lives on this long after a close (a server that goes on serving) */
static unsigned long long stay_ms;

static void nap_ms(unsigned long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	/* (none asked, the usual case: no system call) */
	while (ms && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void end_close(int fd)
{
	close(fd);
	nap_ms(stay_ms);
	exit(0);
}

static void end_exit(int fd)
{
	exit(0);
}

static void end__exit(int fd)
{
	_exit(0);
}

static void end_exit_group(int fd)
{
	syscall(SYS_exit_group, 0);
}

static void end_shutwr_exit(int fd)
{
	shutdown(fd, SHUT_WR);
	_exit(0);
}

/* The file-copy program pattern: half-close, then both, then exit without close(). */
static void end_shutwr_rdwr_exit(int fd)
{
	shutdown(fd, SHUT_WR);
	shutdown(fd, SHUT_RDWR);
	exit(0);
}

static void end_kill(int fd)
{
	raise(SIGKILL);
}

static void no_core(void)
{
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
	/* A piped core_pattern ignores RLIMIT_CORE; a process that is not dumpable dumps nothing.
	 * (Only now: it would also refuse the peer's process_vm_readv of our buffers.) */
	prctl(PR_SET_DUMPABLE, 0);
}

/* The null store is the point: UBSan (make SANITIZE=undefined) must let it fault, not abort. */
__attribute__((no_sanitize("null"))) static void end_crash(int fd)
{
	no_core();
	*(volatile int *)(uintptr_t)0 = 1;
}

static void end_abort(int fd)
{
	no_core();
	abort();
}

/* The fd is not close-on-exec: /bin/sleep holds it for 1 s and exits. */
static void end_exec(int fd)
{
	char *av[] = { "sleep", "1", NULL };

	execv("/bin/sleep", av);
	_exit(3);
}

static void say_child(pid_t pid)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "child=%d\n", (int)pid);

	if (write(1, b, (size_t)n) != n)
		_exit(3);
}

/* The parent goes at once; the child keeps the fd 1.5 s, then exits (without close). */
static void end_fork_parent_exit(int fd)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		usleep(1500 * 1000);
		exit(0);
	}
	say_child(pid);
	_exit(0);
}

/* The child closes its copy and exits at once; then the parent closes and exits. */
static void end_fork_child_close(int fd)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(fd);
		exit(0);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(fd);
	exit(0);
}

/* An abortive close: TCP resets the connection. */
static void end_linger0(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		die("SO_LINGER");
	close(fd);
	exit(0);
}

static const struct ending {
	const char *name;
	void (*fn)(int fd);
} endings[] = {
	{ "close", end_close },
	{ "exit", end_exit },
	{ "_exit", end__exit },
	{ "exit_group", end_exit_group },
	{ "shutwr_exit", end_shutwr_exit },
	{ "shutwr_rdwr_exit", end_shutwr_rdwr_exit },
	{ "kill", end_kill },
	{ "crash", end_crash },
	{ "abort", end_abort },
	{ "exec", end_exec },
	{ "fork_parent_exit", end_fork_parent_exit },
	{ "fork_child_close", end_fork_child_close },
	{ "linger0", end_linger0 },
};

static int do_send(int argc, char **argv)
{
	const char *lpf = NULL, *mode = NULL;
	unsigned long long port = 0, bytes = 0, chunk = 8192, tmo = 60, off = 0, corrupt = ~0ULL;
	unsigned long long end_after = 0;
	const struct ending *e = NULL;
	int hello = 0, i, fd, n;
	unsigned char *buf;
	char line[48];

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--hello"))
			hello = 1;
		else if (!v)
			usage();
		else if (!strcmp(a, "--port"))
			port = num(v), i++;
		else if (!strcmp(a, "--listen-port-file"))
			lpf = v, i++;
		else if (!strcmp(a, "--bytes"))
			bytes = num(v), i++;
		else if (!strcmp(a, "--chunk"))
			chunk = num(v), i++;
		else if (!strcmp(a, "--end"))
			mode = v, i++;
		else if (!strcmp(a, "--timeout"))
			tmo = num(v), i++;
		else if (!strcmp(a, "--corrupt"))
			corrupt = num(v), i++;
		else if (!strcmp(a, "--end-after"))
			end_after = num(v), i++;
		else if (!strcmp(a, "--stay"))
			stay_ms = num(v), i++;
		else
			usage();
	}
	for (i = 0; mode && i < (int)(sizeof(endings) / sizeof(endings[0])); i++)
		if (!strcmp(endings[i].name, mode))
			e = &endings[i];
	if (!e || !chunk || (!port == !lpf) || !tmo)
		usage();
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)tmo); /* default action: a sender stuck in send() goes */
	buf = malloc(chunk);
	if (!buf)
		die("malloc");
	fd = lpf ? listen_accept(lpf) : connect_to((unsigned)port);
	if (hello) {
		char h;
		ssize_t r;

		do
			r = recv(fd, &h, 1, 0);
		while (r < 0 && errno == EINTR);
		if (r != 1)
			die("hello");
	}
	while (off < bytes) {
		size_t len = bytes - off < chunk ? (size_t)(bytes - off) : (size_t)chunk, done = 0;

		pat_fill(buf, off, len);
		if (corrupt >= off && corrupt - off < len)
			buf[corrupt - off] ^= 0x5a;
		while (done < len) {
			ssize_t r = send(fd, buf + done, len - done, 0);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				n = snprintf(line, sizeof(line), "send_error=%s at=%llu\n",
					     r < 0 ? errname(errno) : "zero", off + done);
				if (write(1, line, (size_t)n) < 0)
					_exit(1);
				exit(1);
			}
			done += (size_t)r;
		}
		off += len;
	}
	alarm(0);
	n = snprintf(line, sizeof(line), "sent=%llu\n", off);
	if (write(1, line, (size_t)n) != n)
		_exit(3);
	free(buf);
	nap_ms(end_after);
	e->fn(fd);
	_exit(4); /* a mode that returned: not what it says */
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "read"))
		return do_read(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "send"))
		return do_send(argc - 2, argv + 2);
	if (argc == 2 && !strcmp(argv[1], "modes")) {
		for (size_t i = 0; i < sizeof(endings) / sizeof(endings[0]); i++)
			printf("%s\n", endings[i].name);
		return 0;
	}
	usage();
	return 2;
}
