/* preload — wrappers: socket setup and control (socket, listen, accept, connect, options). */
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include "preload/san_preload.h"

SAN_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = SAN_REAL(socket)(domain, type, protocol);

	if (fd >= 0)
		san_track_socket(fd, domain, type, protocol);
	return fd;
}

/* AF_UNIX only on Linux: never a candidate, only clear stale slots. */
SAN_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int ret = SAN_REAL(socketpair)(domain, type, protocol, sv);

	if (ret == 0) {
		san_track_new(sv[0], "socketpair");
		san_track_new(sv[1], "socketpair");
	}
	return ret;
}

/* A switched fd is a connected stream: what the kernel answers for one. */
SAN_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	if (unlikely(san_switched(fd)))
		return san_ret(-EINVAL);
	return SAN_REAL(bind)(fd, addr, len);
}

/*
 * A bound socket's providers' listeners come before the kernel's listen, so that a client that
 * connects at once finds them (san_sock_before_listen); a listen() again on a listener (a new
 * backlog) makes none.
 */
SAN_EXPORT int listen(int fd, int backlog)
{
	struct san_fd *f;
	bool early = false;
	int ret, e;

	if (unlikely(san_switched(fd)))
		return san_ret(-EINVAL);
	f = san_fd_get(fd);
	if (f && san_fd_state(f) == SAN_FD_TCP && !san_fd_guarded())
		early = san_sock_before_listen(fd);
	ret = SAN_REAL(listen)(fd, backlog);
	if (ret < 0) {
		if (early) {
			e = errno;
			san_prov_unlisten(fd);
			errno = e;
		}
		return ret;
	}
	if (!san_fd_guarded()) {
		bool was = (f = san_fd_get(fd)) && san_fd_state(f) == SAN_FD_LISTENER;

		san_track_listen(fd);
		if (!was && !early && (f = san_fd_get(fd)) && san_fd_state(f) == SAN_FD_LISTENER)
			san_sock_on_listen(fd);
	}
	return ret;
}

SAN_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	int nfd;

	if (unlikely(san_switched(fd)))
		return san_ret(-EINVAL);
	nfd = SAN_REAL(accept)(fd, addr, len);
	if (nfd >= 0) {
		san_track_accept(fd, nfd, 0);
		san_sock_on_accept(fd, nfd);
	}
	return nfd;
}

SAN_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len, int flags)
{
	__typeof__(san_real.accept4) fn = SAN_REAL(accept4);
	int nfd;

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		return san_ret(-EINVAL);
	nfd = fn(fd, addr, len, flags);
	if (nfd >= 0) {
		san_track_accept(fd, nfd, flags);
		san_sock_on_accept(fd, nfd);
	}
	return nfd;
}

SAN_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int ret;

	if (unlikely(san_switched(fd)))
		return san_ret(-EISCONN);
	ret = SAN_REAL(connect)(fd, addr, len);
	san_track_connect(fd, ret);
	if ((ret == 0 || errno == EINPROGRESS) && san_managed(fd) && !san_sock_known(fd)) {
		int e = errno;

		san_sock_on_connect(fd, addr.__sockaddr__, len);
		errno = e;
	}
	return ret;
}

SAN_EXPORT int shutdown(int fd, int how)
{
	if (unlikely(san_managed(fd))) {
		int r = san_sock_shutdown(fd, how);

		if (r != SAN_PASS)
			return (int)san_ret(r);
	}
	return SAN_REAL(shutdown)(fd, how);
}

SAN_EXPORT int getsockopt(int fd, int level, int name, void *__restrict val,
			  socklen_t *__restrict len)
{
	/* (before the switched test: the swap may come between the two) */
	if (unlikely(level == SOL_SOCKET && name == SO_RCVLOWAT && san_managed(fd)) && val && len &&
	    *len >= sizeof(int)) {
		int v, r = san_sock_rcvlowat(fd, &v, false);

		if (r != SAN_PASS) {
			if (r == 0) {
				memcpy(val, &v, sizeof(v));
				*len = sizeof(v);
			}
			return (int)san_ret(r);
		}
	}
	if (unlikely(san_switched(fd))) {
		int e;

		/* (as the kernel answers: at most an int's bytes, fewer if the caller asks fewer) */
		if (level == IPPROTO_TCP && name == TCP_CORK && val && len && *len <= INT_MAX &&
		    san_sock_tcp_cork(fd, &e, false) == 0) {
			if (*len > sizeof(e))
				*len = sizeof(e);
			memcpy(val, &e, *len);
			return 0;
		}

		/* A reset on the SAN is this socket's pending error, as RST would be on TCP. */
		if (level == SOL_SOCKET && name == SO_ERROR && len && *len >= sizeof(int) &&
		    san_sock_so_error(fd, &e) == 0) {
			memcpy(val, &e, sizeof(e));
			*len = sizeof(e);
			return 0;
		}
		fd = san_sock_anchor(fd);
	}
	return SAN_REAL(getsockopt)(fd, level, name, val, len);
}

SAN_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int kfd, r;

	if (unlikely(level == SOL_SOCKET && name == SO_RCVLOWAT && san_managed(fd)) && val &&
	    len >= sizeof(int)) {
		int v;

		memcpy(&v, val, sizeof(v));
		if (v < 0)
			v = INT_MAX; /* as the kernel reads it */
		r = san_sock_rcvlowat(fd, &v, true);
		if (r != SAN_PASS)
			return (int)san_ret(r);
	}
	if (unlikely(san_switched(fd)) && level == IPPROTO_TCP && name == TCP_CORK && val &&
	    len >= sizeof(int)) {
		int v;

		memcpy(&v, val, sizeof(v));
		if (san_sock_tcp_cork(fd, &v, true) == 0)
			return 0; /* kept with the connection: nothing for the anchor to do */
	}
	kfd = unlikely(san_switched(fd)) ? san_sock_anchor(fd) : fd;
	r = SAN_REAL(setsockopt)(kfd, level, name, val, len);
	/* TCP_NODELAY set pushes what a cork holds, once, as the kernel's does */
	if (unlikely(r == 0 && kfd != fd && level == IPPROTO_TCP && name == TCP_NODELAY && val &&
		     len >= sizeof(int))) {
		int v;

		memcpy(&v, val, sizeof(v));
		if (v)
			san_sock_tcp_push(fd);
	}

	/* Buffer sizes the application chose bound what a switched connection holds too. */
	if (unlikely(r == 0 && level == SOL_SOCKET &&
		     (name == SO_SNDBUF || name == SO_RCVBUF || name == SO_SNDBUFFORCE ||
		      name == SO_RCVBUFFORCE) &&
		     san_fd_get(fd)))
		san_sock_on_bufsize(fd, name == SO_SNDBUF || name == SO_SNDBUFFORCE);
	return r;
}

SAN_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	if (unlikely(san_switched(fd)))
		fd = san_sock_anchor(fd);
	return SAN_REAL(getsockname)(fd, addr, len);
}

SAN_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	if (unlikely(san_switched(fd)))
		fd = san_sock_anchor(fd);
	return SAN_REAL(getpeername)(fd, addr, len);
}
