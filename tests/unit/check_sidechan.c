/* tests/unit: core/san_sidechan — names, listen/connect/accept, messages, fd passing, abuse. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/san_owner.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76 /* Linux >= 6.5; glibc 2.36 does not name it */
#endif
#include "core/san_sidechan.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_addr.h"

/* ---- helpers ----------------------------------------------------------- */

static const char *name_text(const struct san_sidechan_name *n)
{
	return n->path + 1;
}

static bool name_eq(const struct san_sidechan_name *a, const struct san_sidechan_name *b)
{
	return a->len == b->len && !memcmp(a->path, b->path, a->len);
}

/*
 * A name of our own for each test: a netns id no real namespace has (high
 * bits set) and the pid keep parallel runs and a running engine apart.
 */
static void test_name(struct san_sidechan_name *n, uint16_t port)
{
	struct san_addr a;

	unit_addr_set(&a, "127.0.0.1", port);
	ck_assert_int_eq(san_sidechan_name_listener(n, 0xfeed000000000000ull + (uint64_t)getpid(),
						    &a, false),
			 0);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

static bool fd_nonblock_cloexec(int fd)
{
	return (fcntl(fd, F_GETFL) & O_NONBLOCK) && (fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

/* A connected pair through a listening name: l (listener), c (connector), s (accepted). */
struct chan {
	struct san_sidechan_name name;
	int l, c, s;
};

static void chan_open(struct chan *ch, uint16_t port)
{
	test_name(&ch->name, port);
	ch->l = san_sidechan_listen(&ch->name);
	ck_assert_int_ge(ch->l, 0);
	ch->c = san_sidechan_connect(&ch->name);
	ck_assert_int_ge(ch->c, 0);
	ch->s = san_sidechan_accept(ch->l);
	ck_assert_int_ge(ch->s, 0);
}

static void chan_close(struct chan *ch)
{
	close(ch->c);
	close(ch->s);
	close(ch->l);
}

static const uint8_t params[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

static void propose_init(struct san_msg *m, uint32_t seq)
{
	memset(m, 0, sizeof(*m));
	m->type = SAN_T_PROPOSE;
	m->seq = seq;
	m->u.propose.ver_min = 1;
	m->u.propose.ver_max = 1;
	m->u.propose.provider = SAN_PROV_SHM;
	m->u.propose.caps = 3;
	m->u.propose.nonce = 0x0123456789abcdefull;
	unit_addr_set(&m->u.propose.src, "127.0.0.1", 40000);
	unit_addr_set(&m->u.propose.dst, "127.0.0.1", 8080);
	m->u.propose.params = params;
	m->u.propose.params_len = sizeof(params);
}

static void accept_init(struct san_msg *m, uint32_t seq)
{
	memset(m, 0, sizeof(*m));
	m->type = SAN_T_ACCEPT;
	m->seq = seq;
	m->u.accept.caps = 1;
	m->u.accept.nonce = 0xfedcba9876543210ull;
	m->u.accept.params = params;
	m->u.accept.params_len = 4;
}

/* A raw packet, with @nfds copies of @fd attached: what an attacker can send. */
static ssize_t send_raw(int fd, const void *buf, size_t len, int pass, int nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 253)];
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		for (int i = 0; i < nfds; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &pass, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL);
}

static int encode(const struct san_msg *m, uint8_t *buf, size_t cap)
{
	int n = san_msg_encode(m, buf, cap);

	ck_assert_int_gt(n, 0);
	return n;
}

/* ---- names -------------------------------------------------------------- */

static const struct {
	const char *ip;
	bool v6only;
	const char *host;
} listener_names[] = {
	{ "127.0.0.1", false, "127.0.0.1" },
	{ "::ffff:127.0.0.1", false, "127.0.0.1" }, /* a v6 socket bound to a mapped address */
	{ "10.20.30.40", true, "10.20.30.40" },
	{ "::1", false, "::1" },
	{ "2001:db8::1:0:0:1", false, "2001:db8::1:0:0:1" },
	{ "0.0.0.0", false, "any4" },
	{ "::ffff:0.0.0.0", false, "any4" },
	{ "::", true, "any6" },
	{ "::", false, "any" },
};

START_TEST(test_name_listener)
{
	struct san_sidechan_name n;
	struct san_addr a;
	char want[128];

	unit_addr_set(&a, listener_names[_i].ip, 8080);
	ck_assert_int_eq(
		san_sidechan_name_listener(&n, 4026531840ull, &a, listener_names[_i].v6only), 0);
	snprintf(want, sizeof(want), "sanswitch/v1/4026531840/%s/8080", listener_names[_i].host);
	ck_assert_str_eq(name_text(&n), want);
	ck_assert_int_eq(n.path[0], '\0');
	ck_assert_uint_eq(n.len, 1 + strlen(want));
	a.port = 0;
	ck_assert_int_eq(san_sidechan_name_listener(&n, 1, &a, false), -EINVAL);
}
END_TEST

/* The longest name fits in sun_path with its terminator. */
START_TEST(test_name_longest)
{
	struct san_sidechan_name n;
	struct san_addr a;

	unit_addr_set(&a, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 65535);
	ck_assert_int_eq(san_sidechan_name_listener(&n, UINT64_MAX, &a, false), 0);
	ck_assert_str_eq(name_text(&n), "sanswitch/v1/18446744073709551615/"
					"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/65535");
	ck_assert_uint_lt(n.len, sizeof(n.path));
}
END_TEST

START_TEST(test_dest_names)
{
	struct san_sidechan_name n[SAN_SIDECHAN_DEST_NAMES];
	struct san_addr a;

	unit_addr_set(&a, "10.1.2.3", 80);
	ck_assert_int_eq(san_sidechan_dest_names(&a, 7, n), 3);
	ck_assert_str_eq(name_text(&n[0]), "sanswitch/v1/7/10.1.2.3/80");
	ck_assert_str_eq(name_text(&n[1]), "sanswitch/v1/7/any4/80");
	ck_assert_str_eq(name_text(&n[2]), "sanswitch/v1/7/any/80");

	unit_addr_set(&a, "fe80::1", 443);
	ck_assert_int_eq(san_sidechan_dest_names(&a, 7, n), 3);
	ck_assert_str_eq(name_text(&n[0]), "sanswitch/v1/7/fe80::1/443");
	ck_assert_str_eq(name_text(&n[1]), "sanswitch/v1/7/any6/443");
	ck_assert_str_eq(name_text(&n[2]), "sanswitch/v1/7/any/443");

	a.port = 0;
	ck_assert_int_eq(san_sidechan_dest_names(&a, 7, n), -EINVAL);
}
END_TEST

/*
 * Real TCP listeners: the listener's own name is among the names a connector
 * to a concrete address tries, at the position the kernel's preference gives.
 */
static const struct {
	int family;
	const char *bind_ip;
	int v6only; /* -1: not applicable */
	const char *dest_ip;
	int dest_index;
} real_listeners[] = {
	{ AF_INET, "127.0.0.1", -1, "127.0.0.1", 0 },
	{ AF_INET, "0.0.0.0", -1, "127.0.0.1", 1 },
	{ AF_INET6, "::1", 1, "::1", 0 },
	{ AF_INET6, "::", 1, "::1", 1 },
	{ AF_INET6, "::", 0, "::1", 2 },
	{ AF_INET6, "::", 0, "127.0.0.1", 2 }, /* dual stack, IPv4 client */
	{ AF_INET6, "::ffff:127.0.0.1", 0, "127.0.0.1", 0 },
};

START_TEST(test_listener_name_real)
{
	struct san_sidechan_name ln, dn[SAN_SIDECHAN_DEST_NAMES];
	struct sockaddr_storage ss;
	struct san_addr dst;
	socklen_t len;
	uint64_t netns;
	int fd, one = 1;

	ck_assert_int_eq(san_sidechan_netns(&netns), 0);
	memset(&ss, 0, sizeof(ss));
	fd = socket(real_listeners[_i].family, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	if (real_listeners[_i].family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		inet_pton(AF_INET, real_listeners[_i].bind_ip, &s4->sin_addr);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, real_listeners[_i].bind_ip, &s6->sin6_addr);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &real_listeners[_i].v6only, sizeof(int));
		len = sizeof(*s6);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&ss, len), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(san_sidechan_listener_name(fd, netns, &ln), 0);
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	unit_addr_set(&dst, real_listeners[_i].dest_ip,
		 ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					       : ((struct sockaddr_in6 *)&ss)->sin6_port));
	ck_assert_int_eq(san_sidechan_dest_names(&dst, netns, dn), 3);
	ck_assert_msg(name_eq(&ln, &dn[real_listeners[_i].dest_index]), "%s is not dest name %d",
		      name_text(&ln), real_listeners[_i].dest_index);
	close(fd);

	/* Not bound / not a socket. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(san_sidechan_listener_name(fd, netns, &ln), -EINVAL);
	close(fd);
	ck_assert_int_eq(san_sidechan_listener_name(-1, netns, &ln), -EBADF);
}
END_TEST

/*
 * A namespace's id: the same from the thread and from any socket of the namespace (a TCP
 * socket, a listener), another in a new namespace (a child that unshares one, where it may),
 * and a socket keeps its namespace's id after its thread has gone into another.
 */
START_TEST(test_netns)
{
	uint64_t ns = 0, ns_tcp = 1, ns_l = 2, child[2] = { 0, 0 };
	int tcp = socket(AF_INET, SOCK_STREAM, 0), l = socket(AF_INET6, SOCK_STREAM, 0), p[2];
	pid_t pid;

	ck_assert_int_ge(tcp, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(san_sidechan_netns(&ns), 0);
	ck_assert_int_eq(san_sidechan_netns_fd(tcp, &ns_tcp), 0);
	ck_assert_int_eq(san_sidechan_netns_fd(l, &ns_l), 0);
	ck_assert_uint_eq(ns, ns_tcp);
	ck_assert_uint_eq(ns, ns_l);
	ck_assert_int_ne(san_sidechan_netns_fd(-1, &ns_l), 0);

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint64_t v[2] = { 0, 0 };

		/* (no new namespace without CAP_SYS_ADMIN: say so with zeros) */
		if (unshare(CLONE_NEWNET) == 0 && san_sidechan_netns(&v[0]) == 0)
			(void)san_sidechan_netns_fd(tcp, &v[1]);
		_exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], child, sizeof(child)), (ssize_t)sizeof(child));
	close(p[0]);
	waitpid(pid, NULL, 0);
	if (child[0]) {
		ck_assert_uint_ne(child[0], ns);
		ck_assert_uint_eq(child[1], ns); /* the socket made before stays in ours */
	}
	close(tcp);
	close(l);
}
END_TEST

/* ---- listen, connect, accept, credentials -------------------------------- */

START_TEST(test_listen_connect)
{
	struct ucred cred;
	struct chan ch;
	pid_t pid;
	int st, fd;

	test_name(&ch.name, 1);
	ch.l = san_sidechan_listen(&ch.name);
	ck_assert_int_ge(ch.l, 0);
	ck_assert(fd_nonblock_cloexec(ch.l));
	ck_assert_int_eq(san_sidechan_accept(ch.l), -EAGAIN);
	errno = 4321;
	ch.c = san_sidechan_connect(&ch.name);
	ck_assert_int_ge(ch.c, 0);
	ck_assert_int_eq(errno, 4321);
	ck_assert(fd_nonblock_cloexec(ch.c));
	ch.s = san_sidechan_accept(ch.l);
	ck_assert_int_ge(ch.s, 0);
	ck_assert(fd_nonblock_cloexec(ch.s));

	ck_assert_int_eq(san_sidechan_peercred(ch.s, &cred), 0);
	ck_assert_int_eq(cred.pid, getpid());
	ck_assert_int_eq(cred.uid, geteuid());
	ck_assert_int_eq(san_owner_check_cred(&cred), 0);
	ck_assert_int_eq(san_sidechan_peercred(ch.c, &cred), 0);
	ck_assert_int_eq(cred.pid, getpid());
	chan_close(&ch);

	/* A connector in another process: its pid, from the kernel. */
	test_name(&ch.name, 2);
	ch.l = san_sidechan_listen(&ch.name);
	ck_assert_int_ge(ch.l, 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fd = san_sidechan_connect(&ch.name);
		_exit(fd >= 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(st, 0);
	ch.s = san_sidechan_accept(ch.l);
	ck_assert_int_ge(ch.s, 0);
	ck_assert_int_eq(san_sidechan_peercred(ch.s, &cred), 0);
	ck_assert_int_eq(cred.pid, pid);
	close(ch.s);
	close(ch.l);
	ck_assert_int_eq(san_sidechan_peercred(-1, &cred), -EBADF);
}
END_TEST

START_TEST(test_connect_absent)
{
	struct san_sidechan_name n, used;
	struct san_addr dst;
	uint64_t ns = 0xfeed100000000000ull + (uint64_t)getpid();
	int l, fd;

	/* Refused at once, not after a wait: a hang would end in the test timeout. */
	test_name(&n, 3);
	ck_assert_int_eq(san_sidechan_connect(&n), -ECONNREFUSED);

	/* Only the dual-stack wildcard listens: an IPv4 connector falls through to it. */
	unit_addr_set(&dst, "127.0.0.1", 4);
	ck_assert_int_eq(san_sidechan_connect_dest(&dst, ns, &used), -ECONNREFUSED);
	unit_addr_set(&dst, "::", 4);
	ck_assert_int_eq(san_sidechan_name_listener(&n, ns, &dst, false), 0);
	l = san_sidechan_listen(&n);
	ck_assert_int_ge(l, 0);
	unit_addr_set(&dst, "127.0.0.1", 4);
	fd = san_sidechan_connect_dest(&dst, ns, &used);
	ck_assert_int_ge(fd, 0);
	ck_assert(name_eq(&used, &n));
	close(fd);
	close(l);

	memset(&n, 0, sizeof(n));
	ck_assert_int_eq(san_sidechan_connect(&n), -EINVAL);
	ck_assert_int_eq(san_sidechan_listen(&n), -EINVAL);
}
END_TEST

/*
 * Several names tried on one socket (san_sidechan_connect_first): the refused ones leave it
 * usable, the one that answers is said, the channel carries a message with the sender's
 * credentials, and no descriptor is left behind by a search that finds nothing.
 */
START_TEST(test_connect_first)
{
	struct san_sidechan_name n[3];
	struct san_side_rx rx;
	struct san_msg m;
	int l, c, s, which = -1, before;

	for (int i = 0; i < 3; i++)
		test_name(&n[i], (uint16_t)(40 + i));
	before = count_fds();
	ck_assert_int_eq(san_sidechan_connect_first(n, 3, &which), -ECONNREFUSED);
	ck_assert_int_eq(san_sidechan_connect_first(n, 0, &which), -ECONNREFUSED);
	ck_assert_int_eq(count_fds(), before);
	l = san_sidechan_listen(&n[2]);
	ck_assert_int_ge(l, 0);
	c = san_sidechan_connect_first(n, 3, &which);
	ck_assert_int_ge(c, 0);
	ck_assert_int_eq(which, 2);
	ck_assert(fd_nonblock_cloexec(c));
	s = san_sidechan_accept(l);
	ck_assert_int_ge(s, 0);
	propose_init(&m, 7);
	ck_assert_int_eq(san_sidechan_send(c, &m, -1), 0);
	ck_assert_int_eq(san_sidechan_recv(s, &rx, true), 0);
	ck_assert_int_eq(rx.msg.type, SAN_T_PROPOSE);
	ck_assert_int_eq(rx.msg.seq, 7);
	ck_assert_int_eq(rx.cred.pid, getpid());
	san_side_rx_close_fds(&rx);
	/* the answer back carries the answerer's credentials, and its pidfd where the kernel
	 * makes one (6.5: SO_PASSPIDFD known), as the listener's side gets the proposer's */
	ck_assert_int_eq(san_sidechan_send(s, &m, -1), 0);
	ck_assert_int_eq(san_sidechan_recv(c, &rx, true), 0);
	ck_assert_int_eq(rx.cred.pid, getpid());
	{
		int one = 1, t = socket(AF_UNIX, SOCK_SEQPACKET, 0);

		if (setsockopt(t, SOL_SOCKET, SO_PASSPIDFD, &one, sizeof(one)) == 0)
			ck_assert_int_ge(rx.pidfd, 0);
		close(t);
	}
	san_side_rx_close_fds(&rx);
	close(c);
	close(s);
	/* the first name that answers wins, even with a later one listening too */
	c = san_sidechan_connect_first(n + 2, 1, NULL);
	ck_assert_int_ge(c, 0);
	close(c);
	close(l);
	memset(&n[1], 0, sizeof(n[1]));
	ck_assert_int_eq(san_sidechan_connect_first(n, 3, &which), -EINVAL);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

/*
 * A name whose backlog is full answers -EAGAIN at once, and the search stops
 * there: the next name would be a different listener.
 */
START_TEST(test_connect_backlog_full)
{
	uint64_t ns = 0xfeed200000000000ull + (uint64_t)getpid();
	struct san_sidechan_name exact, any;
	static int fds[4096];
	struct san_addr a;
	int l_exact, l_any, n = 0, fd;

	unit_addr_set(&a, "127.0.0.1", 5);
	ck_assert_int_eq(san_sidechan_name_listener(&exact, ns, &a, false), 0);
	unit_addr_set(&a, "0.0.0.0", 5);
	ck_assert_int_eq(san_sidechan_name_listener(&any, ns, &a, false), 0);
	l_exact = san_sidechan_listen(&exact);
	l_any = san_sidechan_listen(&any);
	ck_assert_int_ge(l_exact, 0);
	ck_assert_int_ge(l_any, 0);
	while (n < 4096 && (fd = san_sidechan_connect(&exact)) >= 0)
		fds[n++] = fd;
	ck_assert_int_eq(fd, -EAGAIN);
	ck_assert_int_gt(n, 0);
	unit_addr_set(&a, "127.0.0.1", 5);
	ck_assert_int_eq(san_sidechan_connect_dest(&a, ns, NULL), -EAGAIN);
	while (n)
		close(fds[--n]);
	close(l_exact);
	close(l_any);
}
END_TEST

START_TEST(test_name_clash)
{
	struct san_sidechan_name n;
	pid_t pid;
	int l1, l2, c, s, st, sync[2];
	char x;

	test_name(&n, 6);
	l1 = san_sidechan_listen(&n);
	ck_assert_int_ge(l1, 0);
	ck_assert_int_eq(san_sidechan_listen(&n), -EADDRINUSE);
	/* The first one is unharmed. */
	c = san_sidechan_connect(&n);
	ck_assert_int_ge(c, 0);
	s = san_sidechan_accept(l1);
	ck_assert_int_ge(s, 0);
	close(c);
	close(s);
	close(l1);
	/* Freed with its socket. */
	l1 = san_sidechan_listen(&n);
	ck_assert_int_ge(l1, 0);
	close(l1);

	/* Another process holds the name (two SO_REUSEPORT servers, a squatter). */
	ck_assert_int_eq(pipe(sync), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int l = san_sidechan_listen(&n);

		close(sync[0]);
		if (write(sync[1], "x", 1) != 1 || l < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	close(sync[1]);
	ck_assert_int_eq(read(sync[0], &x, 1), 1);
	l2 = san_sidechan_listen(&n);
	ck_assert_int_eq(l2, -EADDRINUSE);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(sync[0]);
}
END_TEST

/* ---- messages ------------------------------------------------------------ */

START_TEST(test_msg_roundtrip)
{
	struct san_side_rx rx;
	struct san_msg m;
	struct chan ch;
	char text[8] = { 0 };
	int mfd, before;

	chan_open(&ch, 7);
	before = count_fds();
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), -EAGAIN);

	propose_init(&m, 0);
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, true), 0);
	ck_assert_uint_eq(rx.msg.type, SAN_T_PROPOSE);
	ck_assert_uint_eq(rx.msg.seq, 0);
	ck_assert_uint_eq(rx.len, rx.msg.wire_len);
	ck_assert_uint_eq(rx.msg.u.propose.nonce, 0x0123456789abcdefull);
	ck_assert_uint_eq(rx.msg.u.propose.src.port, 40000);
	ck_assert_uint_eq(rx.msg.u.propose.params_len, sizeof(params));
	ck_assert_mem_eq(rx.msg.u.propose.params, params, sizeof(params));
	ck_assert_int_eq(rx.fd, -1);
	ck_assert_int_eq(rx.pidfd, -1);
	ck_assert_int_eq(rx.cred.pid, getpid());
	ck_assert_int_eq(rx.cred.uid, getuid());

	/* ACCEPT with the rings' memfd. */
	mfd = memfd_create("san-test", MFD_CLOEXEC);
	ck_assert_int_ge(mfd, 0);
	ck_assert_int_eq(write(mfd, "rings", 5), 5);
	accept_init(&m, 0);
	ck_assert_int_eq(san_sidechan_send(ch.s, &m, mfd), 0);
	close(mfd);
	ck_assert_int_eq(san_sidechan_recv(ch.c, &rx, true), 0);
	ck_assert_uint_eq(rx.msg.type, SAN_T_ACCEPT);
	ck_assert_uint_eq(rx.msg.u.accept.nonce, 0xfedcba9876543210ull);
	ck_assert_int_ge(rx.fd, 0);
	ck_assert(fcntl(rx.fd, F_GETFD) & FD_CLOEXEC);
	ck_assert_int_eq(pread(rx.fd, text, 5, 0), 5);
	ck_assert_str_eq(text, "rings");
	san_side_rx_close_fds(&rx);
	ck_assert_int_eq(rx.fd, -1);
	ck_assert_int_eq(count_fds(), before);

	/* Every side-channel type goes through; SWITCH and REJECT and ABORT without fds. */
	memset(&m, 0, sizeof(m));
	m.type = SAN_T_SWITCH;
	m.seq = 1;
	m.u.sw.offset = 12345;
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), 0);
	ck_assert_uint_eq(rx.msg.u.sw.offset, 12345);
	ck_assert_uint_eq(rx.msg.seq, 1);
	chan_close(&ch);
}
END_TEST

/* Each message carries its sender's pid, even when another process made the connection. */
START_TEST(test_msg_sender_cred)
{
	struct san_side_rx rx;
	struct san_msg m;
	struct chan ch;
	pid_t pid;
	int st;

	chan_open(&ch, 8);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		propose_init(&m, 0);
		_exit(san_sidechan_send(ch.c, &m, -1) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(st, 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), 0);
	ck_assert_int_eq(rx.cred.pid, pid);
	/* While SO_PEERCRED still names the process that connected. */
	{
		struct ucred c;

		ck_assert_int_eq(san_sidechan_peercred(ch.s, &c), 0);
		ck_assert_int_eq(c.pid, getpid());
	}
	chan_close(&ch);
}
END_TEST

START_TEST(test_send_errors)
{
	struct sigaction sa = { .sa_handler = SIG_DFL }, old;
	struct san_msg m;
	struct chan ch;
	int r, n = 0;

	chan_open(&ch, 9);
	memset(&m, 0, sizeof(m));
	m.type = SAN_T_HELLO; /* session only */
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), -EINVAL);
	m.type = SAN_T_MARK; /* never framed */
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), -EINVAL);
	propose_init(&m, 0);
	m.u.propose.nonce = 0; /* encode refuses what decode would reject */
	ck_assert_int_lt(san_sidechan_send(ch.c, &m, -1), 0);

	/* Until the peer's queue is full: then -EAGAIN, never a partial message. */
	propose_init(&m, 0);
	while ((r = san_sidechan_send(ch.c, &m, -1)) == 0 && n < 1000000)
		n++;
	ck_assert_int_eq(r, -EAGAIN);
	ck_assert_int_gt(n, 0);

	/*
	 * Peer gone: -ECONNRESET when it closed with our messages unread,
	 * -EPIPE after a clean close; no SIGPIPE even with the default action.
	 */
	sigaction(SIGPIPE, &sa, &old);
	close(ch.s);
	ch.s = -1;
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), -ECONNRESET);
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), -EPIPE);
	chan_close(&ch);
	chan_open(&ch, 13);
	close(ch.s);
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), -EPIPE);
	sigaction(SIGPIPE, &old, NULL);
	close(ch.c);
	close(ch.l);
	ck_assert_int_eq(san_sidechan_send(-1, &m, -1), -EBADF);
}
END_TEST

START_TEST(test_recv_eof)
{
	struct san_side_rx rx;
	struct san_msg m;
	struct chan ch;

	chan_open(&ch, 10);
	propose_init(&m, 0);
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), 0);
	close(ch.c);
	/* Queued messages come before the EOF. */
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), -EPIPE);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), -EPIPE);
	close(ch.s);
	close(ch.l);
	ck_assert_int_eq(san_sidechan_recv(-1, &rx, false), -EBADF);
}
END_TEST

/* ---- what a hostile peer can send ----------------------------------------- */

/* Bad packets, each alone and with an fd attached: rejected, the fd closed, the channel usable. */
enum {
	BAD_EMPTY,
	BAD_SHORT,
	BAD_DECLARED_LONGER,
	BAD_TRAILING,
	BAD_OVERSIZE,
	BAD_VERSION,
	BAD_TYPE,
	BAD_SESSION_TYPE,
	BAD_RESERVED,
	NR_BAD
};

START_TEST(test_bad_packets)
{
	int kind = _i / 2, with_fd = _i % 2, want, before, r;
	uint8_t buf[1024];
	struct san_side_rx rx;
	struct san_msg m;
	struct chan ch;
	size_t len;

	chan_open(&ch, (uint16_t)(100 + _i));
	propose_init(&m, 0);
	len = (size_t)encode(&m, buf, sizeof(buf));
	switch (kind) {
	case BAD_EMPTY:
		len = 0;
		want = -EPIPE;
		break;
	case BAD_SHORT:
		len = 8;
		want = -SAN_PROTO_ETRUNC;
		break;
	case BAD_DECLARED_LONGER:
		len -= 1;
		want = -SAN_PROTO_ETRUNC;
		break;
	case BAD_TRAILING:
		buf[len++] = 0;
		want = -SAN_PROTO_ELENGTH;
		break;
	case BAD_OVERSIZE:
		memset(buf + len, 0, sizeof(buf) - len);
		len = SAN_SIDE_MSG_MAX + 88;
		want = -EMSGSIZE;
		break;
	case BAD_VERSION:
		buf[0] = 9;
		want = -SAN_PROTO_EVERSION;
		break;
	case BAD_TYPE:
		buf[1] = 0x77;
		want = -SAN_PROTO_ETYPE;
		break;
	case BAD_SESSION_TYPE:
		buf[1] = SAN_T_DATA;
		want = -SAN_PROTO_ECHANNEL;
		break;
	default:
		buf[3] = 1; /* header rsvd0 */
		want = -SAN_PROTO_ERESERVED;
		break;
	}
	before = count_fds();
	ck_assert_int_eq(send_raw(ch.c, buf, len, ch.l, with_fd), (ssize_t)len);
	r = san_sidechan_recv(ch.s, &rx, true);
	ck_assert_msg(r == want, "kind %d fd %d: %d, want %d", kind, with_fd, r, want);
	ck_assert_int_eq(rx.fd, -1);
	ck_assert_int_eq(count_fds(), before);
	/* The channel still carries the next good message. */
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, -1), 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), 0);
	chan_close(&ch);
}
END_TEST

/*
 * fds where none belong: one when none is wanted, two, or a flood of 253
 * (SCM_MAX_FD). Rejected with -EPROTO and every one closed again.
 */
START_TEST(test_unexpected_fds)
{
	static const int nfds[] = { 1, 2, 3, 8, 253 };
	struct san_side_rx rx;
	struct san_msg m;
	struct chan ch;
	uint8_t buf[SAN_SIDE_MSG_MAX];
	int len, before, want_fd;

	chan_open(&ch, 11);
	accept_init(&m, 0);
	len = encode(&m, buf, sizeof(buf));
	before = count_fds();
	for (size_t i = 0; i < sizeof(nfds) / sizeof(nfds[0]); i++) {
		want_fd = nfds[i] > 1; /* one fd is fine only where wanted */
		ck_assert_int_eq(send_raw(ch.c, buf, (size_t)len, ch.l, nfds[i]), len);
		ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, want_fd), -EPROTO);
		ck_assert_int_eq(rx.fd, -1);
		ck_assert_msg(count_fds() == before, "%d fds: %d open, was %d", nfds[i],
			      count_fds(), before);
	}
	/* Our own send with an fd, received where no fd belongs. */
	ck_assert_int_eq(san_sidechan_send(ch.c, &m, ch.l), 0);
	ck_assert_int_eq(san_sidechan_recv(ch.s, &rx, false), -EPROTO);
	ck_assert_int_eq(count_fds(), before);
	chan_close(&ch);
}
END_TEST

/* Random packets of every size, some with fds: never accepted by accident, nothing leaks. */
START_TEST(test_garbage_packets)
{
	unsigned int seed = 777;
	struct san_side_rx rx;
	struct chan ch;
	uint8_t buf[700];
	int before, r;

	chan_open(&ch, 12);
	before = count_fds();
	for (int i = 0; i < 3000; i++) {
		size_t len = (size_t)(rand_r(&seed) % sizeof(buf));
		int nfds = rand_r(&seed) % 8 == 0 ? 1 + rand_r(&seed) % 3 : 0;

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rand_r(&seed);
		/* Half of them look like version 1 setup messages, to get past the first checks. */
		if (len >= 2 && (i & 1)) {
			buf[0] = 1;
			buf[1] = (uint8_t)(1 + rand_r(&seed) % 6);
		}
		if (len == 0)
			continue; /* an empty packet reads as EOF, tested above */
		ck_assert_int_eq(send_raw(ch.c, buf, len, ch.l, nfds), (ssize_t)len);
		r = san_sidechan_recv(ch.s, &rx, true);
		ck_assert_int_ne(r, -EAGAIN);
		if (r == 0)
			san_side_rx_close_fds(&rx);
	}
	ck_assert_int_eq(count_fds(), before);
	chan_close(&ch);
}
END_TEST

/* ---- pidfds, and the whole proof the way the engine will run it ------------ */

static int pidfd_pid(int pidfd)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	p = strstr(buf, "Pid:");
	ck_assert_ptr_nonnull(p);
	return atoi(p + 4);
}

/*
 * A child connects over TCP to our listener and, like engine A, sends a
 * PROPOSE naming its connection on our side channel. We, as engine B,
 * receive it with the sender's credentials and pidfd, match the 4-tuple and
 * prove ownership. Then an impostor process sends the same PROPOSE: the
 * proof fails.
 */
static int child_propose(const struct san_sidechan_name *n, uint16_t port, int tcp_keep, int stay_r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct san_tuple t;
	struct san_msg m;
	int tcp, side;
	char c;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tcp = tcp_keep;
	if (tcp < 0) {
		tcp = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(tcp, (struct sockaddr *)&sa, sizeof(sa)))
			return 60;
	}
	if (san_owner_tuple(tcp, &t))
		return 61;
	side = san_sidechan_connect(n);
	if (side < 0)
		return 62;
	propose_init(&m, 0);
	m.u.propose.src = t.local;
	m.u.propose.dst = t.peer;
	if (san_sidechan_send(side, &m, -1))
		return 63;
	while (read(stay_r, &c, 1) > 0)
		;
	return 0;
}

START_TEST(test_propose_proof)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct san_sidechan_name n;
	struct san_owner_proof pr = { .fd_hint = -1 };
	struct san_tuple mine;
	struct san_side_rx rx;
	socklen_t len = sizeof(sa);
	int tl, side_l, side, tcp, stay[2], st, r, impostor_tcp;
	pid_t owner, impostor;
	uint64_t netns;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(tl, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(tl, 8), 0);
	getsockname(tl, (struct sockaddr *)&sa, &len);
	ck_assert_int_eq(san_sidechan_netns(&netns), 0);
	ck_assert_int_eq(san_sidechan_listener_name(tl, netns, &n), 0);
	side_l = san_sidechan_listen(&n);
	ck_assert_int_ge(side_l, 0);
	ck_assert_int_eq(pipe2(stay, O_CLOEXEC), 0);

	owner = fork();
	ck_assert_int_ge(owner, 0);
	if (owner == 0) {
		close(stay[1]);
		_exit(child_propose(&n, ntohs(sa.sin_port), -1, stay[0]));
	}
	tcp = accept4(tl, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(tcp, 0);
	/* The side-channel connection arrives after the TCP one: wait for it. */
	for (int i = 0; (side = san_sidechan_accept(side_l)) == -EAGAIN && i < 5000; i++)
		usleep(1000);
	ck_assert_int_ge(side, 0);
	r = san_sidechan_pass_pidfd(side);
	ck_assert_msg(r == 0 || r == -ENOPROTOOPT, "pass_pidfd: %d", r);
	for (int i = 0; (r = san_sidechan_recv(side, &rx, false)) == -EAGAIN && i < 5000; i++)
		usleep(1000);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(rx.cred.pid, owner);
	ck_assert_int_eq(san_owner_check_cred(&rx.cred), 0);
	if (rx.pidfd >= 0)
		ck_assert_int_eq(pidfd_pid(rx.pidfd), owner);
	/* B matches the PROPOSE's tuple against the connection it holds... */
	ck_assert_int_eq(san_owner_tuple(tcp, &mine), 0);
	ck_assert_mem_eq(rx.msg.u.propose.dst.addr, mine.local.addr, 16);
	ck_assert_uint_eq(rx.msg.u.propose.dst.port, mine.local.port);
	ck_assert_uint_eq(rx.msg.u.propose.src.port, mine.peer.port);
	/* ...and proves the sender holds its other end. */
	pr.pid = rx.cred.pid;
	pr.pidfd = rx.pidfd;
	ck_assert_int_eq(san_owner_prove(tcp, &pr), 0);
	san_side_rx_close_fds(&rx);
	close(side);

	/*
	 * The impostor: a process of the same uid that read the tuple from
	 * /proc/net/tcp and sends the same PROPOSE, holding a TCP connection of
	 * its own (so that it looks busy) but not that one.
	 */
	impostor = fork();
	ck_assert_int_ge(impostor, 0);
	if (impostor == 0) {
		struct san_msg m;
		int s2 = san_sidechan_connect(&n);

		close(stay[1]);
		propose_init(&m, 0);
		m.u.propose.src = mine.peer;
		m.u.propose.dst = mine.local;
		if (s2 < 0 || san_sidechan_send(s2, &m, -1))
			_exit(70);
		impostor_tcp = socket(AF_INET, SOCK_STREAM, 0);
		connect(impostor_tcp, (struct sockaddr *)&sa, sizeof(sa));
		while (read(stay[0], &st, 1) > 0)
			;
		_exit(0);
	}
	for (int i = 0; (side = san_sidechan_accept(side_l)) == -EAGAIN && i < 5000; i++)
		usleep(1000);
	ck_assert_int_ge(side, 0);
	san_sidechan_pass_pidfd(side);
	for (int i = 0; (r = san_sidechan_recv(side, &rx, false)) == -EAGAIN && i < 5000; i++)
		usleep(1000);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(rx.cred.pid, impostor);
	/* The tuple matches (it was copied), the uid matches, the proof does not. */
	ck_assert_uint_eq(rx.msg.u.propose.src.port, mine.peer.port);
	ck_assert_int_eq(san_owner_check_cred(&rx.cred), 0);
	pr.pid = rx.cred.pid;
	pr.pidfd = rx.pidfd;
	ck_assert_int_eq(san_owner_prove(tcp, &pr), -EPERM);
	san_side_rx_close_fds(&rx);
	close(side);

	close(stay[1]);
	ck_assert_int_eq(waitpid(owner, &st, 0), owner);
	ck_assert_int_eq(st, 0);
	ck_assert_int_eq(waitpid(impostor, &st, 0), impostor);
	ck_assert_int_eq(st, 0);
	close(stay[0]);
	close(tcp);
	close(side_l);
	close(tl);
}
END_TEST

Suite *make_sidechan_suite(void)
{
	Suite *s = suite_create("sidechan");
	TCase *tc;

	tc = tcase_create("names");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_name_listener, 0,
			    (int)(sizeof(listener_names) / sizeof(listener_names[0])));
	tcase_add_test(tc, test_name_longest);
	tcase_add_test(tc, test_dest_names);
	tcase_add_loop_test(tc, test_listener_name_real, 0,
			    (int)(sizeof(real_listeners) / sizeof(real_listeners[0])));
	tcase_add_test(tc, test_netns);
	suite_add_tcase(s, tc);

	tc = tcase_create("sockets");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_listen_connect);
	tcase_add_test(tc, test_connect_absent);
	tcase_add_test(tc, test_connect_first);
	tcase_add_test(tc, test_connect_backlog_full);
	tcase_add_test(tc, test_name_clash);
	suite_add_tcase(s, tc);

	tc = tcase_create("messages");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_msg_roundtrip);
	tcase_add_test(tc, test_msg_sender_cred);
	tcase_add_test(tc, test_send_errors);
	tcase_add_test(tc, test_recv_eof);
	suite_add_tcase(s, tc);

	tc = tcase_create("abuse");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_bad_packets, 0, 2 * NR_BAD);
	tcase_add_test(tc, test_unexpected_fds);
	tcase_add_test(tc, test_garbage_packets);
	suite_add_tcase(s, tc);

	tc = tcase_create("proof");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_propose_proof);
	suite_add_tcase(s, tc);
	return s;
}
