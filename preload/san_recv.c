/* preload — wrappers: the receive side (recv*, read*, and their FORTIFY variants). */
#include "preload/san_preload.h"

SAN_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(recv)(fd, buf, len, flags);
}

SAN_EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t len, int flags,
			    __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(recvfrom)(fd, buf, len, flags, addr, alen);
}

SAN_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(recvmsg)(fd, msg, flags);
}

SAN_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *timeout)
{
	__typeof__(san_real.recvmmsg) fn = SAN_REAL(recvmmsg);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(fd, vec, vlen, flags, timeout);
}

SAN_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(read)(fd, buf, len);
}

SAN_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(readv)(fd, iov, iovcnt);
}

/*
 * FORTIFY: a program built with _FORTIFY_SOURCE calls these instead of
 * read()/recv()/recvfrom() when the compiler knows the buffer size. libc's
 * versions check len against buflen and then call its internal read, which
 * we would never see: hence wrappers of their own. The switched path will
 * make the same check (len > buflen: __chk_fail()) before reading.
 */
SAN_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	__typeof__(san_real.__read_chk) fn = SAN_REAL(__read_chk);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(fd, buf, len, buflen);
}

SAN_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	__typeof__(san_real.__recv_chk) fn = SAN_REAL(__recv_chk);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(fd, buf, len, buflen, flags);
}

SAN_EXPORT ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t len, size_t buflen,
				  int flags, __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	__typeof__(san_real.__recvfrom_chk) fn = SAN_REAL(__recvfrom_chk);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(fd, buf, len, buflen, flags, addr, alen);
}
