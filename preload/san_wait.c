/* preload — wrappers: waiting for readiness (poll, select, epoll). */
#include "preload/san_preload.h"

/*
 * Readiness of an fd that is not switched is the kernel's, so every wait
 * passes through as long as no fd of the process is switched: one load and
 * one branch instead of a scan of the caller's set. The engine adds the scan
 * (and the bounded spin) behind san_any_switched().
 */

SAN_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return SAN_REAL(poll)(fds, nfds, timeout);
}

SAN_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		     const sigset_t *sigmask)
{
	__typeof__(san_real.ppoll) fn = SAN_REAL(ppoll);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(fds, nfds, timeout, sigmask);
}

SAN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	__typeof__(san_real.__poll_chk) fn = SAN_REAL(__poll_chk);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(fds, nfds, timeout, fdslen);
}

SAN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			   const sigset_t *sigmask, size_t fdslen)
{
	__typeof__(san_real.__ppoll_chk) fn = SAN_REAL(__ppoll_chk);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(fds, nfds, timeout, sigmask, fdslen);
}

SAN_EXPORT int select(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		      fd_set *__restrict efds, struct timeval *__restrict timeout)
{
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return SAN_REAL(select)(nfds, rfds, wfds, efds, timeout);
}

SAN_EXPORT int pselect(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		       fd_set *__restrict efds, const struct timespec *__restrict timeout,
		       const sigset_t *__restrict sigmask)
{
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return SAN_REAL(pselect)(nfds, rfds, wfds, efds, timeout, sigmask);
}

SAN_EXPORT int epoll_create(int size)
{
	__typeof__(san_real.epoll_create) fn = SAN_REAL(epoll_create);
	int fd;

	if (unlikely(!fn))
		return san_enosys();
	fd = fn(size);
	if (fd >= 0)
		san_track_new(fd, __func__);
	return fd;
}

SAN_EXPORT int epoll_create1(int flags)
{
	__typeof__(san_real.epoll_create1) fn = SAN_REAL(epoll_create1);
	int fd;

	if (unlikely(!fn))
		return san_enosys();
	fd = fn(flags);
	if (fd >= 0)
		san_track_new(fd, __func__);
	return fd;
}

/* The engine will record registrations of candidate sockets here, to move them on a switch. */
SAN_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	__typeof__(san_real.epoll_ctl) fn = SAN_REAL(epoll_ctl);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_switched(fd)))
		san_no_engine(fd, __func__);
	return fn(epfd, op, fd, ev);
}

SAN_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	__typeof__(san_real.epoll_wait) fn = SAN_REAL(epoll_wait);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(epfd, events, maxevents, timeout);
}

SAN_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
			   const sigset_t *sigmask)
{
	__typeof__(san_real.epoll_pwait) fn = SAN_REAL(epoll_pwait);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(epfd, events, maxevents, timeout, sigmask);
}

SAN_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			    const struct timespec *timeout, const sigset_t *sigmask)
{
	__typeof__(san_real.epoll_pwait2) fn = SAN_REAL(epoll_pwait2);

	if (unlikely(!fn))
		return san_enosys();
	if (unlikely(san_any_switched()))
		san_no_engine(-1, __func__);
	return fn(epfd, events, maxevents, timeout, sigmask);
}
