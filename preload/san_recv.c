/* preload — wrappers: the receive side (recv*, read*, and their FORTIFY variants). */
#include "preload/san_preload.h"

#define SAN_ROUTE_RECV(fd, iov, cnt, flags, mflags)                                 \
	do {                                                                        \
		if (unlikely(san_managed(fd))) {                                    \
			ssize_t san_r_ = san_route_recv(fd, iov, cnt, flags, mflags); \
			if (san_r_ != SAN_PASS)                                     \
				return san_ret(san_r_);                             \
		}                                                                   \
	} while (0)

SAN_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };

	SAN_ROUTE_RECV(fd, &v, 1, flags, NULL);
	return SAN_REAL(recv)(fd, buf, len, flags);
}

/* TCP fills in no address: the length comes back 0, as from the kernel. */
SAN_EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t len, int flags,
			    __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	struct iovec v = { buf, len };

	if (unlikely(san_managed(fd))) {
		ssize_t r = san_route_recv(fd, &v, 1, flags, NULL);

		if (r != SAN_PASS) {
			if (r >= 0 && alen)
				*alen = 0;
			return san_ret(r);
		}
	}
	return SAN_REAL(recvfrom)(fd, buf, len, flags, addr, alen);
}

SAN_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (unlikely(san_managed(fd))) {
		int mf = 0;
		ssize_t r = san_route_recv(fd, msg->msg_iov, msg->msg_iovlen, flags, &mf);

		if (r != SAN_PASS) {
			if (r >= 0) {
				msg->msg_namelen = 0;
				msg->msg_controllen = 0;
				msg->msg_flags = mf;
			}
			return san_ret(r);
		}
	}
	return SAN_REAL(recvmsg)(fd, msg, flags);
}

SAN_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *timeout)
{
	__typeof__(san_real.recvmmsg) fn = SAN_REAL(recvmmsg);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_managed(fd))) {
		unsigned int i;

		/* After the first message, take only what is there (MSG_WAITFORONE's rule). */
		for (i = 0; i < vlen; i++) {
			int f = i ? (flags | MSG_DONTWAIT) & ~MSG_WAITFORONE : flags & ~MSG_WAITFORONE;
			ssize_t r = san_route_recv(fd, vec[i].msg_hdr.msg_iov,
						   vec[i].msg_hdr.msg_iovlen, f, NULL);

			if (r == SAN_PASS && i == 0)
				return fn(fd, vec, vlen, flags, timeout);
			if (r < 0)
				return i ? (int)i : (int)san_ret(r == SAN_PASS ? -EAGAIN : r);
			vec[i].msg_len = (unsigned int)r;
			vec[i].msg_hdr.msg_namelen = 0;
			vec[i].msg_hdr.msg_controllen = 0;
			if (r == 0)
				return (int)i + 1;
		}
		return (int)i;
	}
	return fn(fd, vec, vlen, flags, timeout);
}

SAN_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct iovec v = { buf, len };

	SAN_ROUTE_RECV(fd, &v, 1, 0, NULL);
	return SAN_REAL(read)(fd, buf, len);
}

SAN_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt >= 0)
		SAN_ROUTE_RECV(fd, iov, (size_t)iovcnt, 0, NULL);
	return SAN_REAL(readv)(fd, iov, iovcnt);
}

/*
 * FORTIFY: a program built with _FORTIFY_SOURCE calls these instead of
 * read()/recv()/recvfrom() when the compiler knows the buffer size. libc's
 * versions check len against buflen and then call its internal read, which
 * we would never see: hence wrappers of their own. A managed fd gets the same
 * check: a length beyond the buffer goes to libc's version, which aborts.
 */
SAN_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	__typeof__(san_real.__read_chk) fn = SAN_REAL(__read_chk);
	struct iovec v = { buf, len };

	if (unlikely(!fn))
		return san_enosys();
	if (len <= buflen)
		SAN_ROUTE_RECV(fd, &v, 1, 0, NULL);
	return fn(fd, buf, len, buflen);
}

SAN_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	__typeof__(san_real.__recv_chk) fn = SAN_REAL(__recv_chk);
	struct iovec v = { buf, len };

	if (unlikely(!fn))
		return san_enosys();
	if (len <= buflen)
		SAN_ROUTE_RECV(fd, &v, 1, flags, NULL);
	return fn(fd, buf, len, buflen, flags);
}

SAN_EXPORT ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t len, size_t buflen,
				  int flags, __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	__typeof__(san_real.__recvfrom_chk) fn = SAN_REAL(__recvfrom_chk);
	struct iovec v = { buf, len };

	if (unlikely(!fn))
		return san_enosys();
	if (len <= buflen && unlikely(san_managed(fd))) {
		ssize_t r = san_route_recv(fd, &v, 1, flags, NULL);

		if (r != SAN_PASS) {
			if (r >= 0 && alen)
				*alen = 0;
			return san_ret(r);
		}
	}
	return fn(fd, buf, len, buflen, flags, addr, alen);
}
