/* preload — wrappers: the send side (send*, write*, sendfile, splice). */
#include "preload/san_preload.h"

SAN_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(send)(fd, buf, len, flags);
}

SAN_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, __CONST_SOCKADDR_ARG addr,
			  socklen_t alen)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(sendto)(fd, buf, len, flags, addr, alen);
}

SAN_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(sendmsg)(fd, msg, flags);
}

SAN_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	__typeof__(san_real.sendmmsg) fn = SAN_REAL(sendmmsg);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(fd, vec, vlen, flags);
}

SAN_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(write)(fd, buf, len);
}

SAN_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return SAN_REAL(writev)(fd, iov, iovcnt);
}

/* in_fd must be mmap-able (a file), never a socket: only out_fd can be switched. */
SAN_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	__typeof__(san_real.sendfile) fn = SAN_REAL(sendfile);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(out_fd)))
		san_no_engine(out_fd, __func__);
	return fn(out_fd, in_fd, offset, count);
}

SAN_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	__typeof__(san_real.sendfile64) fn = SAN_REAL(sendfile64);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(out_fd)))
		san_no_engine(out_fd, __func__);
	return fn(out_fd, in_fd, offset, count);
}

/* Either end may be a socket. */
SAN_EXPORT ssize_t splice(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len,
			  unsigned int flags)
{
	__typeof__(san_real.splice) fn = SAN_REAL(splice);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd_in) || san_switched(fd_out)))
		san_no_engine(san_switched(fd_in) ? fd_in : fd_out, __func__);
	return fn(fd_in, off_in, fd_out, off_out, len, flags);
}
