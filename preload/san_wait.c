/* preload — wrappers: waiting for readiness (poll, select, epoll). */
#include "preload/san_preload.h"

#include <string.h>

/*
 * A switched fd is a notification socket whose readiness the kernel reports itself: the
 * peer rings it when data comes, drains its plugs when ring space frees (docs/engine.md §5).
 * So waits need no translation. While switched connections exist, a wait that would sleep
 * first polls without sleeping for SANSWITCH_SPIN_US, because the peer is on this host and
 * usually answers within that time; with none, every wait is one load and one branch.
 */

/* Run CALL (an expression with timeout 0) until it reports something or the spin ends. */
#define SAN_SPIN(timeout_ms, call)                                           \
	do {                                                                 \
		if (unlikely(san_any_switched())) {                          \
			uint64_t san_until_ = san_route_spin_until(timeout_ms); \
			while (san_route_spinning(san_until_)) {             \
				int san_r_ = (call);                         \
				if (san_r_ != 0)                             \
					return san_r_;                       \
			}                                                    \
		}                                                            \
	} while (0)

static int ts_ms(const struct timespec *t)
{
	if (!t)
		return -1;
	return t->tv_sec || t->tv_nsec ? 1 : 0;
}

SAN_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	SAN_SPIN(timeout, SAN_REAL(poll)(fds, nfds, 0));
	return SAN_REAL(poll)(fds, nfds, timeout);
}

SAN_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		     const sigset_t *sigmask)
{
	__typeof__(san_real.ppoll) fn = SAN_REAL(ppoll);
	static const struct timespec zero;

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(ts_ms(timeout), fn(fds, nfds, &zero, sigmask));
	return fn(fds, nfds, timeout, sigmask);
}

SAN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	__typeof__(san_real.__poll_chk) fn = SAN_REAL(__poll_chk);

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(timeout, fn(fds, nfds, 0, fdslen));
	return fn(fds, nfds, timeout, fdslen);
}

SAN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			   const sigset_t *sigmask, size_t fdslen)
{
	__typeof__(san_real.__ppoll_chk) fn = SAN_REAL(__ppoll_chk);
	static const struct timespec zero;

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(ts_ms(timeout), fn(fds, nfds, &zero, sigmask, fdslen));
	return fn(fds, nfds, timeout, sigmask, fdslen);
}

/* select() overwrites its sets: each spin round starts from the caller's. */
struct san_fdsets {
	fd_set r, w, e;
};

static void sets_save(struct san_fdsets *s, int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	size_t n = ((size_t)nfds + 7) / 8;

	if (n > sizeof(fd_set))
		n = sizeof(fd_set);
	if (r)
		memcpy(&s->r, r, n);
	if (w)
		memcpy(&s->w, w, n);
	if (e)
		memcpy(&s->e, e, n);
}

static void sets_restore(const struct san_fdsets *s, int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	size_t n = ((size_t)nfds + 7) / 8;

	if (n > sizeof(fd_set))
		n = sizeof(fd_set);
	if (r)
		memcpy(r, &s->r, n);
	if (w)
		memcpy(w, &s->w, n);
	if (e)
		memcpy(e, &s->e, n);
}

SAN_EXPORT int select(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		      fd_set *__restrict efds, struct timeval *__restrict timeout)
{
	if (unlikely(san_any_switched()) && nfds >= 0 && nfds <= FD_SETSIZE) {
		int ms = !timeout ? -1 : timeout->tv_sec || timeout->tv_usec ? 1 : 0;
		uint64_t until = san_route_spin_until(ms);
		struct san_fdsets saved;

		sets_save(&saved, nfds, rfds, wfds, efds);
		while (san_route_spinning(until)) {
			struct timeval z = { 0, 0 };
			int r = SAN_REAL(select)(nfds, rfds, wfds, efds, &z);

			if (r != 0)
				return r;
			sets_restore(&saved, nfds, rfds, wfds, efds);
		}
	}
	return SAN_REAL(select)(nfds, rfds, wfds, efds, timeout);
}

SAN_EXPORT int pselect(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		       fd_set *__restrict efds, const struct timespec *__restrict timeout,
		       const sigset_t *__restrict sigmask)
{
	if (unlikely(san_any_switched()) && nfds >= 0 && nfds <= FD_SETSIZE) {
		uint64_t until = san_route_spin_until(ts_ms(timeout));
		struct san_fdsets saved;

		sets_save(&saved, nfds, rfds, wfds, efds);
		while (san_route_spinning(until)) {
			struct timespec z = { 0, 0 };
			int r = SAN_REAL(pselect)(nfds, rfds, wfds, efds, &z, sigmask);

			if (r != 0)
				return r;
			sets_restore(&saved, nfds, rfds, wfds, efds);
		}
	}
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

/*
 * Registrations of candidates are recorded: epoll keys them by open file, so when the fd
 * number is swapped for the notification socket the engine moves them (DEL, then ADD).
 */
SAN_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	__typeof__(san_real.epoll_ctl) fn = SAN_REAL(epoll_ctl);
	int ret;

	if (unlikely(!fn))
		return san_enosys();
	/* Candidates: under the sock's lock (the swap moves them); EPOLLET: edges wanted. */
	if (unlikely(san_managed(fd)) &&
	    (!san_switched(fd) || (ev && (ev->events & EPOLLET) && op != EPOLL_CTL_DEL))) {
		ret = san_sock_epoll_ctl(epfd, op, fd, ev);
		if (ret != SAN_PASS)
			return (int)san_ret(ret);
	}
	return fn(epfd, op, fd, ev);
}

SAN_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	__typeof__(san_real.epoll_wait) fn = SAN_REAL(epoll_wait);

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(timeout, fn(epfd, events, maxevents, 0));
	return fn(epfd, events, maxevents, timeout);
}

SAN_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
			   const sigset_t *sigmask)
{
	__typeof__(san_real.epoll_pwait) fn = SAN_REAL(epoll_pwait);

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(timeout, fn(epfd, events, maxevents, 0, sigmask));
	return fn(epfd, events, maxevents, timeout, sigmask);
}

SAN_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			    const struct timespec *timeout, const sigset_t *sigmask)
{
	__typeof__(san_real.epoll_pwait2) fn = SAN_REAL(epoll_pwait2);
	static const struct timespec zero;

	if (unlikely(!fn))
		return san_enosys();
	SAN_SPIN(ts_ms(timeout), fn(epfd, events, maxevents, &zero, sigmask));
	return fn(epfd, events, maxevents, timeout, sigmask);
}
