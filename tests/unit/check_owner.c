/* tests/unit: core/san_owner — tuples, inodes, sock_diag and /proc lookups, the ownership proof. */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/san_owner.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_addr.h"

/* ---- real sockets ----------------------------------------------------- */

/*
 * The address-family combinations a connection can have on one host:
 *   V4          AF_INET listener on 127.0.0.1, AF_INET client
 *   V6          AF_INET6 on ::1 both sides
 *   MAPPED_SRV  dual-stack AF_INET6 listener on ::, AF_INET client: the
 *               accepted socket sees ::ffff:127.0.0.1
 *   MAPPED_CLI  AF_INET listener, AF_INET6 client to ::ffff:127.0.0.1
 */
enum { CFG_V4, CFG_V6, CFG_MAPPED_SRV, CFG_MAPPED_CLI, NR_CFG };

static const char *const cfg_name[NR_CFG] = { "v4", "v6", "mapped-srv", "mapped-cli" };

static int cfg_listen(int cfg, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, off = 0, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (cfg == CFG_V6 || cfg == CFG_MAPPED_SRV) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		s6->sin6_family = AF_INET6;
		if (cfg == CFG_V6)
			s6->sin6_addr = in6addr_loopback;
		else
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*s4);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1024)) {
		close(fd);
		return -1;
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int cfg_connect(int cfg, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	memset(&ss, 0, sizeof(ss));
	if (cfg == CFG_V6 || cfg == CFG_MAPPED_CLI) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (cfg == CFG_V6)
			s6->sin6_addr = in6addr_loopback;
		else
			inet_pton(AF_INET6, "::ffff:127.0.0.1", &s6->sin6_addr);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*s4);
	}
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A connected pair in this process: listener, client, accepted. */
struct pair {
	int lfd, cfd, sfd;
	uint16_t port;
};

static void pair_open(int cfg, struct pair *p)
{
	p->lfd = cfg_listen(cfg, &p->port);
	ck_assert_msg(p->lfd >= 0, "%s: listen: %s", cfg_name[cfg], strerror(errno));
	p->cfd = cfg_connect(cfg, p->port);
	ck_assert_msg(p->cfd >= 0, "%s: connect: %s", cfg_name[cfg], strerror(errno));
	p->sfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(p->sfd, 0);
}

static void pair_close(struct pair *p)
{
	close(p->cfd);
	close(p->sfd);
	close(p->lfd);
}

static bool addr_eq(const struct san_addr *a, const struct san_addr *b)
{
	return a->port == b->port && !memcmp(a->addr, b->addr, 16);
}

static uint64_t inode_of(int fd)
{
	uint64_t ino = 0;

	ck_assert_int_eq(san_owner_inode(fd, &ino), 0);
	ck_assert_uint_ne(ino, 0);
	return ino;
}

/* ---- helper processes --------------------------------------------------- */

/*
 * A child process that holds one end of a connection until told to go
 * (its "stay" pipe closes). It reports through a pipe: its port (listening
 * kind) and the fd number it holds the connection at. Children never call
 * ck_assert: they exit with a code the parent checks.
 */
struct holder {
	pid_t pid;
	int stay_w;   /* close to let the child exit */
	int report_r; /* the child writes here */
	int fd;	      /* fd number of the connection in the child */
	uint16_t port;
};

static void holder_wait_stay(int stay_r)
{
	char c;

	while (read(stay_r, &c, 1) > 0)
		;
}

static void holder_spawn(struct holder *h, int (*body)(int cfg, uint16_t port, int report_w),
			 int cfg, uint16_t port)
{
	int stay[2], report[2];

	ck_assert_int_eq(pipe2(stay, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(report, O_CLOEXEC), 0);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		int r;

		close(stay[1]);
		close(report[0]);
		r = body(cfg, port, report[1]);
		if (r == 0)
			holder_wait_stay(stay[0]);
		_exit(r);
	}
	close(stay[0]);
	close(report[1]);
	h->stay_w = stay[1];
	h->report_r = report[0];
}

static void holder_read(struct holder *h, void *buf, size_t len)
{
	ck_assert_int_eq(read(h->report_r, buf, len), (ssize_t)len);
}

/* Let the child go and reap it; returns its exit status. */
static int holder_stop(struct holder *h)
{
	int st;

	close(h->stay_w);
	close(h->report_r);
	ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Child: connect to the parent's listener, report the fd, hold it. */
static int body_connect(int cfg, uint16_t port, int report_w)
{
	int fd = cfg_connect(cfg, port);

	if (fd < 0)
		return 10;
	return write(report_w, &fd, sizeof(fd)) == sizeof(fd) ? 0 : 11;
}

/* Child: listen, report the port, accept one connection, report its fd, hold it. */
static int body_listen(int cfg, uint16_t unused, int report_w)
{
	uint16_t port;
	int lfd = cfg_listen(cfg, &port), fd;

	if (lfd < 0)
		return 20;
	if (write(report_w, &port, sizeof(port)) != sizeof(port))
		return 21;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 22;
	close(lfd);
	return write(report_w, &fd, sizeof(fd)) == sizeof(fd) ? 0 : 23;
}

/* Child: hold nothing. */
static int body_idle(int cfg, uint16_t port, int report_w)
{
	int zero = 0;

	return write(report_w, &zero, sizeof(zero)) == sizeof(zero) ? 0 : 30;
}

/* Child: connect, then fork a grandchild that inherits the socket while the child closes it. */
static int body_connect_handoff(int cfg, uint16_t port, int report_w)
{
	int fd = cfg_connect(cfg, port);
	pid_t gc;

	if (fd < 0)
		return 40;
	gc = fork();
	if (gc < 0)
		return 41;
	if (gc == 0) {
		/* Hold the inherited socket until the test kills us. */
		for (;;)
			pause();
	}
	close(fd);
	return write(report_w, &gc, sizeof(gc)) == sizeof(gc) ? 0 : 42;
}

/* ---- tuples and inodes -------------------------------------------------- */

START_TEST(test_tuple)
{
	struct san_tuple c, s, r;
	struct san_addr lo;
	struct pair p;

	pair_open(_i, &p);
	ck_assert_int_eq(san_owner_tuple(p.cfd, &c), 0);
	ck_assert_int_eq(san_owner_tuple(p.sfd, &s), 0);
	/* Both ends' views agree once reversed, whatever the socket families. */
	san_tuple_reverse(&c, &r);
	ck_assert(addr_eq(&r.local, &s.local));
	ck_assert(addr_eq(&r.peer, &s.peer));
	unit_addr_set(&lo, _i == CFG_V6 ? "::1" : "127.0.0.1", p.port);
	ck_assert(addr_eq(&c.peer, &lo));
	ck_assert(addr_eq(&s.local, &lo));
	ck_assert_int_eq(san_addr_is_v4(&c.local), _i != CFG_V6);
	ck_assert_uint_ne(c.local.port, 0);
	ck_assert_uint_ne(inode_of(p.cfd), inode_of(p.sfd));
	pair_close(&p);
}
END_TEST

START_TEST(test_tuple_errors)
{
	struct san_tuple t;
	uint64_t ino;
	int pfd[2], sv[2], fd;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	errno = 1234;
	ck_assert_int_eq(san_owner_tuple(fd, &t), -ENOTCONN);
	ck_assert_int_eq(san_owner_tuple(pfd[0], &t), -ENOTSOCK);
	ck_assert_int_eq(san_owner_tuple(sv[0], &t), -EAFNOSUPPORT);
	ck_assert_int_eq(san_owner_tuple(-1, &t), -EBADF);
	ck_assert_int_eq(san_owner_inode(pfd[0], &ino), -ENOTSOCK);
	ck_assert_int_eq(san_owner_inode(-1, &ino), -EBADF);
	ck_assert_int_eq(errno, 1234); /* errno is never touched */
	close(fd);
	close(pfd[0]);
	close(pfd[1]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- lookups on real sockets, every method ------------------------------ */

typedef int (*lookup_fn)(const struct san_tuple *, uint64_t *);

static const struct {
	const char *name;
	lookup_fn fn;
} lookups[] = {
	{ "diag", san_owner_diag_lookup },
	{ "proc", san_owner_proc_lookup },
	{ "find", san_owner_find_inode },
};
#define NR_LOOKUPS (int)(sizeof(lookups) / sizeof(lookups[0]))

START_TEST(test_lookup)
{
	int cfg = _i / NR_LOOKUPS, m = _i % NR_LOOKUPS;
	lookup_fn fn = lookups[m].fn;
	struct san_tuple c, s, x;
	uint64_t ino;
	struct pair p;

	pair_open(cfg, &p);
	ck_assert_int_eq(san_owner_tuple(p.cfd, &c), 0);
	ck_assert_int_eq(san_owner_tuple(p.sfd, &s), 0);
	ino = 0;
	ck_assert_msg(fn(&c, &ino) == 0 && ino == inode_of(p.cfd), "%s/%s: client", cfg_name[cfg],
		      lookups[m].name);
	ck_assert_msg(fn(&s, &ino) == 0 && ino == inode_of(p.sfd), "%s/%s: server", cfg_name[cfg],
		      lookups[m].name);
	/* The far end of the client is the accepted socket. */
	san_tuple_reverse(&c, &x);
	ck_assert_int_eq(fn(&x, &ino), 0);
	ck_assert_uint_eq(ino, inode_of(p.sfd));
	/* No connection with that tuple: the listener on the port must not answer. */
	x = s;
	x.peer.port = 1;
	ck_assert_int_eq(fn(&x, &ino), -ENOENT);
	x = c;
	x.local.port = 0;
	ck_assert_int_eq(fn(&x, &ino), -EINVAL);
	pair_close(&p);
}
END_TEST

/* A connection not accepted yet has no socket inode on the listening side: -EAGAIN. */
START_TEST(test_lookup_accept_queue)
{
	int cfg = _i / NR_LOOKUPS, m = _i % NR_LOOKUPS;
	struct san_tuple c, x;
	uint64_t ino;
	uint16_t port;
	int lfd, cfd;

	lfd = cfg_listen(cfg, &port);
	cfd = cfg_connect(cfg, port);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(san_owner_tuple(cfd, &c), 0);
	san_tuple_reverse(&c, &x);
	ck_assert_int_eq(lookups[m].fn(&x, &ino), -EAGAIN);
	close(cfd);
	close(lfd);
}
END_TEST

/* After the client closes, its end is an orphan (FIN_WAIT2): nobody holds it. */
START_TEST(test_lookup_orphan)
{
	int m = _i;
	struct san_tuple s, x;
	struct pair p;
	uint64_t ino;

	pair_open(CFG_V4, &p);
	ck_assert_int_eq(san_owner_tuple(p.sfd, &s), 0);
	close(p.cfd);
	san_tuple_reverse(&s, &x);
	ck_assert_int_eq(lookups[m].fn(&x, &ino), -ENOENT);
	close(p.sfd);
	close(p.lfd);
}
END_TEST

/* ---- the /proc row parser on synthetic lines ---------------------------- */

/* Print an address the way the kernel does: each 32-bit word %08X of its in-memory value. */
static void fmt_v4(char *buf, size_t cap, const char *ip, uint16_t port)
{
	struct in_addr a;
	uint32_t w;

	inet_pton(AF_INET, ip, &a);
	memcpy(&w, &a, 4);
	snprintf(buf, cap, "%08X:%04X", w, port);
}

static void fmt_v6(char *buf, size_t cap, const char *ip, uint16_t port)
{
	struct in6_addr a;
	uint32_t w[4];

	inet_pton(AF_INET6, ip, &a);
	memcpy(w, &a, 16);
	snprintf(buf, cap, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], port);
}

/* A line as tcp4_seq_show()/tcp6_seq_show() prints it. */
static void fmt_row(char *buf, size_t cap, bool v6, const char *lip, uint16_t lport,
		    const char *rip, uint16_t rport, unsigned int st, unsigned int uid,
		    unsigned long inode)
{
	char l[64], r[64];

	if (v6) {
		fmt_v6(l, sizeof(l), lip, lport);
		fmt_v6(r, sizeof(r), rip, rport);
	} else {
		fmt_v4(l, sizeof(l), lip, lport);
		fmt_v4(r, sizeof(r), rip, rport);
	}
	snprintf(buf, cap,
		 "%4d: %s %s %02X %08X:%08X %02X:%08lX %08X %5u %8d %lu %d %016lX %lu %lu %u %u %d",
		 7, l, r, st, 0, 0, 0, 0ul, 0, uid, 0, inode, 1, 0ul, 20ul, 4ul, 30u, 10u, -1);
}

START_TEST(test_parse_row_valid)
{
	struct san_tcp_row row;
	struct san_addr want;
	char line[256];

	fmt_row(line, sizeof(line), false, "127.0.0.1", 8080, "10.1.2.3", 50000, TCP_ESTABLISHED,
		1000, 123456);
	ck_assert_int_eq(san_owner_parse_tcp_row(line, strlen(line), false, &row), 0);
	unit_addr_set(&want, "127.0.0.1", 8080);
	ck_assert(addr_eq(&row.local, &want));
	unit_addr_set(&want, "10.1.2.3", 50000);
	ck_assert(addr_eq(&row.peer, &want));
	ck_assert_uint_eq(row.state, TCP_ESTABLISHED);
	ck_assert_uint_eq(row.uid, 1000);
	ck_assert_uint_eq(row.inode, 123456);

	fmt_row(line, sizeof(line), true, "::1", 443, "::ffff:192.168.7.9", 1, TCP_CLOSE_WAIT, 0,
		4294967296ul);
	ck_assert_int_eq(san_owner_parse_tcp_row(line, strlen(line), true, &row), 0);
	unit_addr_set(&want, "::1", 443);
	ck_assert(addr_eq(&row.local, &want));
	unit_addr_set(&want, "192.168.7.9", 1); /* mapped: the same 16 bytes as an IPv4 row */
	ck_assert(addr_eq(&row.peer, &want));
	ck_assert_uint_eq(row.state, TCP_CLOSE_WAIT);
	ck_assert_uint_eq(row.inode, 4294967296ull);

	fmt_row(line, sizeof(line), true, "fe80::1:2:3:4", 65535, "2001:db8::8", 2, TCP_LISTEN,
		4294967295u, 0);
	ck_assert_int_eq(san_owner_parse_tcp_row(line, strlen(line), true, &row), 0);
	unit_addr_set(&want, "fe80::1:2:3:4", 65535);
	ck_assert(addr_eq(&row.local, &want));
	ck_assert_uint_eq(row.uid, 4294967295u);
	ck_assert_uint_eq(row.state, TCP_LISTEN);

	/* A real kernel header is not a row; lowercase hex is accepted. */
	strcpy(line, "   3: 0100007f:1f90 0100007f:c350 01 00000000:00000000 00:00000000 "
		     "00000000  1000        0 99 1 0000000000000000 20 4 30 10 -1");
	ck_assert_int_eq(san_owner_parse_tcp_row(line, strlen(line), false, &row), 0);
	ck_assert_uint_eq(row.local.port, 8080);
	ck_assert_uint_eq(row.inode, 99);
}
END_TEST

/* Every cut of a valid line up to and including the blank after its inode is rejected. */
START_TEST(test_parse_row_prefixes)
{
	struct san_tcp_row row;
	char line[256];
	size_t len, inode_end;
	bool v6 = _i;

	fmt_row(line, sizeof(line), v6, v6 ? "::1" : "127.0.0.1", 1, v6 ? "::2" : "127.0.0.2", 2,
		TCP_ESTABLISHED, 0, 77777);
	len = strlen(line);
	inode_end = (size_t)(strstr(line, " 77777 ") - line) + 7;
	for (size_t n = 0; n <= inode_end; n++)
		ck_assert_msg(san_owner_parse_tcp_row(line, n, v6, &row) == -EINVAL,
			      "prefix %zu accepted", n);
	ck_assert_int_eq(san_owner_parse_tcp_row(line, len, v6, &row), 0);
	ck_assert_uint_eq(row.inode, 77777);
}
END_TEST

static const struct {
	bool v6;
	const char *line;
} bad_rows[] = {
	{ false, "" },
	{ false,
	  "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid "
	  " timeout inode" },
	{ true, "  sl  local_address                         remote_address                        "
		"st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode" },
	{ false, "   0: 0100007F:1F90" },
	{ false, "   0: 0100007G:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 "
		 "5 1" },
	{ false, "   0: 100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 5 "
		 "1" },
	{ false, "   0: 0100007F:1F9 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 5 "
		 "1" },
	{ false, "   0 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 5 "
		 "1" },
	{ false, "   0: 0100007F:1F900100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 5 "
		 "1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 00 00000000:00000000 00:00000000 00000000 0 0 "
		 "5 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 0C 00000000:00000000 00:00000000 00000000 0 0 "
		 "5 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 "
		 "99999999999 0 5 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 "
		 "abc 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 "
		 "123x 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 "
		 "99999999999999999999999 1" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 "
		 "5" },
	{ false, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 0 0 5 1" },
	{ true, "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 0 0 5 "
		"1" },
	{ false,
	  "   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 "
	  "01 00000000:00000000 00:00000000 00000000 0 0 5 1" },
	{ false, "\x01\x02\xff\xfe garbage \x7f" },
	{ false, "::::::::::::::::::::::::::::::::::::::::::" },
};

START_TEST(test_parse_row_bad)
{
	struct san_tcp_row row;

	ck_assert_msg(san_owner_parse_tcp_row(bad_rows[_i].line, strlen(bad_rows[_i].line),
					      bad_rows[_i].v6, &row) == -EINVAL,
		      "accepted: \"%s\"", bad_rows[_i].line);
}
END_TEST

/* Binary garbage, NULs included, of every length: rejected, never read past len. */
START_TEST(test_parse_row_garbage)
{
	struct san_tcp_row row;
	unsigned int seed = 12345;
	char buf[300];

	for (int n = 0; n < 20000; n++) {
		size_t len = (size_t)(rand_r(&seed) % sizeof(buf));
		char *heap = malloc(len ? len : 1);

		for (size_t i = 0; i < len; i++)
			buf[i] = (char)rand_r(&seed);
		memcpy(heap, buf, len);
		ck_assert_int_eq(san_owner_parse_tcp_row(heap, len, n & 1, &row), -EINVAL);
		free(heap);
	}
}
END_TEST

/* ---- the streaming file reader ----------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/*
 * A file of 2000 rows with malformed lines, an overlong line (bigger than
 * the reader's buffer) that looks like the target, an inode-0 row in the
 * accept-queue state before the real one, and the target last without a
 * trailing newline: the reader's buffer boundaries fall everywhere.
 */
START_TEST(test_proc_file)
{
	char path[] = "/tmp/san_owner_tcpXXXXXX", row[256];
	size_t cap = 1 << 20, used = 0;
	char *text = malloc(cap);
	struct san_tuple t;
	uint64_t ino;
	int fd;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	unit_addr_set(&t.local, "10.0.0.1", 4000);
	unit_addr_set(&t.peer, "10.0.0.2", 5000);
	t.scope_id = 0;

	used += (size_t)snprintf(text + used, cap - used,
				 "  sl  local_address rem_address   st tx_queue rx_queue tr "
				 "tm->when retrnsmt   uid  timeout inode\n");
	for (int i = 0; i < 2000; i++) {
		fmt_row(row, sizeof(row), false, "10.0.0.1", (uint16_t)(10000 + i), "10.0.0.2",
			5000, TCP_ESTABLISHED, 0, 1000u + (unsigned int)i);
		used += (size_t)snprintf(text + used, cap - used, "%s\n", row);
		if (i % 100 == 0)
			used += (size_t)snprintf(text + used, cap - used, "garbage %d\n", i);
	}
	/* Overlong: the target's row followed by 20 KiB of padding. */
	fmt_row(row, sizeof(row), false, "10.0.0.1", 4000, "10.0.0.2", 5000, TCP_ESTABLISHED, 0,
		666);
	used += (size_t)snprintf(text + used, cap - used, "%s", row);
	memset(text + used, 'x', 20000);
	used += 20000;
	text[used++] = '\n';
	text[used] = '\0';

	write_file(path, text);
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), -ENOENT);

	/* The same connection in the accept queue (no inode): -EAGAIN. */
	fmt_row(row, sizeof(row), false, "10.0.0.1", 4000, "10.0.0.2", 5000, TCP_ESTABLISHED, 0, 0);
	used += (size_t)snprintf(text + used, cap - used, "%s\n", row);
	write_file(path, text);
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), -EAGAIN);

	/* A listener on the port never matches; then the real row, without a newline. */
	fmt_row(row, sizeof(row), false, "10.0.0.1", 4000, "10.0.0.2", 5000, TCP_LISTEN, 0, 5);
	used += (size_t)snprintf(text + used, cap - used, "%s\n", row);
	fmt_row(row, sizeof(row), false, "10.0.0.1", 4000, "10.0.0.2", 5000, TCP_ESTABLISHED, 0,
		424242);
	used += (size_t)snprintf(text + used, cap - used, "%s", row);
	write_file(path, text);
	ino = 0;
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), 0);
	ck_assert_uint_eq(ino, 424242);

	/* A TIME_WAIT orphan (inode 0) is absent, not "retry". */
	fmt_row(row, sizeof(row), false, "10.0.0.1", 4000, "10.0.0.2", 5000, TCP_TIME_WAIT, 0, 0);
	write_file(path, row);
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), -ENOENT);

	/* Empty file, and no file. */
	write_file(path, "");
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), -ENOENT);
	unlink(path);
	ck_assert_int_eq(san_owner_proc_lookup_file(path, false, &t, &ino), -ENOENT);
	ck_assert_int_eq(san_owner_proc_lookup_file("/proc/self/nonexistent", false, &t, &ino),
			 -ENOENT);
	free(text);
}
END_TEST

/* ---- who holds an inode ------------------------------------------------- */

START_TEST(test_pid_holds)
{
	struct holder h;
	struct pair p;
	uint64_t ino;
	int st;

	pair_open(CFG_V4, &p);
	ino = inode_of(p.cfd);
	ck_assert_int_eq(san_owner_pid_holds_inode(getpid(), ino), 0);
	ck_assert_int_eq(san_owner_pid_holds_inode(getpid(), ~0ull), -ENOENT);
	ck_assert_int_eq(san_owner_pid_fd_is_inode(getpid(), p.cfd, ino), 0);
	ck_assert_int_eq(san_owner_pid_fd_is_inode(getpid(), p.sfd, ino), -ENOENT);
	ck_assert_int_eq(san_owner_pid_fd_is_inode(getpid(), 999999, ino), -ENOENT);
	ck_assert_int_eq(san_owner_pid_holds_inode(0, ino), -ESRCH);
	ck_assert_int_eq(san_owner_pid_holds_inode(-1, ino), -ESRCH);

	/* A dead, reaped child. */
	holder_spawn(&h, body_idle, 0, 0);
	holder_read(&h, &st, sizeof(st));
	ck_assert_int_eq(holder_stop(&h), 0);
	ck_assert_int_eq(san_owner_pid_holds_inode(h.pid, ino), -ESRCH);
	ck_assert_int_eq(san_owner_pid_fd_is_inode(h.pid, 0, ino), -ENOENT);
	pair_close(&p);
}
END_TEST

/*
 * Ordinary users: as an unprivileged uid the scan works on our own processes
 * and says -EACCES for another user's. Run as root, the test drops to nobody
 * in a child; run as a user, it needs pid 1 to belong to someone else.
 */
static int unprivileged_child(void)
{
	struct pair p;
	uint64_t ino;
	int r;

	if (geteuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
		return 50;
	p.lfd = cfg_listen(CFG_V4, &p.port);
	p.cfd = cfg_connect(CFG_V4, p.port);
	p.sfd = accept(p.lfd, NULL, NULL);
	if (p.sfd < 0 || san_owner_inode(p.sfd, &ino))
		return 51;
	if (san_owner_pid_holds_inode(getpid(), ino))
		return 52;
	/* We accepted p.sfd; its peer p.cfd is ours too. */
	if (san_owner_prove_peer(p.sfd, getpid()))
		return 53;
	r = san_owner_pid_holds_inode(1, ino);
	if (r != -EACCES)
		return 54;
	r = san_owner_prove_peer(p.sfd, 1);
	if (r != -EACCES)
		return 55;
	return 0;
}

START_TEST(test_pid_holds_unprivileged)
{
	struct stat st;
	pid_t pid;
	int status;

	/* As a user whose pid 1 is its own (a container), there is nothing to be refused. */
	if (geteuid() != 0 && (stat("/proc/1", &st) || st.st_uid == geteuid()))
		return;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(unprivileged_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}
END_TEST

/* ---- the proof --------------------------------------------------------- */

static const unsigned int prove_flags[] = { 0, SAN_OWNER_F_PROC };

/*
 * _i: cfg x {the accepting side proves the connector, the connecting side
 * proves the acceptor} x {sock_diag, /proc}.
 */
START_TEST(test_prove)
{
	int cfg = _i / 4, connecting = (_i / 2) % 2;
	unsigned int flags = prove_flags[_i % 2];
	struct san_owner_proof pr = { .pidfd = -1, .fd_hint = -1, .flags = flags };
	struct holder h;
	int fd, lfd = -1, r;
	uint16_t port;

	if (connecting) {
		/* The child listens and accepts; we connect and prove it. */
		holder_spawn(&h, body_listen, cfg, 0);
		holder_read(&h, &port, sizeof(port));
		fd = cfg_connect(cfg, port);
		ck_assert_int_ge(fd, 0);
		holder_read(&h, &h.fd, sizeof(h.fd));
	} else {
		/* We listen; the child connects; we accept and prove it. */
		lfd = cfg_listen(cfg, &port);
		ck_assert_int_ge(lfd, 0);
		holder_spawn(&h, body_connect, cfg, port);
		holder_read(&h, &h.fd, sizeof(h.fd));
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		ck_assert_int_ge(fd, 0);
	}
	pr.pid = h.pid;
	r = san_owner_prove(fd, &pr);
	ck_assert_msg(r == 0, "%s %s %s: %s", cfg_name[cfg],
		      connecting ? "connecting" : "accepting", flags ? "proc" : "diag",
		      strerror(-r));
	ck_assert_int_eq(san_owner_prove_peer(fd, h.pid), 0);
	/* With the peer's fd hint, right and wrong (a wrong hint falls back to the scan). */
	pr.fd_hint = h.fd;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	pr.fd_hint = 0;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	pr.fd_hint = -1;
	/*
	 * With the tuple the caller already asked: the same answer; a tuple that is not fd's
	 * (another connection's, or fd's reversed) proves nothing, for fd's inode is not its row's.
	 */
	{
		struct san_tuple own, other;

		ck_assert_int_eq(san_owner_tuple(fd, &own), 0);
		pr.own = &own;
		ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
		other = own;
		other.peer.port ^= 1;
		pr.own = &other;
		ck_assert_int_ne(san_owner_prove(fd, &pr), 0);
		other.local = own.peer;
		other.peer = own.local;
		pr.own = &other;
		ck_assert_int_ne(san_owner_prove(fd, &pr), 0);
		pr.own = NULL;
	}
	/*
	 * The lookup half made ahead (a connector's, while its peer proves it): the same answer;
	 * rows that name another socket than the peer's (ours) fail the rest of the proof.
	 */
	{
		struct san_owner_rows rows, wrong;
		struct stat st;

		ck_assert_int_eq(san_owner_rows_find(fd, NULL, flags, &rows), 0);
		pr.rows = &rows;
		ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
		ck_assert_int_eq(fstat(fd, &st), 0);
		wrong = rows;
		wrong.peer_ino = st.st_ino;
		pr.rows = &wrong;
		ck_assert_int_eq(san_owner_prove(fd, &pr), -EPERM);
		pr.rows = NULL;
		ck_assert_int_eq(san_owner_rows_find(-1, NULL, flags, &rows), -EBADF);
	}
	/* A netlink socket the caller keeps (B's engine), used proof after proof. */
	{
		int nl = san_owner_diag_open();

		ck_assert_int_ge(nl, 0);
		pr.diag_fd = nl + 1;
		for (int k = 0; k < 3; k++)
			ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
		pr.pid = getpid();
		ck_assert_int_eq(san_owner_prove(fd, &pr), -EPERM);
		pr.pid = h.pid;
		ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
		ck_assert_int_ne(fcntl(nl, F_GETFD), -1); /* still ours, still open */
		pr.diag_fd = 0;
		close(nl);
	}

	/* Not the owner: ourselves, and pid 1 (as root we may look, it holds nothing of ours). */
	pr.pid = getpid();
	ck_assert_int_eq(san_owner_prove(fd, &pr), -EPERM);
	pr.pid = 1;
	r = san_owner_prove(fd, &pr);
	ck_assert_msg(r == -EPERM || r == -EACCES, "pid 1: %d", r);

	/* Dead. */
	ck_assert_int_eq(holder_stop(&h), 0);
	pr.pid = h.pid;
	r = san_owner_prove(fd, &pr);
	/* Its end closed with it: the peer endpoint is gone or orphaned. */
	ck_assert_msg(r == -EREMOTE || r == -ESRCH, "dead peer: %d", r);
	close(fd);
	if (lfd >= 0)
		close(lfd);
}
END_TEST

/* A live process that does not hold the peer end, and a dead one with the peer end alive. */
START_TEST(test_prove_not_owner)
{
	unsigned int flags = prove_flags[_i];
	struct san_owner_proof pr = { .pidfd = -1, .fd_hint = -1, .flags = flags };
	struct holder idle, dead;
	struct pair p;
	int zero;

	holder_spawn(&idle, body_idle, 0, 0);
	holder_read(&idle, &zero, sizeof(zero));
	pair_open(CFG_V4, &p);
	pr.pid = idle.pid;
	ck_assert_int_eq(san_owner_prove(p.sfd, &pr), -EPERM);
	ck_assert_int_eq(san_owner_prove(p.cfd, &pr), -EPERM);
	/* We hold both ends ourselves: a self-connection of sorts, and it proves. */
	pr.pid = getpid();
	ck_assert_int_eq(san_owner_prove(p.sfd, &pr), 0);
	ck_assert_int_eq(holder_stop(&idle), 0);

	holder_spawn(&dead, body_idle, 0, 0);
	holder_read(&dead, &zero, sizeof(zero));
	ck_assert_int_eq(holder_stop(&dead), 0);
	pr.pid = dead.pid;
	ck_assert_int_eq(san_owner_prove(p.sfd, &pr), -ESRCH);
	pr.pid = 0;
	ck_assert_int_eq(san_owner_prove(p.sfd, &pr), -ESRCH);
	pair_close(&p);
}
END_TEST

/*
 * The connector hands its socket to a forked grandchild and closes its own
 * copy: the grandchild holds it and passes (it owns the connection), the
 * connector no longer does.
 */
START_TEST(test_prove_inherited)
{
	struct holder h;
	pid_t gc;
	uint16_t port;
	int lfd, fd;

	lfd = cfg_listen(CFG_V4, &port);
	holder_spawn(&h, body_connect_handoff, CFG_V4, port);
	holder_read(&h, &gc, sizeof(gc));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(san_owner_prove_peer(fd, gc), 0);
	ck_assert_int_eq(san_owner_prove_peer(fd, h.pid), -EPERM);
	kill(gc, SIGKILL);
	ck_assert_int_eq(holder_stop(&h), 0);
	close(fd);
	close(lfd);
}
END_TEST

START_TEST(test_prove_errors)
{
	struct san_tuple c;
	uint16_t port;
	int fd, lfd, cfd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(san_owner_prove_peer(fd, getpid()), -ENOTCONN);
	close(fd);
	ck_assert_int_eq(san_owner_prove_peer(-1, getpid()), -EBADF);

	/* Our connection still in our own listener's queue: "retry", from either method. */
	lfd = cfg_listen(CFG_V4, &port);
	cfd = cfg_connect(CFG_V4, port);
	ck_assert_int_eq(san_owner_tuple(cfd, &c), 0);
	ck_assert_int_eq(san_owner_prove_peer(cfd, getpid()), -EAGAIN);
	{
		struct san_owner_proof pr = {
			.pid = getpid(), .pidfd = -1, .fd_hint = -1, .flags = SAN_OWNER_F_PROC
		};

		ck_assert_int_eq(san_owner_prove(cfd, &pr), -EAGAIN);
	}
	close(cfd);
	close(lfd);
}
END_TEST

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* With a pidfd: proven while the process lives, -ESRCH once it is gone, whatever the pid. */
START_TEST(test_prove_pidfd)
{
	struct san_owner_proof pr = { .pid = 0, .fd_hint = -1 };
	struct holder h;
	uint16_t port;
	int lfd, fd, pidfd;

	lfd = cfg_listen(CFG_V4, &port);
	holder_spawn(&h, body_connect, CFG_V4, port);
	holder_read(&h, &h.fd, sizeof(h.fd));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	pidfd = pidfd_open_(h.pid);
	if (pidfd < 0 && errno == ENOSYS) {
		holder_stop(&h);
		return;
	}
	ck_assert_int_ge(pidfd, 0);
	pr.pidfd = pidfd;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	/*
	 * With the peer's fd number too: the right one, another file of its, none at that number
	 * (the scan then finds it).
	 */
	pr.fd_hint = h.fd;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	pr.fd_hint = 0;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	pr.fd_hint = 1000;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	/* ourselves, naming our own end: a socket of the connection, not the peer's end */
	{
		int me = pidfd_open_(getpid());

		ck_assert_int_ge(me, 0);
		pr.pidfd = me;
		pr.fd_hint = fd;
		ck_assert_int_eq(san_owner_prove(fd, &pr), -EPERM);
		pr.pidfd = pidfd;
		close(me);
	}
	pr.fd_hint = -1;
	/* pid is ignored when a pidfd is given. */
	pr.pid = 1;
	ck_assert_int_eq(san_owner_prove(fd, &pr), 0);
	/* Not a pidfd. */
	pr.pidfd = fd;
	ck_assert_int_eq(san_owner_prove(fd, &pr), -EBADF);
	pr.pidfd = pidfd;
	ck_assert_int_eq(holder_stop(&h), 0);
	ck_assert_int_eq(san_owner_prove(fd, &pr), -ESRCH);
	close(pidfd);
	close(fd);
	close(lfd);
}
END_TEST

/*
 * In a pid namespace that shares its parent's /proc (unshare --pid without a new /proc), the
 * pid of a pidfd must be read as /proc numbers it (its fdinfo), not as the caller's namespace
 * does (PIDFD_GET_INFO): there the holder is a small number that /proc gives to another process
 * (a version that used the ioctl rejected the true holder here, and passed a process that held
 * nothing). Run in a grandchild that is pid 1 of a new namespace; needs CAP_SYS_ADMIN.
 */
static int pidns_prove(void)
{
	struct san_owner_proof pr = { .pid = 0, .fd_hint = -1 };
	struct holder h;
	uint16_t port;
	int lfd, fd, pidfd, r;

	lfd = cfg_listen(CFG_V4, &port);
	if (lfd < 0)
		return 30;
	holder_spawn(&h, body_connect, CFG_V4, port);
	holder_read(&h, &h.fd, sizeof(h.fd));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	pidfd = pidfd_open_(h.pid);
	if (fd < 0 || pidfd < 0)
		return 31;
	pr.pidfd = pidfd;
	r = san_owner_prove(fd, &pr);
	holder_stop(&h);
	if (r)
		fprintf(stderr, "pidns: holder %d, proof %d\n", (int)h.pid, r);
	return r ? 32 : 0;
}

START_TEST(test_prove_pidns)
{
	int st;
	pid_t c = fork();

	ck_assert_int_ge(c, 0);
	if (c == 0) {
		pid_t g;

		if (unshare(CLONE_NEWPID) != 0)
			_exit(77);
		g = fork();
		if (g == 0)
			_exit(pidns_prove());
		if (g < 0 || waitpid(g, &st, 0) != g)
			_exit(98);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 99);
	}
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		return; /* no new pid namespace here (not root) */
	ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

START_TEST(test_check_cred)
{
	struct ucred c = { .pid = getpid(), .uid = geteuid(), .gid = getegid() };

	ck_assert_int_eq(san_owner_check_cred(&c), 0);
	c.uid = geteuid() + 1; /* another user: the proof decides (test_prove_other_user) */
	ck_assert_int_eq(san_owner_check_cred(&c), 0);
	c.pid = 0;
	ck_assert_int_eq(san_owner_check_cred(&c), -ESRCH);
}
END_TEST

/*
 * Two users (needs root to make them). The connector runs as uid U_CLI and holds its socket;
 * the accepted end is proved by a process of uid U_SRV, which may not read the connector's
 * /proc/<pid>/fd. By fd table: -EACCES. With SAN_OWNER_F_UID the socket's owner decides: the
 * connector's uid passes, any other uid (the prover's own, a third user's) is -EPERM, as is
 * a process of the right uid for a tuple it has nothing to do with (no such socket).
 */
#define U_CLI 64002
#define U_SRV 64001

static int other_user_prover(int sfd, pid_t cli)
{
	struct san_owner_proof pr = { .pid = cli, .pidfd = -1, .fd_hint = -1 };

	if (setgroups(0, NULL) || setgid(U_SRV) || setuid(U_SRV))
		return 50;
	if (san_owner_prove(sfd, &pr) != -EACCES)
		return 51; /* the fd table is closed to us: without the flag, no proof */
	pr.flags = SAN_OWNER_F_UID;
	pr.uid = U_CLI;
	if (san_owner_prove(sfd, &pr) != 0)
		return 52;
	pr.flags |= SAN_OWNER_F_PROC; /* /proc/net/tcp's uid column says the same */
	if (san_owner_prove(sfd, &pr) != 0)
		return 53;
	pr.flags = SAN_OWNER_F_UID;
	pr.uid = U_SRV;
	if (san_owner_prove(sfd, &pr) != -EPERM)
		return 54;
	pr.uid = 64003;
	if (san_owner_prove(sfd, &pr) != -EPERM)
		return 55;
	pr.uid = 0; /* root made neither socket: root's word is not taken either */
	if (san_owner_prove(sfd, &pr) != -EPERM)
		return 56;
	return 0;
}

/*
 * In a user namespace that maps none of them, both the connector's uid and a stranger's read
 * as the overflow uid (65534): the socket's owner, seen from there, is 65534, and so would be
 * the credentials of any process of an unmapped user. That uid proves nothing.
 */
static int userns_prover(int sfd)
{
	struct san_owner_proof pr = { .pid = 1, .pidfd = -1, .fd_hint = -1,
				      .uid = 65534, .flags = SAN_OWNER_F_UID };
	struct san_tuple t, r;
	uint64_t ino;

	if (unshare(CLONE_NEWUSER))
		return 70; /* not allowed here: said by the caller */
	if (san_owner_tuple(sfd, &t))
		return 71;
	san_tuple_reverse(&t, &r);
	if (san_owner_find_inode(&r, &ino))
		return 72; /* the connector's socket is still there, seen from the namespace */
	return san_owner_prove(sfd, &pr) == -EPERM ? 0 : 73;
}

START_TEST(test_prove_other_user)
{
	int lfd, sfd, go[2], hold[2], status;
	pid_t cli, prover;
	uint16_t port;
	char c;

	if (geteuid() != 0) {
		fprintf(stderr, "test_prove_other_user: skipped (needs root to make two users)\n");
		return;
	}
	lfd = cfg_listen(CFG_V4, &port);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(hold), 0);
	cli = fork();
	ck_assert_int_ge(cli, 0);
	if (cli == 0) {
		int fd;

		close(go[0]);
		close(hold[1]);
		if (setgroups(0, NULL) || setgid(U_CLI) || setuid(U_CLI))
			_exit(60);
		fd = cfg_connect(CFG_V4, port);
		if (fd < 0 || write(go[1], "c", 1) != 1)
			_exit(61);
		(void)read(hold[0], &c, 1); /* hold the socket until the parent is done */
		_exit(0);
	}
	close(go[1]);
	close(hold[0]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	sfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(sfd, 0);
	prover = fork();
	ck_assert_int_ge(prover, 0);
	if (prover == 0)
		_exit(other_user_prover(sfd, cli));
	ck_assert_int_eq(waitpid(prover, &status, 0), prover);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "prover status %d", status);
	prover = fork();
	ck_assert_int_ge(prover, 0);
	if (prover == 0)
		_exit(userns_prover(sfd));
	ck_assert_int_eq(waitpid(prover, &status, 0), prover);
	close(hold[1]);
	/* 70: no user namespaces on this kernel (or not for root here): nothing to check there */
	ck_assert_msg(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 70),
		      "user-namespace prover status %d", status);
	ck_assert_int_eq(waitpid(cli, &status, 0), cli);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "connector status %d", status);
	close(sfd);
	close(lfd);
	close(go[0]);
}
END_TEST

/* ---- cost on the upgrade path ------------------------------------------- */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * ~1000 TCP sockets on the host (500 connected pairs here): time the whole
 * proof by each method, against a peer with a handful of fds and against
 * one with ~1000 (it inherited ours), where the /proc/<pid>/fd scan
 * dominates unless the peer names its fd. Prints the figures when
 * SAN_UNIT_BENCH is set; always checks that the proof holds under load.
 */
#define BENCH_PAIRS 500

static double bench_prove(int fd, struct san_owner_proof *pr, int iters)
{
	double t0 = now_us();

	for (int i = 0; i < iters; i++)
		ck_assert_int_eq(san_owner_prove(fd, pr), 0);
	return (now_us() - t0) / iters;
}

static int bench_accept_holder(int lfd, uint16_t port, struct holder *h)
{
	int fd;

	holder_spawn(h, body_connect, CFG_V4, port);
	holder_read(h, &h->fd, sizeof(h->fd));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_prove_cost)
{
	static struct pair pairs[BENCH_PAIRS];
	struct san_owner_proof pr = { .pidfd = -1, .fd_hint = -1 };
	bool print = getenv("SAN_UNIT_BENCH") != NULL;
	int n = print ? 1000 : 20, nslow = print ? 50 : 2;
	double small_diag, small_hint, small_proc, big_diag, big_hint, lk_diag, lk_proc, scan;
	struct holder small, big;
	struct san_tuple t, x;
	struct rlimit rl;
	int lfd, fd_small, fd_big;
	uint64_t ino;
	uint16_t port;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * BENCH_PAIRS + 100) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	lfd = cfg_listen(CFG_V4, &port);
	ck_assert_int_ge(lfd, 0);
	fd_small = bench_accept_holder(lfd, port, &small);
	for (int i = 0; i < BENCH_PAIRS; i++) {
		pairs[i].cfd = cfg_connect(CFG_V4, port);
		ck_assert_int_ge(pairs[i].cfd, 0);
		pairs[i].sfd = accept(lfd, NULL, NULL);
		ck_assert_int_ge(pairs[i].sfd, 0);
	}
	fd_big = bench_accept_holder(lfd, port, &big);

	pr.pid = small.pid;
	small_diag = bench_prove(fd_small, &pr, n);
	pr.flags = SAN_OWNER_F_PROC;
	small_proc = bench_prove(fd_small, &pr, nslow);
	pr.flags = 0;
	pr.fd_hint = small.fd;
	small_hint = bench_prove(fd_small, &pr, n);
	pr.pid = big.pid;
	pr.fd_hint = big.fd;
	big_hint = bench_prove(fd_big, &pr, n);
	pr.fd_hint = -1;
	big_diag = bench_prove(fd_big, &pr, nslow);

	ck_assert_int_eq(san_owner_tuple(fd_small, &t), 0);
	san_tuple_reverse(&t, &x);
	{
		double t0 = now_us();

		for (int i = 0; i < n; i++)
			ck_assert_int_eq(san_owner_diag_lookup(&x, &ino), 0);
		lk_diag = (now_us() - t0) / n;
		t0 = now_us();
		for (int i = 0; i < nslow; i++)
			ck_assert_int_eq(san_owner_proc_lookup(&x, &ino), 0);
		lk_proc = (now_us() - t0) / nslow;
		ino = inode_of(pairs[BENCH_PAIRS - 1].sfd);
		t0 = now_us();
		for (int i = 0; i < nslow; i++)
			ck_assert_int_eq(san_owner_pid_holds_inode(getpid(), ino), 0);
		scan = (now_us() - t0) / nslow;
	}
	if (print) {
		fprintf(stderr,
			"san_owner bench, %d TCP sockets on the host, mean of %d/%d runs:\n",
			2 * BENCH_PAIRS + 5, n, nslow);
		fprintf(stderr,
			"  prove, peer with few fds:   sock_diag %.1f us, +fd hint %.1f us, "
			"/proc %.1f us\n",
			small_diag, small_hint, small_proc);
		fprintf(stderr,
			"  prove, peer with ~1000 fds: sock_diag %.1f us, +fd hint %.1f us\n",
			big_diag, big_hint);
		fprintf(stderr, "  endpoint lookup: sock_diag %.1f us, /proc/net/tcp{,6} %.1f us\n",
			lk_diag, lk_proc);
		fprintf(stderr, "  /proc/<pid>/fd scan of ~1000 fds, match last: %.1f us\n", scan);
	}
	/* big inherited small's pipes: it must go first for small to see its EOF. */
	ck_assert_int_eq(holder_stop(&big), 0);
	ck_assert_int_eq(holder_stop(&small), 0);
	for (int i = 0; i < BENCH_PAIRS; i++) {
		close(pairs[i].cfd);
		close(pairs[i].sfd);
	}
	close(fd_small);
	close(fd_big);
	close(lfd);
}
END_TEST

Suite *make_owner_suite(void)
{
	Suite *s = suite_create("owner");
	TCase *tc;

	tc = tcase_create("tuple");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_tuple, 0, NR_CFG);
	tcase_add_test(tc, test_tuple_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("lookup");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_lookup, 0, NR_CFG * NR_LOOKUPS);
	tcase_add_loop_test(tc, test_lookup_accept_queue, 0, NR_CFG * NR_LOOKUPS);
	tcase_add_loop_test(tc, test_lookup_orphan, 0, NR_LOOKUPS);
	suite_add_tcase(s, tc);

	tc = tcase_create("parse");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_parse_row_valid);
	tcase_add_loop_test(tc, test_parse_row_prefixes, 0, 2);
	tcase_add_loop_test(tc, test_parse_row_bad, 0,
			    (int)(sizeof(bad_rows) / sizeof(bad_rows[0])));
	tcase_add_test(tc, test_parse_row_garbage);
	tcase_add_test(tc, test_proc_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("holds");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_pid_holds);
	tcase_add_test(tc, test_pid_holds_unprivileged);
	suite_add_tcase(s, tc);

	tc = tcase_create("prove");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_prove, 0, NR_CFG * 4);
	tcase_add_loop_test(tc, test_prove_not_owner, 0, 2);
	tcase_add_test(tc, test_prove_inherited);
	tcase_add_test(tc, test_prove_errors);
	tcase_add_test(tc, test_prove_pidfd);
	tcase_add_test(tc, test_prove_pidns);
	tcase_add_test(tc, test_check_cred);
	tcase_add_test(tc, test_prove_other_user);
	suite_add_tcase(s, tc);

	tc = tcase_create("cost");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_test(tc, test_prove_cost);
	suite_add_tcase(s, tc);
	return s;
}
