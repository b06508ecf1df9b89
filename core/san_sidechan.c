/* core — the shm side channel: names, listen/accept/connect, one validated message per packet. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "core/san_fdtable.h"
#include "core/san_sidechan.h"

/* Linux >= 6.5; glibc 2.36 does not name them yet. */
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/*
 * Raw system calls for everything preload/ interposes (see san_sidechan.h).
 * Each public function saves errno on entry and restores it on return.
 */
static long san_sys_ret(long r)
{
	return r < 0 ? -errno : r;
}

static void san_sys_close(int fd)
{
	syscall(SYS_close, (long)fd);
}

static int san_sys_setsockopt_int(int fd, int level, int opt, int val)
{
	return (int)san_sys_ret(
		syscall(SYS_setsockopt, (long)fd, (long)level, (long)opt, &val, (long)sizeof(val)));
}

/* A fresh fd of ours: drop any stale fd-table entry its number may carry (cf. san_track_new). */
static int san_side_own_fd(int fd)
{
	san_fd_clear(fd);
	return fd;
}

/* ------------------------------------------------------------------------------------------ */
/* Names.                                                                                       */

#define SAN_SIDE_PREFIX "sanswitch/v1/"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

/* The thread's namespace inode: kernels without the cookie. */
static int san_side_netns_inode(uint64_t *netns)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st))
		return -errno;
	*netns = st.st_ino;
	return 0;
}

/* -ENOPROTOOPT where the kernel has no cookie (before 5.14), else 0 or -errno. */
static int san_side_netns_cookie(int fd, uint64_t *netns)
{
	socklen_t len = sizeof(*netns);
	long r = san_sys_ret(
		syscall(SYS_getsockopt, (long)fd, (long)SOL_SOCKET, (long)SO_NETNS_COOKIE, netns, &len));

	if (r == 0 && len != sizeof(*netns))
		r = -ENOPROTOOPT;
	return (int)r;
}

int san_sidechan_netns_fd(int fd, uint64_t *netns)
{
	int saved = errno, r = san_side_netns_cookie(fd, netns);

	if (r == -ENOPROTOOPT)
		r = san_side_netns_inode(netns);
	errno = saved;
	return r;
}

int san_sidechan_netns(uint64_t *netns)
{
	int saved = errno, fd, r;

	/* a socket made here is in the thread's namespace */
	fd = (int)san_sys_ret(
		syscall(SYS_socket, (long)AF_UNIX, (long)(SOCK_DGRAM | SOCK_CLOEXEC), 0L));
	r = fd < 0 ? -ENOPROTOOPT : san_side_netns_cookie(fd, netns);
	if (fd >= 0)
		san_sys_close(fd);
	if (r == -ENOPROTOOPT)
		r = san_side_netns_inode(netns);
	errno = saved;
	return r;
}

static int san_side_name_fmt(struct san_sidechan_name *n, uint64_t netns, const char *host,
			     uint16_t port)
{
	int len;

	if (!port)
		return -EINVAL;
	n->path[0] = '\0';
	len = snprintf(n->path + 1, sizeof(n->path) - 1, SAN_SIDE_PREFIX "%" PRIu64 "/%s/%u", netns,
		       host, (unsigned int)port);
	if (len < 0 || (size_t)len >= sizeof(n->path) - 1)
		return -ENAMETOOLONG;
	n->len = (socklen_t)(1 + len);
	return 0;
}

static const uint8_t san_side_any4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0 };
static const uint8_t san_side_any6[16];

static bool san_side_is_v4(const struct san_addr *a)
{
	return memcmp(a->addr, san_side_any4, 12) == 0;
}

/* The exact-address name: IPv4 and IPv4-mapped both dotted, so either kind of socket finds it. */
static int san_side_name_exact(struct san_sidechan_name *n, uint64_t netns,
			       const struct san_addr *a)
{
	char host[INET6_ADDRSTRLEN];
	bool v4 = san_side_is_v4(a);

	if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? a->addr + 12 : a->addr, host, sizeof(host)))
		return -EINVAL;
	return san_side_name_fmt(n, netns, host, a->port);
}

int san_sidechan_name_listener(struct san_sidechan_name *n, uint64_t netns,
			       const struct san_addr *local, bool v6only)
{
	if (!memcmp(local->addr, san_side_any4, 16))
		return san_side_name_fmt(n, netns, "any4", local->port);
	if (!memcmp(local->addr, san_side_any6, 16))
		return san_side_name_fmt(n, netns, v6only ? "any6" : "any", local->port);
	return san_side_name_exact(n, netns, local);
}

/* 32 hex digits of the address, then 4 of the port: fixed width, so IPv6 always fits. */
static size_t san_side_hex(char *out, const struct san_addr *a)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < 16; i++) {
		out[o++] = hex[a->addr[i] >> 4];
		out[o++] = hex[a->addr[i] & 15];
	}
	for (int sh = 12; sh >= 0; sh -= 4)
		out[o++] = hex[(a->port >> sh) & 15];
	return o;
}

int san_sidechan_name_conn(struct san_sidechan_name *n, uint64_t netns,
			   const struct san_addr *local, const struct san_addr *peer)
{
	char t[2 * 36 + 2];
	size_t o = san_side_hex(t, local);

	t[o++] = '-';
	o += san_side_hex(t + o, peer);
	t[o] = '\0';
	if (!local->port || !peer->port)
		return -EINVAL;
	n->path[0] = '\0';
	o = (size_t)snprintf(n->path + 1, sizeof(n->path) - 1, SAN_SIDE_PREFIX "%" PRIu64 "/c/%s",
			     netns, t);
	if (o >= sizeof(n->path) - 1)
		return -ENAMETOOLONG;
	n->len = (socklen_t)(1 + o);
	return 0;
}

int san_sidechan_listener_name(int tcp_lfd, uint64_t netns, struct san_sidechan_name *n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct san_addr a;
	int saved = errno, v6only = 0;
	long r;

	r = san_sys_ret(syscall(SYS_getsockname, (long)tcp_lfd, &ss, &len));
	if (r < 0)
		goto out;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;

		memcpy(a.addr, san_side_any4, 12);
		memcpy(a.addr + 12, &s4->sin_addr, 4);
		a.port = ntohs(s4->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;

		memcpy(a.addr, &s6->sin6_addr, 16);
		a.port = ntohs(s6->sin6_port);
		if (!memcmp(a.addr, san_side_any6, 16)) {
			len = sizeof(v6only);
			r = san_sys_ret(syscall(SYS_getsockopt, (long)tcp_lfd, (long)IPPROTO_IPV6,
						(long)IPV6_V6ONLY, &v6only, &len));
			if (r < 0)
				goto out;
		}
	} else {
		r = -EAFNOSUPPORT;
		goto out;
	}
	r = san_sidechan_name_listener(n, netns, &a, v6only != 0);
out:
	errno = saved;
	return (int)r;
}

int san_sidechan_dest_names(const struct san_addr *dst, uint64_t netns,
			    struct san_sidechan_name n[SAN_SIDECHAN_DEST_NAMES])
{
	bool v4 = san_side_is_v4(dst);
	int r;

	r = san_side_name_exact(&n[0], netns, dst);
	if (r == 0)
		r = san_side_name_fmt(&n[1], netns, v4 ? "any4" : "any6", dst->port);
	if (r == 0)
		r = san_side_name_fmt(&n[2], netns, "any", dst->port);
	return r < 0 ? r : SAN_SIDECHAN_DEST_NAMES;
}

/* ------------------------------------------------------------------------------------------ */
/* Sockets.                                                                                     */

static socklen_t san_side_sockaddr(const struct san_sidechan_name *n, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, n->path, n->len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->len);
}

static bool san_side_name_ok(const struct san_sidechan_name *n)
{
	return n->len > 1 && n->len <= sizeof(n->path) && n->path[0] == '\0';
}

static int san_side_socket(void)
{
	return (int)san_sys_ret(syscall(SYS_socket, (long)AF_UNIX,
					(long)(SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC), 0L));
}

/*
 * SO_PASSCRED on the listener is inherited by accepted sockets (and set again
 * there, to depend on nothing); a connecting socket gets it only after
 * connect(), because an unbound socket with SO_PASSCRED is autobound to a
 * name of its own when it connects, which would spend the namespace's
 * autobind names for nothing.
 */
int san_sidechan_listen(const struct san_sidechan_name *n)
{
	struct sockaddr_un sun;
	socklen_t len;
	int saved = errno, fd;
	long r;

	if (!san_side_name_ok(n))
		return -EINVAL;
	fd = san_side_socket();
	if (fd < 0)
		goto out;
	len = san_side_sockaddr(n, &sun);
	r = san_sys_setsockopt_int(fd, SOL_SOCKET, SO_PASSCRED, 1);
	if (r == 0)
		r = san_sys_ret(syscall(SYS_bind, (long)fd, &sun, (long)len));
	if (r == 0)
		r = san_sys_ret(syscall(SYS_listen, (long)fd, (long)SAN_SIDECHAN_BACKLOG));
	if (r < 0) {
		san_sys_close(fd);
		fd = (int)r;
		goto out;
	}
	san_side_own_fd(fd);
out:
	errno = saved;
	return fd;
}

int san_sidechan_accept(int lfd)
{
	int saved = errno, fd;
	long r;

	do
		r = san_sys_ret(syscall(SYS_accept4, (long)lfd, NULL, NULL,
					(long)(SOCK_NONBLOCK | SOCK_CLOEXEC)));
	while (r == -EINTR);
	fd = (int)r;
	if (fd >= 0) {
		san_side_own_fd(fd);
		r = san_sys_setsockopt_int(fd, SOL_SOCKET, SO_PASSCRED, 1);
		if (r < 0) {
			san_sys_close(fd);
			fd = (int)r;
		}
	}
	errno = saved;
	return fd;
}

/*
 * Connect fd to one name: 0, or -errno (the socket stays unconnected on a refusal: an AF_UNIX
 * connect that finds no such name changes nothing, so the next name may be tried on it).
 */
static int san_side_connect_on(int fd, const struct san_sidechan_name *n)
{
	struct sockaddr_un sun;
	socklen_t len;
	long r;

	if (!san_side_name_ok(n))
		return -EINVAL;
	len = san_side_sockaddr(n, &sun);
	do
		r = san_sys_ret(syscall(SYS_connect, (long)fd, &sun, (long)len));
	while (r == -EINTR);
	return (int)r;
}

int san_sidechan_connect_first(const struct san_sidechan_name *names, int n, int *which)
{
	int saved = errno, fd, i;
	long r = -ECONNREFUSED;

	for (i = 0; i < n; i++)
		if (!san_side_name_ok(&names[i]))
			return -EINVAL;
	fd = san_side_socket();
	if (fd < 0)
		goto out;
	for (i = 0; i < n && r == -ECONNREFUSED; i++)
		r = san_side_connect_on(fd, &names[i]);
	if (r == 0)
		r = san_sys_setsockopt_int(fd, SOL_SOCKET, SO_PASSCRED, 1);
	/*
	 * And the answerer's pidfd with each message (Linux 6.5; before, none comes and the
	 * proof goes by pid): its proof then reads the pid /proc knows it by and ends with
	 * the process still alive, as the listener's side has it (set after connect() as
	 * SO_PASSCRED is: either one set before would autobind the socket).
	 */
	if (r == 0)
		(void)san_sys_setsockopt_int(fd, SOL_SOCKET, SO_PASSPIDFD, 1);
	if (r < 0) {
		san_sys_close(fd);
		fd = (int)r;
		goto out;
	}
	if (which)
		*which = i - 1;
	san_side_own_fd(fd);
out:
	errno = saved;
	return fd;
}

int san_sidechan_connect(const struct san_sidechan_name *n)
{
	return san_sidechan_connect_first(n, 1, NULL);
}

int san_sidechan_connect_dest(const struct san_addr *dst, uint64_t netns,
			      struct san_sidechan_name *used)
{
	struct san_sidechan_name names[SAN_SIDECHAN_DEST_NAMES];
	int n, fd, which = 0;

	n = san_sidechan_dest_names(dst, netns, names);
	if (n < 0)
		return n;
	fd = san_sidechan_connect_first(names, n, &which);
	if (fd >= 0 && used)
		*used = names[which];
	return fd;
}

int san_sidechan_peercred(int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);
	int saved = errno;
	long r;

	r = san_sys_ret(
		syscall(SYS_getsockopt, (long)fd, (long)SOL_SOCKET, (long)SO_PEERCRED, cred, &len));
	if (r == 0 && len != sizeof(*cred))
		r = -EIO;
	errno = saved;
	return (int)r;
}

int san_sidechan_pass_pidfd(int fd)
{
	int saved = errno, r;

	/* Kernels before 6.5 answer -ENOPROTOOPT: an unknown SOL_SOCKET option. */
	r = san_sys_setsockopt_int(fd, SOL_SOCKET, SO_PASSPIDFD, 1);
	errno = saved;
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Messages.                                                                                    */

int san_sidechan_send(int fd, const struct san_msg *m, int pass_fd)
{
	unsigned char buf[SAN_SIDE_MSG_MAX];
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct iovec iov;
	struct msghdr mh;
	int saved = errno, n;
	long r;

	if (!san_type_on_chan(m->type, SAN_CHAN_SIDE))
		return -EINVAL;
	n = san_msg_encode(m, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOSPC ? -EMSGSIZE : n;
	iov.iov_base = buf;
	iov.iov_len = (size_t)n;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = sizeof(cbuf.b);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	/* MSG_NOSIGNAL: a peer that went away is -EPIPE here, never SIGPIPE to the application. */
	do
		r = san_sys_ret(
			syscall(SYS_sendmsg, (long)fd, &mh, (long)(MSG_NOSIGNAL | MSG_DONTWAIT)));
	while (r == -EINTR);
	/* A SEQPACKET send is all or nothing. */
	if (r >= 0)
		r = r == n ? 0 : -EIO;
	errno = saved;
	return (int)r;
}

void san_side_rx_close_fds(struct san_side_rx *rx)
{
	if (rx->fd >= 0)
		san_sys_close(rx->fd);
	if (rx->pidfd >= 0)
		san_sys_close(rx->pidfd);
	rx->fd = -1;
	rx->pidfd = -1;
}

/*
 * Room for what we accept and a little more: credentials, a pidfd, and a few
 * SCM_RIGHTS slots. Only one fd is ever legitimate; the extra slots let a
 * message with a few fds be seen (and closed) whole. When more arrive than
 * fit, the kernel installs what fits, sets MSG_CTRUNC and releases the rest
 * itself, so a flood of fds never lands in our table beyond this bound (16
 * when no credentials or pidfd take the room), and never stays there.
 */
#define SAN_SIDE_RX_FDS 4

static int san_side_rx_cmsgs(struct msghdr *mh, struct san_side_rx *rx, int *fds, int *nfds)
{
	int bad = 0;

	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t dlen = c->cmsg_len - CMSG_LEN(0);

		if (c->cmsg_level != SOL_SOCKET) {
			bad = 1;
		} else if (c->cmsg_type == SCM_RIGHTS) {
			for (size_t i = 0; i + sizeof(int) <= dlen; i += sizeof(int)) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + i, sizeof(int));
				if (*nfds < SAN_SIDE_RX_FDS)
					fds[(*nfds)++] = san_side_own_fd(fd);
				else
					san_sys_close(fd);
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS && dlen >= sizeof(struct ucred)) {
			memcpy(&rx->cred, CMSG_DATA(c), sizeof(struct ucred));
		} else if (c->cmsg_type == SCM_PIDFD && dlen >= sizeof(int)) {
			int pfd;

			/* A negative value is the kernel saying it could not make one. */
			memcpy(&pfd, CMSG_DATA(c), sizeof(int));
			if (pfd >= 0) {
				if (rx->pidfd >= 0)
					san_sys_close(rx->pidfd);
				rx->pidfd = san_side_own_fd(pfd);
			}
		} else {
			bad = 1;
		}
	}
	return bad;
}

static int san_sidechan_recv_inner(int fd, struct san_side_rx *rx, bool want_fd)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) +
		       CMSG_SPACE(sizeof(int) * SAN_SIDE_RX_FDS)];
	} cbuf;
	int fds[SAN_SIDE_RX_FDS], nfds, bad;
	struct iovec iov = { rx->buf, sizeof(rx->buf) };
	struct msghdr mh;
	long n;
	int r;

	rx->fd = -1;
	rx->pidfd = -1;
	rx->len = 0;
	memset(&rx->cred, 0, sizeof(rx->cred));
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	do
		n = san_sys_ret(syscall(SYS_recvmsg, (long)fd, &mh,
					(long)(MSG_DONTWAIT | MSG_CMSG_CLOEXEC)));
	while (n == -EINTR);
	if (n < 0)
		return (int)n;
	bad = san_side_rx_cmsgs(&mh, rx, fds, &nfds);

	if (mh.msg_flags & MSG_CTRUNC)
		r = -EPROTO;
	else if (mh.msg_flags & MSG_TRUNC)
		r = -EMSGSIZE;
	else if (n == 0)
		r = -EPIPE;
	else if (bad || nfds > (want_fd ? 1 : 0))
		r = -EPROTO;
	else
		r = san_msg_decode(rx->buf, (size_t)n, SAN_CHAN_SIDE, SAN_SIDE_MSG_MAX, &rx->msg);
	/* One packet, one message: trailing bytes are not ours to ignore. */
	if (r == 0 && rx->msg.wire_len != (uint32_t)n)
		r = -SAN_PROTO_ELENGTH;

	if (r == 0) {
		rx->len = (size_t)n;
		rx->fd = nfds ? fds[0] : -1;
		return 0;
	}
	for (int i = 0; i < nfds; i++)
		san_sys_close(fds[i]);
	san_side_rx_close_fds(rx);
	return r;
}

int san_sidechan_recv(int fd, struct san_side_rx *rx, bool want_fd)
{
	int saved = errno, r = san_sidechan_recv_inner(fd, rx, want_fd);

	errno = saved;
	return r;
}
