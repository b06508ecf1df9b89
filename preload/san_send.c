/* preload — wrappers: the send side (send*, write*, sendfile, splice). */
#include "preload/san_preload.h"

#include <stdlib.h>
#include <string.h>

/* Route a managed fd; SAN_PASS falls through to the real call in the wrapper. */
#define SAN_ROUTE_SEND(fd, iov, cnt, flags)                                 \
	do {                                                                \
		if (unlikely(san_managed(fd))) {                            \
			ssize_t san_r_ = san_route_send(fd, iov, cnt, flags); \
			if (san_r_ != SAN_PASS)                             \
				return san_ret(san_r_);                     \
		}                                                           \
	} while (0)

SAN_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)buf, len };

	SAN_ROUTE_SEND(fd, &v, 1, flags);
	return SAN_REAL(send)(fd, buf, len, flags);
}

/* A connected TCP socket ignores the address, as the kernel does. */
SAN_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, __CONST_SOCKADDR_ARG addr,
			  socklen_t alen)
{
	struct iovec v = { (void *)buf, len };

	SAN_ROUTE_SEND(fd, &v, 1, flags);
	return SAN_REAL(sendto)(fd, buf, len, flags, addr, alen);
}

/*
 * A candidate connection handed to another process (SCM_RIGHTS) may be served there, by a
 * number this process's engine knows nothing of: were it proposed, the MARK would be read
 * there as data. Its window ends (it stays TCP) before it leaves.
 */
static void san_send_passing(const struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t o = 0; o + sizeof(int) <= c->cmsg_len - CMSG_LEN(0); o += sizeof(int)) {
			int pfd;

			memcpy(&pfd, CMSG_DATA(c) + o, sizeof(int));
			if (san_managed(pfd))
				san_sock_on_pass(pfd);
		}
	}
}

SAN_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	SAN_ROUTE_SEND(fd, msg->msg_iov, msg->msg_iovlen, flags);
	if (unlikely(msg->msg_controllen) && !san_fd_guarded())
		san_send_passing(msg);
	return SAN_REAL(sendmsg)(fd, msg, flags);
}

SAN_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	__typeof__(san_real.sendmmsg) fn = SAN_REAL(sendmmsg);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_managed(fd))) {
		unsigned int i;

		for (i = 0; i < vlen; i++) {
			ssize_t r = san_route_send(fd, vec[i].msg_hdr.msg_iov,
						   vec[i].msg_hdr.msg_iovlen, flags);

			if (r == SAN_PASS && i == 0)
				return fn(fd, vec, vlen, flags);
			if (r < 0)
				return i ? (int)i : (int)san_ret(r == SAN_PASS ? -EAGAIN : r);
			vec[i].msg_len = (unsigned int)r;
		}
		return (int)i;
	}
	return fn(fd, vec, vlen, flags);
}

SAN_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	SAN_ROUTE_SEND(fd, &v, 1, 0);
	return SAN_REAL(write)(fd, buf, len);
}

SAN_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt >= 0)
		SAN_ROUTE_SEND(fd, iov, (size_t)iovcnt, 0);
	return SAN_REAL(writev)(fd, iov, iovcnt);
}

/*
 * sendfile() to a managed fd: read the file and send what was read (the kernel's zero-copy
 * path has no place on the SAN, and a candidate's bytes must be counted). Same result and
 * offset rules as the real call; a short send leaves the offset after what was sent.
 */
static ssize_t san_sendfile_copy(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	size_t chunk = count < 256 * 1024 ? count : 256 * 1024;
	char *buf = chunk ? malloc(chunk) : NULL;
	off64_t pos = offset ? *offset : 0;
	ssize_t total = 0;
	/*
	 * A send came back short: the call ends with this chunk, even where the one more try
	 * took its rest. (A switch-over between the two, no pause: the ring was empty, took the
	 * rest, and the next chunk's send slept on through the signal that had ended the call.)
	 */
	bool cut = false;

	if (!chunk)
		return 0;
	if (!buf)
		return -ENOMEM;
	while ((size_t)total < count) {
		size_t want = count - (size_t)total < chunk ? count - (size_t)total : chunk;
		ssize_t n = offset ? pread64(in_fd, buf, want, pos) : SAN_REAL(read)(in_fd, buf, want);
		struct iovec v;
		ssize_t s;

		if (n < 0) {
			if (!total)
				total = -errno;
			break;
		}
		if (n == 0)
			break;
		/*
		 * A send that came back short (a signal, a timeout, a full nonblocking socket, a
		 * reset) is followed by one more that does not wait, as the kernel's sendfile()
		 * tries the next piece: an error it finds is taken by this call and not reported
		 * (the kernel's sendfile() returns the count; the next call fails EPIPE), and
		 * the call returns what went.
		 */
		for (s = 0; s < n;) {
			int fl = cut ? MSG_DONTWAIT : 0;
			ssize_t k;

			v.iov_base = buf + s;
			v.iov_len = (size_t)(n - s);
			san_sock_call_moved(total > 0);
			k = san_route_send(out_fd, &v, 1, fl);
			san_sock_call_moved(false);
			if (k == SAN_PASS) {
				/* The connection stays TCP after all: the kernel sends the rest. */
				k = SAN_REAL(send)(out_fd, buf + s, (size_t)(n - s), fl);
				if (k < 0)
					k = -errno;
			}
			if (k <= 0) {
				if (!s && !total)
					total = k < 0 ? k : 0;
				break;
			}
			s += k;
			if (fl)
				break;
			cut = s < n;
		}
		if (!offset && s < n)
			(void)lseek64(in_fd, -(off64_t)(n - s), SEEK_CUR);
		pos += s;
		total += s;
		if (cut || s < n)
			break;
	}
	free(buf);
	if (offset)
		*offset = pos;
	return total;
}

SAN_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	__typeof__(san_real.sendfile) fn = SAN_REAL(sendfile);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_managed(out_fd))) {
		off64_t o = offset ? *offset : 0;
		ssize_t r = san_sendfile_copy(out_fd, in_fd, offset ? &o : NULL, count);

		if (offset)
			*offset = (off_t)o;
		return san_ret(r);
	}
	return fn(out_fd, in_fd, offset, count);
}

SAN_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	__typeof__(san_real.sendfile64) fn = SAN_REAL(sendfile64);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_managed(out_fd)))
		return san_ret(san_sendfile_copy(out_fd, in_fd, offset, count));
	return fn(out_fd, in_fd, offset, count);
}

/*
 * Either end may be a socket. splice() moves bytes inside the kernel, where a switched
 * connection has none: a candidate is left on TCP first; a switched fd answers EINVAL, as
 * the kernel does for a file type splice cannot handle.
 */
SAN_EXPORT ssize_t splice(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len,
			  unsigned int flags)
{
	__typeof__(san_real.splice) fn = SAN_REAL(splice);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_managed(fd_in) || san_managed(fd_out))) {
		int r = san_sock_passthrough(san_managed(fd_in) ? fd_in : fd_out);

		if (r == 0 && san_managed(fd_out))
			r = san_sock_passthrough(fd_out);
		if (r < 0)
			return san_ret(r);
	}
	return fn(fd_in, off_in, fd_out, off_out, len, flags);
}
