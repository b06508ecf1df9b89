/* core — ownership proof: tuples, socket inodes, sock_diag and /proc lookups, /proc fd scans. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "core/san_owner.h"

/*
 * The calls preload/ interposes go through syscall(2) (see san_owner.h); the
 * public functions save errno on entry and restore it on return, so nothing
 * here needs to care about errno beyond turning it into -errno at once.
 */
static long san_sys_ret(long r)
{
	return r < 0 ? -errno : r;
}

static int san_sys_close(int fd)
{
	return (int)san_sys_ret(syscall(SYS_close, (long)fd));
}

static long san_sys_read(int fd, void *buf, size_t len)
{
	long r;

	do
		r = san_sys_ret(syscall(SYS_read, (long)fd, buf, len));
	while (r == -EINTR);
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Tuples and inodes.                                                                          */

static const uint8_t san_v4mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool san_addr_is_v4(const struct san_addr *a)
{
	return memcmp(a->addr, san_v4mapped_prefix, sizeof(san_v4mapped_prefix)) == 0;
}

bool san_addr_eq(const struct san_addr *a, const struct san_addr *b)
{
	return a->port == b->port && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

void san_tuple_reverse(const struct san_tuple *t, struct san_tuple *r)
{
	struct san_tuple tmp = *t;

	r->local = tmp.peer;
	r->peer = tmp.local;
	r->scope_id = tmp.scope_id;
}

/* One sockaddr into the 16-byte form: IPv4 as ::ffff:a.b.c.d, IPv6 (mapped or not) as is. */
static int san_addr_from_sockaddr(const struct sockaddr_storage *ss, struct san_addr *a,
				  uint32_t *scope_id)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		memcpy(a->addr, san_v4mapped_prefix, sizeof(san_v4mapped_prefix));
		memcpy(a->addr + 12, &s4->sin_addr, 4);
		a->port = ntohs(s4->sin_port);
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		memcpy(a->addr, &s6->sin6_addr, 16);
		a->port = ntohs(s6->sin6_port);
		if (scope_id)
			*scope_id = s6->sin6_scope_id;
		return 0;
	}
	return -EAFNOSUPPORT;
}

int san_owner_addr(const struct sockaddr *sa, socklen_t len, struct san_addr *a)
{
	struct sockaddr_storage ss = { 0 };

	if (!sa || len < sizeof(struct sockaddr_in) || len > sizeof(ss))
		return -EINVAL;
	memcpy(&ss, sa, len);
	if (ss.ss_family == AF_INET6 && len < sizeof(struct sockaddr_in6))
		return -EINVAL;
	return san_addr_from_sockaddr(&ss, a, NULL);
}

static int san_owner_tuple_inner(int fd, struct san_tuple *t)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	long r;

	memset(t, 0, sizeof(*t));
	r = san_sys_ret(syscall(SYS_getsockname, (long)fd, &ss, &len));
	if (r < 0)
		return (int)r;
	r = san_addr_from_sockaddr(&ss, &t->local, &t->scope_id);
	if (r < 0)
		return (int)r;
	len = sizeof(ss);
	r = san_sys_ret(syscall(SYS_getpeername, (long)fd, &ss, &len));
	if (r < 0)
		return (int)r;
	r = san_addr_from_sockaddr(&ss, &t->peer, NULL);
	if (r < 0)
		return (int)r;
	/* A connected TCP socket has both ports; anything else is not a connection. */
	if (!t->local.port || !t->peer.port)
		return -ENOTCONN;
	return 0;
}

int san_owner_tuple(int fd, struct san_tuple *t)
{
	int saved = errno, r = san_owner_tuple_inner(fd, t);

	errno = saved;
	return r;
}

int san_owner_inode(int fd, uint64_t *ino)
{
	int saved = errno, r = 0;
	struct stat st;

	if (fstat(fd, &st))
		r = -errno;
	else if (!S_ISSOCK(st.st_mode))
		r = -ENOTSOCK;
	else
		*ino = st.st_ino;
	errno = saved;
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Finding an endpoint: the lookup targets shared by both methods.                             */

/*
 * One endpoint to find. err starts at -ENOENT; a row with the tuple and an
 * inode makes it 0. A row without an inode is a socket no process holds: in
 * ESTABLISHED or SYN_RECV that is a connection still in its listener's
 * accept queue (-EAGAIN: it will have an owner soon); in any other state an
 * orphan that its owner already closed (FIN_WAIT*, TIME_WAIT...), which is
 * as good as absent.
 */
struct san_target {
	const struct san_tuple *t;
	uint64_t ino;
	uint32_t uid; /* the socket's owner (the creator's uid), once found */
	int err;
};

static void san_target_init(struct san_target *tg, const struct san_tuple *t)
{
	tg->t = t;
	tg->ino = 0;
	tg->uid = (uint32_t)-1;
	tg->err = -ENOENT;
}

static void san_target_found(struct san_target *tg, uint64_t ino, unsigned int state, uint32_t uid)
{
	if (tg->err == 0)
		return;
	if (ino) {
		tg->ino = ino;
		tg->uid = uid;
		tg->err = 0;
	} else if (state == TCP_ESTABLISHED || state == TCP_SYN_RECV) {
		tg->err = -EAGAIN;
	}
}

static bool san_targets_done(const struct san_target *tg, int n)
{
	for (int i = 0; i < n; i++)
		if (tg[i].err != 0)
			return false;
	return true;
}

static bool san_tuple_valid(const struct san_tuple *t)
{
	return t->local.port && t->peer.port;
}

/* ------------------------------------------------------------------------------------------ */
/* sock_diag: one exact lookup per endpoint.                                                    */

/*
 * A request without NLM_F_DUMP makes inet_diag look the socket up by its
 * 4-tuple in the kernel's hash tables, as the receive path does: O(1),
 * unprivileged, and in the netns of the netlink socket. That lookup falls
 * back to a *listener* on the local port when no connection matches (seen on
 * 6.18), so the answer is only trusted if it is not a listener and carries
 * exactly the tuple asked for.
 */
static int san_diag_open(void)
{
	return (int)san_sys_ret(syscall(SYS_socket, (long)AF_NETLINK,
					(long)(SOCK_DGRAM | SOCK_CLOEXEC),
					(long)NETLINK_SOCK_DIAG));
}

/* The tuple as inet_diag_req_v2 wants it: AF_INET when both ends are IPv4. */
static void san_diag_fill_id(const struct san_tuple *t, struct inet_diag_req_v2 *r)
{
	bool v4 = san_addr_is_v4(&t->local) && san_addr_is_v4(&t->peer);

	r->sdiag_family = v4 ? AF_INET : AF_INET6;
	r->sdiag_protocol = IPPROTO_TCP;
	r->idiag_states = ~0u;
	r->id.idiag_sport = htons(t->local.port);
	r->id.idiag_dport = htons(t->peer.port);
	if (v4) {
		memcpy(&r->id.idiag_src[0], t->local.addr + 12, 4);
		memcpy(&r->id.idiag_dst[0], t->peer.addr + 12, 4);
	} else {
		memcpy(r->id.idiag_src, t->local.addr, 16);
		memcpy(r->id.idiag_dst, t->peer.addr, 16);
	}
	r->id.idiag_if = t->scope_id;
	r->id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	r->id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
}

/* An address of a diag reply, in the 16-byte form, by the family of the socket found. */
static void san_diag_addr(uint8_t family, const __be32 *w, __be16 port, struct san_addr *a)
{
	if (family == AF_INET) {
		memcpy(a->addr, san_v4mapped_prefix, sizeof(san_v4mapped_prefix));
		memcpy(a->addr + 12, &w[0], 4);
	} else {
		memcpy(a->addr, w, 16);
	}
	a->port = ntohs(port);
}

/* Set once sock_diag has answered a lookup: from then on its -ENOENT means "no such socket". */
static int san_diag_works;

/*
 * Ask about one target. 0 with tg updated, or -errno when sock_diag itself
 * failed; a kernel without inet_diag answers -ENOENT to everything, which is
 * reported as such (the caller decides what it means).
 */
static int san_diag_query(int nl, struct san_target *tg, uint32_t seq)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} rsp;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	const struct inet_diag_msg *m;
	struct san_addr src, dst;
	long n;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.nlh.nlmsg_seq = seq;
	san_diag_fill_id(tg->t, &req.r);
	n = san_sys_ret(syscall(SYS_sendto, (long)nl, &req, sizeof(req), 0L, &kernel,
				(long)sizeof(kernel)));
	if (n < 0)
		return (int)n;
	/*
	 * The kernel answers inside sendto() (netlink requests to the kernel
	 * run in the sender's context), so the reply is already queued; never
	 * block here.
	 */
	do
		n = san_sys_ret(syscall(SYS_recvfrom, (long)nl, &rsp, sizeof(rsp),
					(long)(MSG_DONTWAIT | MSG_TRUNC), NULL, NULL));
	while (n == -EINTR);
	if (n < 0)
		return n == -EAGAIN ? -EIO : (int)n;
	if ((size_t)n > sizeof(rsp) || (size_t)n < sizeof(struct nlmsghdr) ||
	    rsp.nlh.nlmsg_len > (size_t)n || rsp.nlh.nlmsg_seq != seq)
		return -EIO;
	if (rsp.nlh.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&rsp.nlh);

		if (rsp.nlh.nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EIO;
		return e->error == -ENOENT ? 0 : (e->error < 0 ? e->error : -EIO);
	}
	if (rsp.nlh.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    rsp.nlh.nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EIO;
	__atomic_store_n(&san_diag_works, 1, __ATOMIC_RELAXED);
	m = NLMSG_DATA(&rsp.nlh);
	san_diag_addr(m->idiag_family, m->id.idiag_src, m->id.idiag_sport, &src);
	san_diag_addr(m->idiag_family, m->id.idiag_dst, m->id.idiag_dport, &dst);
	if (m->idiag_state == TCP_LISTEN || !san_addr_eq(&src, &tg->t->local) ||
	    !san_addr_eq(&dst, &tg->t->peer))
		return 0; /* the listener fallback: no such connection */
	san_target_found(tg, m->idiag_inode, m->idiag_state, m->idiag_uid);
	return 0;
}

/* kept: a netlink socket the caller keeps open (san_owner_diag_open), or -1: one of our own */
static int san_diag_lookup_targets(struct san_target *tg, int n, int kept)
{
	int nl = kept >= 0 ? kept : san_diag_open(), r = 0;

	if (nl < 0)
		return nl;
	for (int i = 0; i < n && r == 0; i++)
		r = san_diag_query(nl, &tg[i], (uint32_t)i + 1);
	if (nl != kept)
		san_sys_close(nl);
	return r;
}

int san_owner_diag_open(void)
{
	int saved = errno, r = san_diag_open();

	errno = saved;
	return r;
}

int san_owner_diag_lookup(const struct san_tuple *t, uint64_t *ino)
{
	int saved = errno, r;
	struct san_target tg;

	if (!san_tuple_valid(t))
		return -EINVAL;
	san_target_init(&tg, t);
	r = san_diag_lookup_targets(&tg, 1, -1);
	if (r == 0) {
		r = tg.err;
		*ino = tg.ino;
	}
	errno = saved;
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* /proc/net/tcp{,6}: the portable fallback.                                                   */

/*
 * A row, as printed by tcp4_seq_show()/tcp6_seq_show():
 *
 *   "%4d: %08X:%04X %08X:%04X %02X %08X:%08X %02X:%08lX %08X %5u %8d %lu ..."
 *    sl   local     rem       st  tx:rx      tr:when    retr  uid timeout inode
 *
 * IPv6 addresses are four %08X words. Each word is the 32-bit value as it
 * lies in memory (network byte order) printed as a host integer, so on a
 * little-endian host 127.0.0.1 reads "0100007F": parse the word, store it
 * back in host order and the bytes come out in network order on any host.
 * Ports are converted by the kernel and print in plain order.
 */

static void san_skip_ws(const char **p, const char *e)
{
	while (*p < e && (**p == ' ' || **p == '\t'))
		(*p)++;
}

static bool san_need_ws(const char **p, const char *e)
{
	if (*p >= e || (**p != ' ' && **p != '\t'))
		return false;
	san_skip_ws(p, e);
	return true;
}

static int san_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Exactly @ndig hex digits (at most 8). */
static bool san_parse_hex(const char **p, const char *e, int ndig, uint32_t *v)
{
	uint32_t x = 0;

	if (e - *p < ndig)
		return false;
	for (int i = 0; i < ndig; i++) {
		int d = san_hexval((*p)[i]);

		if (d < 0)
			return false;
		x = x << 4 | (uint32_t)d;
	}
	*p += ndig;
	*v = x;
	return true;
}

/* One or more decimal digits, value at most @max. */
static bool san_parse_dec(const char **p, const char *e, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	const char *s = *p;

	while (*p < e && **p >= '0' && **p <= '9') {
		unsigned int d = (unsigned int)(**p - '0');

		if (x > (max - d) / 10)
			return false;
		x = x * 10 + d;
		(*p)++;
	}
	*v = x;
	return *p > s;
}

/* A field we do not need: one or more non-blank characters. */
static bool san_skip_field(const char **p, const char *e)
{
	const char *s = *p;

	while (*p < e && **p != ' ' && **p != '\t')
		(*p)++;
	return *p > s;
}

/* "ADDR:PORT" with an 8- or 32-digit address, into the 16-byte form. */
static bool san_parse_endpoint(const char **p, const char *e, bool v6, struct san_addr *a)
{
	uint32_t w, port;

	if (v6) {
		for (int i = 0; i < 4; i++) {
			if (!san_parse_hex(p, e, 8, &w))
				return false;
			memcpy(a->addr + 4 * i, &w, 4);
		}
	} else {
		if (!san_parse_hex(p, e, 8, &w))
			return false;
		memcpy(a->addr, san_v4mapped_prefix, sizeof(san_v4mapped_prefix));
		memcpy(a->addr + 12, &w, 4);
	}
	if (*p >= e || **p != ':')
		return false;
	(*p)++;
	if (!san_parse_hex(p, e, 4, &port))
		return false;
	a->port = (uint16_t)port;
	return true;
}

int san_owner_parse_tcp_row(const char *line, size_t len, bool v6, struct san_tcp_row *row)
{
	const char *p = line, *e = line + len;
	uint64_t v;
	uint32_t st;

	san_skip_ws(&p, e);
	if (!san_parse_dec(&p, e, UINT32_MAX, &v) || p >= e || *p++ != ':')
		return -EINVAL;
	if (!san_need_ws(&p, e) || !san_parse_endpoint(&p, e, v6, &row->local))
		return -EINVAL;
	if (!san_need_ws(&p, e) || !san_parse_endpoint(&p, e, v6, &row->peer))
		return -EINVAL;
	if (!san_need_ws(&p, e) || !san_parse_hex(&p, e, 2, &st))
		return -EINVAL;
	if (st < TCP_ESTABLISHED || st > TCP_CLOSING)
		return -EINVAL;
	row->state = (uint8_t)st;
	/* tx_queue:rx_queue, tr:tm->when, retrnsmt */
	for (int i = 0; i < 3; i++)
		if (!san_need_ws(&p, e) || !san_skip_field(&p, e))
			return -EINVAL;
	if (!san_need_ws(&p, e) || !san_parse_dec(&p, e, UINT32_MAX, &v))
		return -EINVAL;
	row->uid = (uint32_t)v;
	/* timeout */
	if (!san_need_ws(&p, e) || !san_skip_field(&p, e))
		return -EINVAL;
	if (!san_need_ws(&p, e) || !san_parse_dec(&p, e, UINT64_MAX, &row->inode))
		return -EINVAL;
	/*
	 * The kernel always prints more after the inode (the refcount first):
	 * requiring a next field rejects a line cut inside the inode number.
	 */
	if (!san_need_ws(&p, e) || p >= e || *p == '\n')
		return -EINVAL;
	return 0;
}

static void san_proc_row(const char *line, size_t len, bool v6, struct san_target *tg, int n)
{
	struct san_tcp_row row;

	if (san_owner_parse_tcp_row(line, len, v6, &row))
		return; /* the header, or a line we do not understand: never a match */
	if (row.state == TCP_LISTEN)
		return;
	for (int i = 0; i < n; i++)
		if (san_addr_eq(&row.local, &tg[i].t->local) &&
		    san_addr_eq(&row.peer, &tg[i].t->peer))
			san_target_found(&tg[i], row.inode, row.state, row.uid);
}

/*
 * Rows are about 150 (tcp) or 180 (tcp6) bytes; the files grow with the
 * number of sockets, so they are streamed through this buffer and a line that
 * does not fit is dropped whole.
 */
#define SAN_PROC_BUF 8192

static int san_proc_scan(const char *path, bool v6, struct san_target *tg, int n)
{
	char buf[SAN_PROC_BUF];
	size_t have = 0, start;
	bool skipping = false;
	int fd;
	long r;

	fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		char *nl;

		r = san_sys_read(fd, buf + have, sizeof(buf) - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		start = 0;
		while ((nl = memchr(buf + start, '\n', have - start))) {
			if (!skipping)
				san_proc_row(buf + start, (size_t)(nl - (buf + start)), v6, tg, n);
			skipping = false;
			start = (size_t)(nl - buf) + 1;
		}
		if (start == 0 && have == sizeof(buf)) {
			skipping = true; /* a line longer than the buffer: drop it */
			have = 0;
			continue;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (san_targets_done(tg, n))
			break;
	}
	if (r == 0 && have && !skipping)
		san_proc_row(buf, have, v6, tg, n);
	san_sys_close(fd);
	return r < 0 ? (int)r : 0;
}

/*
 * An IPv4 connection may belong to an AF_INET socket (tcp) or to a dual-stack
 * AF_INET6 socket with mapped addresses (tcp6); an IPv6 one only to tcp6.
 * /proc/thread-self: the calling thread's netns, as sock_diag uses.
 */
static int san_proc_lookup_targets(struct san_target *tg, int n)
{
	bool any_v4 = false;
	int r;

	for (int i = 0; i < n; i++)
		any_v4 |= san_addr_is_v4(&tg[i].t->local) && san_addr_is_v4(&tg[i].t->peer);
	if (any_v4) {
		r = san_proc_scan("/proc/thread-self/net/tcp", false, tg, n);
		if (r < 0 && r != -ENOENT)
			return r;
		if (san_targets_done(tg, n))
			return 0;
	}
	r = san_proc_scan("/proc/thread-self/net/tcp6", true, tg, n);
	/* No tcp6 file: a kernel without IPv6 has no such sockets. */
	return r == -ENOENT ? 0 : r;
}

int san_owner_proc_lookup(const struct san_tuple *t, uint64_t *ino)
{
	int saved = errno, r;
	struct san_target tg;

	if (!san_tuple_valid(t))
		return -EINVAL;
	san_target_init(&tg, t);
	r = san_proc_lookup_targets(&tg, 1);
	if (r == 0) {
		r = tg.err;
		*ino = tg.ino;
	}
	errno = saved;
	return r;
}

int san_owner_proc_lookup_file(const char *path, bool v6, const struct san_tuple *t, uint64_t *ino)
{
	int saved = errno, r;
	struct san_target tg;

	if (!san_tuple_valid(t))
		return -EINVAL;
	san_target_init(&tg, t);
	r = san_proc_scan(path, v6, &tg, 1);
	if (r == 0) {
		r = tg.err;
		*ino = tg.ino;
	}
	errno = saved;
	return r;
}

/*
 * sock_diag first; /proc when sock_diag cannot be used at all, or when it says
 * "no such socket" (-ENOENT) without ever having answered in this process:
 * that is also what a kernel without inet_diag says.
 */
static int san_lookup_targets(struct san_target *tg, int n, unsigned int flags, int kept)
{
	int r;

	if (!(flags & SAN_OWNER_F_PROC)) {
		r = san_diag_lookup_targets(tg, n, kept);
		if (r == 0 &&
		    (__atomic_load_n(&san_diag_works, __ATOMIC_RELAXED) || san_targets_done(tg, n)))
			return 0;
		for (int i = 0; i < n; i++)
			san_target_init(&tg[i], tg[i].t);
	}
	return san_proc_lookup_targets(tg, n);
}

int san_owner_find_inode(const struct san_tuple *t, uint64_t *ino)
{
	int saved = errno, r;
	struct san_target tg;

	if (!san_tuple_valid(t))
		return -EINVAL;
	san_target_init(&tg, t);
	r = san_lookup_targets(&tg, 1, 0, -1);
	if (r == 0) {
		r = tg.err;
		*ino = tg.ino;
	}
	errno = saved;
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Who holds an inode: /proc/<pid>/fd.                                                          */

static int san_proc_open_err(int err)
{
	if (err == ENOENT || err == ESRCH)
		return -ESRCH;
	if (err == EACCES || err == EPERM)
		return -EACCES;
	return -err;
}

/* "socket:[<ino>]", the link text of a socket fd. */
static int san_socket_link(uint64_t ino, char *buf, size_t cap)
{
	return snprintf(buf, cap, "socket:[%" PRIu64 "]", ino);
}

static int san_owner_pid_holds_inner(pid_t pid, uint64_t ino, int *fd)
{
	union {
		struct dirent64 d; /* alignment */
		char buf[4096];
	} dents;
	char path[32], want[40], link[64];
	int dfd, wlen, r = -ENOENT;
	long count = 0;

	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	wlen = san_socket_link(ino, want, sizeof(want));
	dfd = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return san_proc_open_err(errno);
	while (r == -ENOENT) {
		ssize_t n = getdents64(dfd, dents.buf, sizeof(dents.buf));

		if (n < 0) {
			r = san_proc_open_err(errno);
			break;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *d = (const struct dirent64 *)(dents.buf + off);
			ssize_t l;

			off += d->d_reclen;
			if (d->d_name[0] == '.')
				continue;
			if (++count > SAN_OWNER_SCAN_MAX) {
				r = -E2BIG;
				break;
			}
			l = readlinkat(dfd, d->d_name, link, sizeof(link));
			if (l < 0) {
				/* Closed since getdents: not this one. Lost access: say so. */
				if (errno == EACCES || errno == EPERM) {
					r = -EACCES;
					break;
				}
				continue;
			}
			if (l == wlen && memcmp(link, want, (size_t)wlen) == 0) {
				r = 0;
				if (fd)
					*fd = atoi(d->d_name);
				break;
			}
		}
	}
	san_sys_close(dfd);
	return r;
}

int san_owner_pid_holds_inode(pid_t pid, uint64_t ino)
{
	int saved = errno, r = san_owner_pid_holds_inner(pid, ino, NULL);

	errno = saved;
	return r;
}

int san_owner_pid_fd_of_inode(pid_t pid, uint64_t ino)
{
	int saved = errno, fd = -1, r = san_owner_pid_holds_inner(pid, ino, &fd);

	errno = saved;
	return r < 0 ? r : fd;
}

static int san_owner_pid_fd_inner(pid_t pid, int fd, uint64_t ino)
{
	char path[48], want[40], link[64];
	int wlen;
	ssize_t l;

	if (pid <= 0)
		return -ESRCH;
	if (fd < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	wlen = san_socket_link(ino, want, sizeof(want));
	l = readlinkat(AT_FDCWD, path, link, sizeof(link));
	if (l < 0)
		return errno == EACCES || errno == EPERM ? -EACCES : -ENOENT;
	return l == wlen && memcmp(link, want, (size_t)wlen) == 0 ? 0 : -ENOENT;
}

int san_owner_pid_fd_is_inode(pid_t pid, int fd, uint64_t ino)
{
	int saved = errno, r = san_owner_pid_fd_inner(pid, fd, ino);

	errno = saved;
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Credentials and pidfds.                                                                      */

int san_owner_check_cred(const struct ucred *c)
{
	return c->pid > 0 ? 0 : -ESRCH;
}

/*
 * The pid a pidfd refers to, from its fdinfo ("Pid:\t<n>", -1 once the
 * process has been reaped; since Linux 5.3). -ESRCH when it is gone, -EBADF
 * when @pidfd is not a pidfd.
 */
static int san_pidfd_pid(int pidfd, pid_t *pid)
{
	char path[48], buf[512], *p;
	uint64_t v;
	const char *q;
	long n;
	int fd;

	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", pidfd);
	fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -EBADF;
	n = san_sys_read(fd, buf, sizeof(buf) - 1);
	san_sys_close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	p = strstr(buf, "\nPid:");
	if (!p)
		return -EBADF;
	q = p + 5;
	san_skip_ws(&q, buf + n);
	if (q < buf + n && *q == '-')
		return -ESRCH;
	if (!san_parse_dec(&q, buf + n, INT_MAX, &v) || v == 0)
		return -ESRCH;
	*pid = (pid_t)v;
	return 0;
}

/* A pidfd polls readable once its process has exited. */
bool san_pidfd_exited(int pidfd)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	struct timespec zero = { 0, 0 };
	long r;

	/* > 0: readable (exited) or POLLNVAL; < 0: cannot tell, so no. */
	r = san_sys_ret(syscall(SYS_ppoll, &pfd, 1L, &zero, NULL, 8L));
	return r != 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The proof.                                                                                   */

/* A small file's first bytes, NUL-terminated; -errno. */
static int san_read_small(const char *path, char *buf, size_t len)
{
	int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	long n;

	if (fd < 0)
		return -errno;
	n = san_sys_read(fd, buf, len - 1);
	san_sys_close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

bool san_owner_init_userns(void)
{
	unsigned long long in, out, count;
	char buf[256];

	/* one line, "0 0 4294967295" */
	return san_read_small("/proc/self/uid_map", buf, sizeof(buf)) == 0 &&
	       sscanf(buf, "%llu %llu %llu", &in, &out, &count) == 3 && !in && !out &&
	       count == 4294967295ull && strchr(buf, '\n') == strrchr(buf, '\n');
}

/*
 * Can a uid the kernel reports to us stand for more than one user? Inside a user namespace
 * that does not map every uid (a container), every uid it does not map, in sock_diag as in
 * SCM_CREDENTIALS, reads as the overflow uid (65534 by default): two strangers would look
 * alike. In the initial namespace every uid is itself, nobody's included. Read at each proof by
 * uid (two small files; a process may unshare()).
 */
static bool san_uid_ambiguous(uint32_t uid)
{
	char buf[32];

	if (san_owner_init_userns())
		return false;
	if (san_read_small("/proc/sys/kernel/overflowuid", buf, sizeof(buf)) < 0)
		return true; /* cannot tell which uid is the overflow one: none proves */
	return uid == (uint32_t)strtoul(buf, NULL, 10);
}

/* The tuple (unless the caller knows it) and the inode of tcp_fd: the proof's first step. */
static int san_owner_own(int tcp_fd, const struct san_tuple *own_in, struct san_tuple *own,
			 uint64_t *own_ino)
{
	int r;

	if (own_in)
		*own = *own_in;
	else if ((r = san_owner_tuple_inner(tcp_fd, own)) < 0)
		return r;
	return san_owner_inode(tcp_fd, own_ino);
}

/* The rows of both ends: ours must be tcp_fd's (so this is the right netns), the peer's found. */
static int san_owner_rows_lookup(const struct san_tuple *own, uint64_t own_ino, unsigned int flags,
				 int kept, struct san_owner_rows *rows)
{
	struct san_tuple peer;
	struct san_target tg[2];
	int r;

	san_tuple_reverse(own, &peer);
	san_target_init(&tg[0], own);
	san_target_init(&tg[1], &peer);
	r = san_lookup_targets(tg, 2, flags, kept);
	if (r < 0)
		return r;
	if (tg[0].err || tg[0].ino != own_ino)
		return -EXDEV;
	if (tg[1].err)
		return tg[1].err == -EAGAIN ? -EAGAIN : -EREMOTE;
	rows->peer_ino = tg[1].ino;
	rows->peer_uid = tg[1].uid;
	return 0;
}

int san_owner_rows_find(int tcp_fd, const struct san_tuple *own_in, unsigned int flags,
			struct san_owner_rows *rows)
{
	struct san_tuple own;
	uint64_t own_ino;
	int saved = errno, r = san_owner_own(tcp_fd, own_in, &own, &own_ino);

	if (r == 0)
		r = san_owner_rows_lookup(&own, own_ino, flags, -1, rows);
	errno = saved;
	return r;
}

static int san_owner_prove_inner(int tcp_fd, const struct san_owner_proof *p)
{
	struct san_owner_rows found;
	const struct san_owner_rows *rows = p->rows;
	struct san_tuple own;
	uint64_t own_ino = 0;
	pid_t pid = p->pid;
	int r;

	if (!rows && (r = san_owner_own(tcp_fd, p->own, &own, &own_ino)) < 0)
		return r;
	if (p->pidfd >= 0) {
		r = san_pidfd_pid(p->pidfd, &pid);
		if (r < 0)
			return r;
	}
	if (pid <= 0)
		return -ESRCH;
	if (!rows) {
		r = san_owner_rows_lookup(&own, own_ino, p->flags, p->diag_fd - 1, &found);
		if (r < 0)
			return r;
		rows = &found;
	}

	r = -ENOENT;
	if (p->fd_hint >= 0)
		r = san_owner_pid_fd_inner(pid, p->fd_hint, rows->peer_ino);
	if (r == -ENOENT)
		r = san_owner_pid_holds_inner(pid, rows->peer_ino, NULL);
	if (r == -ENOENT)
		return -EPERM;
	if (r == -EACCES && (p->flags & SAN_OWNER_F_UID))
		/*
		 * Not ours to look into (another user's process): the socket's owner, from the
		 * kernel, stands for the process. Only a process of that user passes (root too
		 * only if root owns the socket; see san_owner.h).
		 */
		return rows->peer_uid == (uint32_t)p->uid && !san_uid_ambiguous(rows->peer_uid) ? 0
											       : -EPERM;
	if (r < 0)
		return r;
	/*
	 * Still running after the scan: the pid was this process's all along,
	 * so the /proc/<pid> we read was its (a pid is reused only once reaped).
	 */
	if (p->pidfd >= 0 && san_pidfd_exited(p->pidfd))
		return -ESRCH;
	return 0;
}

int san_owner_prove(int tcp_fd, const struct san_owner_proof *p)
{
	int saved = errno, r = san_owner_prove_inner(tcp_fd, p);

	errno = saved;
	return r;
}

int san_owner_prove_peer(int tcp_fd, pid_t peer_pid)
{
	struct san_owner_proof p = { .pid = peer_pid, .pidfd = -1, .fd_hint = -1 };

	return san_owner_prove(tcp_fd, &p);
}
