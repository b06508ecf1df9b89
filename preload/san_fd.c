/* preload — wrappers: fd life (close*, dup*, fcntl, ioctl). */
#include "preload/san_preload.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/syscall.h>

/* What a close of fd ends here, before the real call closes the number. */
static void san_closing(int fd)
{
	if (unlikely(san_managed(fd)))
		san_sock_on_close(fd);
	else if (unlikely(san_listener(fd)))
		san_prov_unlisten(fd);
	san_track_close(fd);
}

SAN_EXPORT int close(int fd)
{
	san_closing(fd);
	return SAN_REAL(close)(fd);
}

/*
 * syscall(SYS_close, fd): libuv closes every fd so on Linux (uv__close_nocancel), so node's
 * sockets all end through here, not through close(). Unseen, a switched connection's entry
 * outlived its number: the next socket, or file, that got the number was routed to the dead
 * connection (a file read EAGAIN, a new connection's first send EPIPE), and its peer heard of
 * the end only if our TCP socket was the number. SYS_close_range is seen as close_range() is.
 * Every other call passes straight through, as
 * does every call the library makes itself (its own system calls go through syscall(), also
 * while the table of real functions is being filled in: hence a pointer of its own, looked up
 * at the first call, which the library's start-up makes).
 *
 * It passes on six arguments whatever the caller gave, as libc's own syscall() does: the sixth
 * is read from the caller's frame, just above the return address, where a call with fewer
 * (ppoll's five) has no argument but its own locals or redzone. The read is harmless (the slot
 * is always mapped, and the kernel ignores what the call does not take), but ASan sees an
 * instrumented caller's redzone read (stack-buffer-underflow at the va_arg), so it stays out of
 * this one function; the library's other wrappers keep its checks.
 */
__attribute__((no_sanitize_address)) SAN_EXPORT long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long (*fn)(long, ...) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	long a[6];
	va_list ap;

	/* the kernel takes six arguments at most; libc's syscall() reads six whatever was passed */
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (unlikely(!fn)) {
		int e = errno;

		fn = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
		errno = e;
		if (!fn || san_real_is_ours((const void *)fn))
			abort(); /* no libc below us: nothing could run */
		__atomic_store_n(&real, fn, __ATOMIC_RELEASE);
	}
	if (unlikely(nr == SYS_close || nr == SYS_close_range) &&
	    !san_real_is_ours(__builtin_return_address(0))) {
		if (nr == SYS_close)
			san_closing((int)a[0]);
		else if (!((unsigned int)a[2] & CLOSE_RANGE_CLOEXEC)) /* as close_range() */
			san_track_close_range((unsigned int)a[0], (unsigned int)a[1]);
	}
	return fn(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/*
 * A stream's number is about to be closed (or replaced) inside libc, where close() is not
 * interposed: forget its entry first, as close() does. Most FILEs are files, whose fd is
 * untracked: one fileno and one load. fileno() fails with EBADF on fmemopen()-like streams;
 * that errno is not the caller's. A bridged standard stream (san_stdio.c) is flushed through
 * the wrappers and glibc's own stream given back first: the call acts on that one.
 */
static FILE *stream_number_ends(FILE *stream, int *flushed, bool reopen)
{
	int saved, fd;

	*flushed = 0;
	if (unlikely(san_stdio_bridged(stream)))
		stream = san_stdio_unbridge(stream, flushed, reopen);
	saved = errno; /* (after the flush: a failed one's errno is fclose's) */
	fd = stream ? fileno_unlocked(stream) : -1;
	errno = saved;
	if (fd >= 0)
		san_closing(fd); /* (a listener's too: fdopen() of one is rare, its end the same) */
	return stream;
}

/* fclose() of an fdopen()ed socket closes the fd inside libc. */
SAN_EXPORT int fclose(FILE *stream)
{
	int flushed, r;

	stream = stream_number_ends(stream, &flushed, false);
	r = SAN_REAL(fclose)(stream);
	return flushed ? EOF : r;
}

/*
 * freopen() closes the stream's number, or replaces it (dup3), inside libc; and glibc's
 * cannot take a bridged stream (it writes through a cookie stream's wide-data pointer).
 */
SAN_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	int flushed;

	return SAN_REAL(freopen)(path, mode, stream_number_ends(stream, &flushed, true));
}

SAN_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	__typeof__(san_real.freopen64) fn = SAN_REAL(freopen64);
	int flushed;

	stream = stream_number_ends(stream, &flushed, true);
	return fn ? fn(path, mode, stream) : SAN_REAL(freopen)(path, mode, stream);
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
