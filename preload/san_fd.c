/* preload — wrappers: fd life (close*, dup*, fcntl, ioctl). */
#include "preload/san_preload.h"

SAN_EXPORT int close(int fd)
{
	if (unlikely(san_managed(fd)))
		san_sock_on_close(fd);
	else if (unlikely(san_listener(fd)))
		san_prov_unlisten(fd);
	san_track_close(fd);
	return SAN_REAL(close)(fd);
}

/*
 * fclose() of an fdopen()ed socket closes the fd inside libc, where close()
 * is not interposed: forget the entry first, as close() does. Most FILEs
 * are files, whose fd is untracked: one fileno and one load. fileno() fails
 * with EBADF on fmemopen()-like streams; that errno is not the caller's.
 */
SAN_EXPORT int fclose(FILE *stream)
{
	int saved = errno;
	int fd = stream ? fileno_unlocked(stream) : -1;

	errno = saved;
	if (fd >= 0) {
		if (unlikely(san_managed(fd)))
			san_sock_on_close(fd);
		san_track_close(fd);
	}
	return SAN_REAL(fclose)(stream);
}

/*
 * Not in the list, but programs (and libc's posix_spawn file
 * actions in the child, which we do not see) close fds this way; an entry
 * left behind would describe whatever next gets the number. CLOSE_RANGE_CLOEXEC
 * only marks the fds. If the call fails the entries are lost: the fds then
 * pass through untracked, the safe side.
 */
SAN_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	__typeof__(san_real.close_range) fn = SAN_REAL(close_range);

	if (unlikely(!fn))
		return san_enosys();
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		san_track_close_range(first, last);
	return fn(first, last, flags);
}

SAN_EXPORT void closefrom(int lowfd)
{
	__typeof__(san_real.closefrom) fn = SAN_REAL(closefrom);

	if (lowfd < 0)
		lowfd = 0;
	san_track_close_range((unsigned int)lowfd, ~0u);
	if (fn)
		fn(lowfd);
}

SAN_EXPORT int dup(int fd)
{
	int nfd;

	nfd = SAN_REAL(dup)(fd);
	if (nfd >= 0) {
		san_track_dup(fd, nfd);
		if (unlikely(san_managed(fd)))
			san_sock_on_dup(fd, nfd);
	}
	return nfd;
}

/*
 * dup2()/dup3() onto a number of the same connection change nothing for the engine (the kernel
 * keeps the number's epoll registrations too): no close, no new number.
 */
static bool san_dup_onto_other(int oldfd, int newfd)
{
	return oldfd != newfd &&
	       !(san_managed(newfd) && san_managed(oldfd) && san_sock_same(oldfd, newfd));
}

SAN_EXPORT int dup2(int oldfd, int newfd)
{
	bool other = san_dup_onto_other(oldfd, newfd);
	struct san_fd saved;
	int ret;

	if (unlikely(san_managed(newfd)) && other)
		san_sock_on_close(newfd);
	saved = san_track_dup_onto_begin(oldfd, newfd);
	ret = SAN_REAL(dup2)(oldfd, newfd);
	san_track_dup_onto_end(oldfd, newfd, ret, saved);
	if (ret >= 0 && other && unlikely(san_managed(oldfd)))
		san_sock_on_dup(oldfd, newfd);
	return ret;
}

SAN_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	__typeof__(san_real.dup3) fn = SAN_REAL(dup3);
	struct san_fd saved;
	bool other;
	int ret;

	if (unlikely(!fn))
		return san_enosys();
	other = san_dup_onto_other(oldfd, newfd);
	if (unlikely(san_managed(newfd)) && other)
		san_sock_on_close(newfd);
	saved = san_track_dup_onto_begin(oldfd, newfd);
	ret = fn(oldfd, newfd, flags);
	san_track_dup_onto_end(oldfd, newfd, ret, saved);
	if (ret >= 0 && other && unlikely(san_managed(oldfd)))
		san_sock_on_dup(oldfd, newfd);
	return ret;
}

/*
 * fcntl()'s third argument is an int, a pointer, or absent, depending on
 * cmd. We read it as a void * and pass it on as one, whatever cmd is. That
 * is exact on x86_64 (SysV ABI), where every variadic argument takes one
 * 8-byte register or stack slot:
 *  - an int arrives in the low 32 bits of the slot; the real fcntl() reads
 *    it back with va_arg(ap, int), which looks at those same 32 bits only;
 *  - a pointer is a full slot;
 *  - an absent argument reads whatever the slot holds (the register save
 *    area is always there), and the real fcntl() ignores it.
 * The same holds for every LP64 or ILP32 ABI whose varargs slots are at
 * least pointer-sized, which covers the ones glibc supports on Linux.
 */
static int san_fcntl(int (*fn)(int, int, ...), int fd, int cmd, void *arg)
{
	int ret;

	ret = fn(fd, cmd, arg);
	if (ret < 0)
		return ret;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		san_track_dup(fd, ret);
		if (unlikely(san_managed(fd)))
			san_sock_on_dup(fd, ret);
		break;
	case F_SETFL:
		san_track_nonblock(fd, (int)(intptr_t)arg & O_NONBLOCK);
		break;
	}
	return ret;
}

SAN_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return san_fcntl(SAN_REAL(fcntl), fd, cmd, arg);
}

/* glibc >= 2.28 name for fcntl with 64-bit struct flock; the same call on x86_64. */
SAN_EXPORT int fcntl64(int fd, int cmd, ...)
{
	__typeof__(san_real.fcntl64) fn = SAN_REAL(fcntl64);
	va_list ap;
	void *arg;

	if (unlikely(!fn))
		return san_enosys();
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return san_fcntl(fn, fd, cmd, arg);
}

/*
 * ioctl()'s third argument: same reasoning as fcntl() above. FIONREAD of a
 * switched fd is answered from the ring (the notification socket would say 0).
 */
SAN_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (unlikely(san_switched(fd)) && request == FIONREAD && arg) {
		int n = 0;

		ret = san_sock_fionread(fd, &n);
		if (ret != SAN_PASS) {
			*(int *)arg = n;
			return (int)san_ret(ret);
		}
	}
	ret = SAN_REAL(ioctl)(fd, request, arg);
	if (ret == 0 && request == FIONBIO && arg)
		san_track_nonblock(fd, *(const int *)arg != 0);
	return ret;
}
