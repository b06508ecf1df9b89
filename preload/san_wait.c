/* preload — wrappers: waiting for readiness (poll, select, epoll). */
#include "preload/san_preload.h"
#include "core/san_epoll_early.h"
#include "core/san_epshadow.h"
#include "core/san_rxwatch.h"
#include "preload/san_watch.h"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>

/*
 * A switched fd is a notification socket whose readiness the kernel reports itself: the
 * peer rings it when data comes, drains its plugs when ring space frees (docs/engine.md §5).
 * So waits need no translation, but for one case: a pure sender's full ring (pollx below). While switched connections exist, a wait that would sleep
 * first polls without sleeping for SANSWITCH_SPIN_US, because the peer is on this host and
 * usually answers within that time; with none, a wait that does not sleep is one load and one
 * branch, one that may sleep counts itself a sleeper around the kernel's wait (SAN_SLEEPING:
 * two atomic operations and a cleanup handler's registration, beside a system call).
 */

/*
 * R = CALL, a wait that may sleep in the kernel, as a counted sleeper when MAY_SLEEP
 * (san_prov_sleep_begin: verbs arms the CQs an application thread's spin was taking): counted
 * off however it ends, a thread cancelled in it too (the real waits are cancellation points).
 * Only in a function of its own (the *_sleep ones below): the cleanup's setjmp would leave the
 * caller's locals "clobbered".
 */
#define SAN_SLEEPING(may_sleep, r, call)                                             \
	do {                                                                          \
		bool sleeper_ = (may_sleep) && san_prov_sleep_begin();                \
		pthread_cleanup_push(san_prov_sleep_done, &sleeper_);                   \
		(r) = (call);                                                         \
		pthread_cleanup_pop(1);                                               \
	} while (0)

static int ts_ms(const struct timespec *t)
{
	if (!t)
		return -1;
	return t->tv_sec || t->tv_nsec ? 1 : 0;
}

/*
 * A pure sender's POLLOUT (san_sock_tx_mute). While its ring is full, a switched connection
 * whose number is still the TCP socket must not be reported writable: the caller's array is
 * copied, that entry asks the TCP socket for everything but POLLOUT, and one more entry asks
 * X for POLLOUT. Back in the caller's array, X's POLLOUT shows as the entry's.
 */
struct pollx {
	struct pollfd *f; /* the array the kernel sees: the caller's, then one per muted entry */
	nfds_t n;
	nfds_t *of;	  /* f[nfds + k] stands for the caller's entry of[k] */
};

#define POLLX_OUT (POLLOUT | POLLWRNORM)

static bool pollx_begin(struct pollx *x, const struct pollfd *fds, nfds_t nfds)
{
	nfds_t i, k = 0, extra = 0;

	for (i = 0; i < nfds; i++) {
		struct san_fd *f = san_fd_slot(fds[i].fd);

		extra += (fds[i].events & POLLX_OUT) && f && (san_fd_flags(f) & SAN_FDF_TXMUTE);
	}
	if (!extra || nfds > (nfds_t)-1 / 4)
		return false;
	x->f = malloc((nfds + extra) * sizeof(*x->f) + extra * sizeof(*x->of));
	if (!x->f)
		return false; /* no worse than before: the TCP socket's readiness */
	x->of = (nfds_t *)(x->f + nfds + extra);
	memcpy(x->f, fds, nfds * sizeof(*fds));
	for (i = 0; i < nfds && k < extra; i++) {
		struct san_fd *f = san_fd_slot(fds[i].fd);
		int xfd;

		if (!(fds[i].events & POLLX_OUT) || !f || !(san_fd_flags(f) & SAN_FDF_TXMUTE))
			continue;
		xfd = san_sock_tx_wait_fd(fds[i].fd);
		if (xfd < 0)
			continue; /* room came meanwhile */
		x->f[i].events &= (short)~POLLX_OUT;
		x->f[nfds + k] = (struct pollfd){ xfd, POLLOUT, 0 };
		x->of[k++] = i;
	}
	x->n = nfds + k;
	return true;
}

static int pollx_end(struct pollx *x, struct pollfd *fds, nfds_t nfds, int r)
{
	nfds_t i;

	if (r > 0) {
		r = 0;
		for (i = 0; i < nfds; i++)
			fds[i].revents = x->f[i].revents;
		for (i = nfds; i < x->n; i++)
			if (x->f[i].revents & POLLOUT)
				fds[x->of[i - nfds]].revents |= fds[x->of[i - nfds]].events & POLLX_OUT;
		for (i = 0; i < nfds; i++)
			r += fds[i].revents != 0;
	} else if (r == 0) {
		for (i = 0; i < nfds; i++)
			fds[i].revents = 0;
	}
	free(x->f);
	return r;
}

/*
 * A poll or select that holds a candidate this process accepted but has not touched yet
 * touches it (san_sock_any_untouched): from now on a PROPOSE for it is answered here.
 */
static bool untouched_fd(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	return f && san_fd_state(f) == SAN_FD_PASSIVE && !(san_fd_flags(f) & SAN_FDF_TOUCHED);
}

static void touch_pollfds(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (untouched_fd(fds[i].fd))
			san_sock_touch_fd(fds[i].fd);
}

static void touch_fdsets(int nfds, const fd_set *r, const fd_set *w)
{
	if (nfds < 0 || nfds > FD_SETSIZE)
		return;
	for (int fd = 0; fd < nfds; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w))) && untouched_fd(fd))
			san_sock_touch_fd(fd);
}

/* One call of the poll family as the application made it. */
struct pcall {
	int ms;			   /* poll's timeout (ppoll's, rounded, for the spin) */
	const struct timespec *ts; /* ppoll's */
	const sigset_t *mask;
	bool by_ts;   /* a ppoll-style call */
	size_t chk;   /* __poll_chk's array size, 0 if not a _chk call */
};

static int pcall_real(const struct pcall *c, struct pollfd *f, nfds_t n, bool now, bool chk)
{
	static const struct timespec zero;

	if (c->by_ts && chk)
		return SAN_REAL(__ppoll_chk)(f, n, now ? &zero : c->ts, c->mask, c->chk);
	if (c->by_ts)
		return SAN_REAL(ppoll)(f, n, now ? &zero : c->ts, c->mask);
	if (chk)
		return SAN_REAL(__poll_chk)(f, n, now ? 0 : c->ms, c->chk);
	return SAN_REAL(poll)(f, n, now ? 0 : c->ms);
}

/* pcall_real's wait that may sleep (SAN_SLEEPING). */
static int pcall_sleep(const struct pcall *c, struct pollfd *f, nfds_t n, bool chk)
{
	int r;

	SAN_SLEEPING(c->ms != 0, r, pcall_real(c, f, n, false, chk));
	return r;
}

/*
 * While switched connections exist, spin on the kernel's answer first, then sleep. (Watching the
 * rings, as epoll_wait does, made curl's fetches from nginx stall by tens of milliseconds each in
 * t_app_nginx, for a reason not found yet: docs/performance.md.) A muted
 * entry makes the kernel see our copy of the array (pollx); a _chk call's size check is done
 * by the real _chk function on the caller's array only, so a short array is never copied.
 */
static int poll_common(const struct pcall *c, struct pollfd *fds, nfds_t nfds)
{
	struct pollx x = { fds, nfds, NULL };
	bool chk = c->chk != 0;
	int r = 0;

	if (unlikely(san_sock_any_untouched()))
		touch_pollfds(fds, nfds);
	if (unlikely(san_sock_any_tx_mute()) && (!chk || c->chk / sizeof(*fds) >= nfds) &&
	    (!c->by_ts || SAN_REAL(ppoll)) && pollx_begin(&x, fds, nfds))
		chk = false;
	/*
	 * Connections a receive or a wait left quiet (core/san_rxwatch.h): flags up before the
	 * spin, whose looks at the kernel see only what a doorbell made readable; data there
	 * already rings X now. A poll that does not wait (timeout 0) must see it too.
	 */
	if (unlikely(san_rxwatch_any_quiet()))
		san_rxwatch_announce();
	if (unlikely(san_any_switched())) {
		uint64_t until = san_route_spin_until(c->ms);

		int n = 0;

		while (r == 0 && san_route_spinning(until) && ++n)
			r = pcall_real(c, x.f, x.n, true, chk);
		san_route_spin_found(until, n, r);
	}
	if (r == 0 && c->ms != 0 && san_rxwatch_any_quiet()) {
		/* another thread's receive left one quiet meanwhile */
		san_rxwatch_announce();
		r = pcall_real(c, x.f, x.n, true, chk);
	}
	if (r == 0)
		r = pcall_sleep(c, x.f, x.n, chk);
	if (x.f != fds) {
		int e = errno;

		r = pollx_end(&x, fds, nfds, r);
		errno = e;
	}
	return r;
}

SAN_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pcall c = { .ms = timeout };

	return poll_common(&c, fds, nfds);
}

SAN_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		     const sigset_t *sigmask)
{
	struct pcall c = { .ms = ts_ms(timeout), .ts = timeout, .mask = sigmask, .by_ts = true };

	if (unlikely(!SAN_REAL(ppoll)))
		return san_enosys();
	return poll_common(&c, fds, nfds);
}

SAN_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	struct pcall c = { .ms = timeout, .chk = fdslen };

	if (unlikely(!SAN_REAL(__poll_chk)))
		return san_enosys();
	if (!fdslen) /* keep the real function's verdict on a zero-sized array */
		return SAN_REAL(__poll_chk)(fds, nfds, timeout, fdslen);
	return poll_common(&c, fds, nfds);
}

SAN_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			   const sigset_t *sigmask, size_t fdslen)
{
	struct pcall c = { .ms = ts_ms(timeout), .ts = timeout, .mask = sigmask, .by_ts = true,
			   .chk = fdslen };

	if (unlikely(!SAN_REAL(__ppoll_chk) || !SAN_REAL(ppoll)))
		return san_enosys();
	if (!fdslen)
		return SAN_REAL(__ppoll_chk)(fds, nfds, timeout, sigmask, fdslen);
	return poll_common(&c, fds, nfds);
}

/*
 * select() with a muted number in its write set goes by poll_common (which takes that
 * number's POLLOUT from X), with the kernel's own mapping of poll bits to select's sets.
 * Returns -2 when it cannot (no memory): the caller selects as usual.
 */
#define SEL_IN (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR)
#define SEL_OUT (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR)

static bool select_muted(int nfds, const fd_set *w)
{
	if (likely(!san_sock_any_tx_mute()) || !w || nfds < 0 || nfds > FD_SETSIZE)
		return false;
	for (int fd = 0; fd < nfds; fd++) {
		struct san_fd *f;

		if (FD_ISSET(fd, w) && (f = san_fd_slot(fd)) && (san_fd_flags(f) & SAN_FDF_TXMUTE))
			return true;
	}
	return false;
}

static int select_by_poll(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
			  const sigset_t *mask)
{
	struct pcall c = { .ms = ts_ms(ts), .ts = ts, .mask = mask, .by_ts = true };
	struct pollfd *p = malloc((size_t)nfds * sizeof(*p));
	int n = 0, i, rc;

	if (!p || !SAN_REAL(ppoll)) {
		free(p);
		return -2;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((r && FD_ISSET(fd, r) ? POLLIN : 0) |
				   (w && FD_ISSET(fd, w) ? POLLOUT : 0) |
				   (e && FD_ISSET(fd, e) ? POLLPRI : 0));

		if (ev)
			p[n++] = (struct pollfd){ fd, ev, 0 };
	}
	rc = poll_common(&c, p, (nfds_t)n);
	for (i = 0; rc > 0 && i < n; i++)
		if (p[i].revents & POLLNVAL) {
			errno = EBADF;
			rc = -1;
		}
	if (rc >= 0) {
		rc = 0;
		for (i = 0; i < n; i++) {
			int fd = p[i].fd;

			if (r && FD_ISSET(fd, r) && !(p[i].revents & SEL_IN))
				FD_CLR(fd, r);
			if (w && FD_ISSET(fd, w) && !(p[i].revents & SEL_OUT))
				FD_CLR(fd, w);
			if (e && FD_ISSET(fd, e) && !(p[i].revents & POLLPRI))
				FD_CLR(fd, e);
			rc += (r && FD_ISSET(fd, r)) + (w && FD_ISSET(fd, w)) + (e && FD_ISSET(fd, e));
		}
	}
	free(p);
	return rc;
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

/* The real select and pselect, a sleeper counted when they may sleep (SAN_SLEEPING). */
static int select_sleep(bool may_sleep, int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
			struct timeval *timeout)
{
	int r;

	SAN_SLEEPING(may_sleep, r, SAN_REAL(select)(nfds, rfds, wfds, efds, timeout));
	return r;
}

static int pselect_sleep(bool may_sleep, int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
			 const struct timespec *timeout, const sigset_t *sigmask)
{
	int r;

	SAN_SLEEPING(may_sleep, r, SAN_REAL(pselect)(nfds, rfds, wfds, efds, timeout, sigmask));
	return r;
}

SAN_EXPORT int select(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		      fd_set *__restrict efds, struct timeval *__restrict timeout)
{
	bool may_sleep;

	if (unlikely(san_sock_any_untouched()))
		touch_fdsets(nfds, rfds, wfds);
	if (unlikely(select_muted(nfds, wfds))) {
		struct timespec ts;
		int r;

		if (timeout)
			ts = (struct timespec){ timeout->tv_sec, timeout->tv_usec * 1000 };
		r = select_by_poll(nfds, rfds, wfds, efds, timeout ? &ts : NULL, NULL);
		if (r != -2)
			return r;
	}
	if (unlikely(san_rxwatch_any_quiet()))
		san_rxwatch_announce(); /* as in poll_common */
	if (unlikely(san_any_switched()) && nfds >= 0 && nfds <= FD_SETSIZE) {
		int ms = !timeout ? -1 : timeout->tv_sec || timeout->tv_usec ? 1 : 0;
		uint64_t until = san_route_spin_until(ms);
		struct san_fdsets saved;

		sets_save(&saved, nfds, rfds, wfds, efds);
		for (int n = 1; san_route_spinning(until); n++) {
			struct timeval z = { 0, 0 };
			int r = SAN_REAL(select)(nfds, rfds, wfds, efds, &z);

			if (r != 0) {
				san_route_spin_found(until, n, r);
				return r;
			}
			sets_restore(&saved, nfds, rfds, wfds, efds);
		}
	}
	may_sleep = !timeout || timeout->tv_sec || timeout->tv_usec;
	if (unlikely(san_rxwatch_any_quiet()) && may_sleep)
		san_rxwatch_announce(); /* as in poll_common */
	return select_sleep(may_sleep, nfds, rfds, wfds, efds, timeout);
}

SAN_EXPORT int pselect(int nfds, fd_set *__restrict rfds, fd_set *__restrict wfds,
		       fd_set *__restrict efds, const struct timespec *__restrict timeout,
		       const sigset_t *__restrict sigmask)
{
	bool may_sleep;

	if (unlikely(san_sock_any_untouched()))
		touch_fdsets(nfds, rfds, wfds);
	if (unlikely(select_muted(nfds, wfds))) {
		int r = select_by_poll(nfds, rfds, wfds, efds, timeout, sigmask);

		if (r != -2)
			return r;
	}
	if (unlikely(san_rxwatch_any_quiet()))
		san_rxwatch_announce(); /* as in poll_common */
	if (unlikely(san_any_switched()) && nfds >= 0 && nfds <= FD_SETSIZE) {
		uint64_t until = san_route_spin_until(ts_ms(timeout));
		struct san_fdsets saved;

		sets_save(&saved, nfds, rfds, wfds, efds);
		for (int n = 1; san_route_spinning(until); n++) {
			struct timespec z = { 0, 0 };
			int r = SAN_REAL(pselect)(nfds, rfds, wfds, efds, &z, sigmask);

			if (r != 0) {
				san_route_spin_found(until, n, r);
				return r;
			}
			sets_restore(&saved, nfds, rfds, wfds, efds);
		}
	}
	may_sleep = ts_ms(timeout) != 0;
	if (unlikely(san_rxwatch_any_quiet()) && may_sleep)
		san_rxwatch_announce(); /* as in poll_common */
	return pselect_sleep(may_sleep, nfds, rfds, wfds, efds, timeout, sigmask);
}

/*
 * eventfd(): only to give the engine's own (libev's ev_async, made in the guard) a number above
 * the program's, as san_fd_hide() gives the library's sockets; one the program makes is its own.
 */
SAN_EXPORT int eventfd(unsigned int count, int flags)
{
	__typeof__(san_real.eventfd) fn = SAN_REAL(eventfd);
	int fd;

	if (unlikely(!fn))
		return san_enosys();
	fd = fn(count, flags);
	if (fd >= 0) {
		if (san_fd_guarded())
			fd = san_fd_hide(fd);
		san_track_new(fd, __func__);
	}
	return fd;
}

SAN_EXPORT int epoll_create(int size)
{
	__typeof__(san_real.epoll_create) fn = SAN_REAL(epoll_create);
	int fd;

	if (unlikely(!fn))
		return san_enosys();
	fd = fn(size);
	if (fd >= 0) {
		/* the engine's own set (libev's, made in the guard): above the program's numbers */
		if (san_fd_guarded())
			fd = san_fd_hide(fd);
		san_track_new(fd, __func__);
		san_epshadow_created(fd);
	}
	return fd;
}

SAN_EXPORT int epoll_create1(int flags)
{
	__typeof__(san_real.epoll_create1) fn = SAN_REAL(epoll_create1);
	int fd;

	if (unlikely(!fn))
		return san_enosys();
	fd = fn(flags);
	if (fd >= 0) {
		/* the engine's own set (libev's, made in the guard): above the program's numbers */
		if (san_fd_guarded())
			fd = san_fd_hide(fd);
		san_track_new(fd, __func__);
		san_epshadow_created(fd);
	}
	return fd;
}

/*
 * Registrations of candidates are recorded: epoll keys them by open file, so when the fd
 * number is swapped for the notification socket the engine moves them (DEL, then ADD).
 */
SAN_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	__typeof__(san_real.epoll_ctl) fn = SAN_REAL(epoll_ctl);
	bool managed = san_managed(fd);
	int ret;

	if (unlikely(!fn))
		return san_enosys();
	/* Candidates: under the sock's lock (the swap moves them); EPOLLET: edges wanted. */
	if (unlikely(managed) &&
	    (!san_switched(fd) || (ev && (ev->events & EPOLLET) && op != EPOLL_CTL_DEL))) {
		ret = san_sock_epoll_ctl(epfd, op, fd, ev);
		if (ret != SAN_PASS) {
			ret = (int)san_ret(ret);
			if (ret == 0) {
				san_epshadow_ctl(epfd, op, fd, ev);
				san_rxwatch_epoll_ctl(fd, op);
			}
			return ret;
		}
	}
	ret = fn(epfd, op, fd, ev);
	/* before its connect (nginx's upstream): kept for the candidate the connect makes */
	if (unlikely(san_unconnected(fd)) && ret == 0)
		san_ep_early_note(epfd, op, fd, ev);
	/*
	 * The copy a wait reads switched connections' readiness from (ep_watch); a socket's not yet
	 * connected too: they move to the connection its connect makes, and a watch of another
	 * set must know of them (san_epshadow_watch_in).
	 */
	if (ret == 0 && (unlikely(managed) || unlikely(san_unconnected(fd)) ||
			 (op == EPOLL_CTL_DEL && san_epshadow_any())))
		san_epshadow_ctl(epfd, op, fd, ev);
	if (ret == 0 && unlikely(managed))
		san_rxwatch_epoll_ctl(fd, op); /* (a set's copy in another process of a fork) */
	return ret;
}

/* One call of the epoll_wait family as the application made it. */
struct epcall {
	int (*wait)(int, struct epoll_event *, int, int);
	int (*pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
	const struct timespec *ts; /* epoll_pwait2's */
	const sigset_t *mask;
};

static int ep_real(const struct epcall *c, int epfd, struct epoll_event *ev, int max, int ms)
{
	static const struct timespec zero;

	if (c->pwait2)
		return c->pwait2(epfd, ev, max, ms == 0 ? &zero : c->ts, c->mask);
	if (c->pwait)
		return c->pwait(epfd, ev, max, ms, c->mask);
	return c->wait(epfd, ev, max, ms);
}

/* The kernel's wait that may sleep, the sleeper counted (SAN_SLEEPING). */
static int ep_sleep(const struct epcall *c, int epfd, struct epoll_event *ev, int max, int ms)
{
	int r;

	SAN_SLEEPING(ms != 0, r, ep_real(c, epfd, ev, max, ms));
	return r;
}

/*
 * What a ring tells of a watched connection's registration: input. The rest (EPOLLOUT) is the
 * kernel's; the flags epoll_ctl takes are no events.
 */
#define EP_FROM_RING (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP | EPOLLET | EPOLLONESHOT | \
		      EPOLLEXCLUSIVE | EPOLLWAKEUP)

/* When each epoll set last asked the kernel during a watch (by number & 63: a hint). */
static uint64_t ep_kernel_at[64];

struct ep_look {
	const struct epcall *c;
	int epfd;
	struct epoll_event *ev;
	int max;
};

static int ep_look(void *arg)
{
	struct ep_look *l = arg;

	return ep_real(l->c, l->epfd, l->ev, l->max, 0);
}

static bool ep_index_in(const int *v, int n, int k)
{
	for (int i = 0; i < n; i++)
		if (v[i] == k)
			return true;
	return false;
}

/*
 * Where the wait leaves each edge-triggered registration it watched: reported by the wait
 * (put[j]), seen up to where its look found it; reported by the kernel (one of ev's first
 * kernel_n entries has its data and input: a doorbell rung before the watch took them down),
 * seen up to where the watch last looked. Either way the application, which reads an edge
 * until EAGAIN, reads what came before; the next watch reports only what comes after (as TCP's
 * next edge).
 */
static void ep_edges_seen(const struct san_epshadow_ent *ent,
			  const struct san_watchset *x, const bool *put,
			  const struct epoll_event *ev, int kernel_n, const uint32_t *bells)
{
	for (int j = 0; j < x->n; j++) {
		const struct san_epshadow_ent *e = &ent[x->key[j]];
		bool told = put && put[j];

		for (int k = 0; !told && k < kernel_n; k++)
			told = ev[k].data.u64 == e->ev.data.u64 && (ev[k].events & (EPOLLIN | EPOLLRDNORM));
		if (x->w[j].edge && told)
			san_rxwatch_edge_told(&x->w[j], bells ? &bells[j] : NULL);
	}
}

/* The peer's doorbells so far, for each edge-triggered watch of x (ep_edges_seen's bells). */
static void ep_edges_bells(const struct san_watchset *x, uint32_t *bells)
{
	for (int j = 0; j < x->n; j++)
		bells[j] = x->w[j].edge ? san_rxwatch_bells(&x->w[j]) : 0;
}

/*
 * A wait over a set with switched connections in it (level-triggered input, and edge-triggered
 * input where it is the fd's only registration, as the copy of the set says): their readiness
 * from their rings (preload/san_watch.h). -2: this set cannot be watched so (the caller's path).
 */
static int ep_watch(const struct epcall *c, int epfd, struct epoll_event *ev, int max, int ms)
{
	struct san_epshadow_ent ent[SAN_WATCH_MAX];
	struct san_watchset x;
	struct ep_look l = { c, epfd, ev, max };
	bool put[SAN_WATCH_MAX];
	uint32_t bells[SAN_WATCH_MAX];
	int n, r;

	x.ctl_gen = san_rxwatch_ctl_gen();
	x.may_sleep = ms != 0;
	n = san_epshadow_watch_in(epfd, ent, SAN_WATCH_MAX);
	if (n <= 0 || n > SAN_WATCH_MAX)
		return -2;
	x.n = x.found = 0;
	for (int i = 0; i < n; i++)
		(void)san_watch_add(&x, ent[i].fd, i, ent[i].edge);
	if (!x.n)
		return -2;
	switch (san_watch_spin(&x, ms, &ep_kernel_at[epfd & 63], ep_look, &l, &r)) {
	case SAN_WATCH_KERNEL:
		ep_edges_seen(ent, &x, NULL, ev, r, NULL);
		san_watch_done(&x, NULL);
		return r;
	case SAN_WATCH_FOUND:
		/*
		 * A connection found ready whose registration asks for more than input (EPOLLOUT)
		 * is reported whole: the kernel is asked, unless it just was. (Not for an edge:
		 * its EPOLLOUT is an edge of its own, which the kernel's next look reports.) An
		 * edge found whose peer rang doorbells since the kernel's edges were last taken is
		 * reported with a look too: the kernel's edge for them, taken later, would be a
		 * second report of the same bytes.
		 */
		ep_edges_bells(&x, bells);
		for (int j = 0; j < x.n && !x.looked; j++)
			if (x.ready[j] && (x.w[j].edge ? san_rxwatch_edge_rang(&x.w[j])
						       : (ent[x.key[j]].ev.events & ~EP_FROM_RING) != 0)) {
				x.looked = true;
				if ((r = ep_look(&l)) < 0)
					r = 0;
			}
		/*
		 * After what the kernel returned. One it reported too (EPOLLOUT, or a doorbell) gets
		 * the ring's input added to its entry: dropped, a level-triggered EPOLLIN|EPOLLOUT
		 * registration would be reported writable only, over and over, while its input
		 * waits. The kernel's entries name no fd, only the application's data: each takes
		 * the input of one watched connection at most (two registered with the same data
		 * stay two events), and only the ones the kernel returned (kernel_n).
		 */
		{
			int merged[SAN_WATCH_MAX], nmerged = 0, kernel_n = r;

			for (int j = 0; j < x.n; j++) {
				const struct epoll_event *e = &ent[x.key[j]].ev;
				uint32_t in = e->events & (EPOLLIN | EPOLLRDNORM);
				int k = 0;

				put[j] = x.ready[j];
				if (!put[j])
					continue;
				while (k < kernel_n && (ev[k].data.u64 != e->data.u64 ||
							ep_index_in(merged, nmerged, k)))
					k++;
				if (k < kernel_n) {
					ev[k].events |= in;
					merged[nmerged++] = k;
				} else if (r < max) {
					ev[r++] = (struct epoll_event){ .events = in, .data = e->data };
				} else {
					put[j] = false;
				}
			}
			ep_edges_seen(ent, &x, put, ev, kernel_n, x.looked ? bells : NULL);
		}
		san_watch_done(&x, put);
		return r;
	case SAN_WATCH_SLEEP:
		break;
	}
	ep_edges_bells(&x, bells);
	r = ep_sleep(c, epfd, ev, max, ms);
	ep_edges_seen(ent, &x, NULL, ev, r, bells);
	san_watch_slept(&x, r);
	return r;
}

static int ep_wait_common(const struct epcall *c, int epfd, struct epoll_event *ev, int max,
			  int ms)
{
	if (likely(!san_any_switched()))
		return ep_sleep(c, epfd, ev, max, ms); /* (a sleeper before the first switch too) */
	/*
	 * No spin (SANSWITCH_SPIN_US=0): the flags stay up, the kernel says it all. A wait that
	 * does not wait (timeout 0) looks at the rings once: the quiet ones' data is there only.
	 */
	if (max > 0 && san_epshadow_any() && san_sock_spin_us()) {
		int r = ep_watch(c, epfd, ev, max, ms);

		if (r != -2)
			return r;
	}
	if (san_rxwatch_any_quiet())
		san_rxwatch_announce(); /* as in poll_common */
	{
		uint64_t until = san_route_spin_until(ms);

		for (int n = 1; san_route_spinning(until); n++) {
			int r = ep_real(c, epfd, ev, max, 0);

			if (r != 0) {
				san_route_spin_found(until, n, r);
				return r;
			}
		}
	}
	if (san_rxwatch_any_quiet())
		san_rxwatch_announce();
	return ep_sleep(c, epfd, ev, max, ms);
}

SAN_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	struct epcall c = { .wait = SAN_REAL(epoll_wait) };

	if (unlikely(!c.wait))
		return san_enosys();
	return ep_wait_common(&c, epfd, events, maxevents, timeout);
}

SAN_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
			   const sigset_t *sigmask)
{
	struct epcall c = { .pwait = SAN_REAL(epoll_pwait), .mask = sigmask };

	if (unlikely(!c.pwait))
		return san_enosys();
	return ep_wait_common(&c, epfd, events, maxevents, timeout);
}

SAN_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			    const struct timespec *timeout, const sigset_t *sigmask)
{
	struct epcall c = { .pwait2 = SAN_REAL(epoll_pwait2), .ts = timeout, .mask = sigmask };

	if (unlikely(!c.pwait2))
		return san_enosys();
	return ep_wait_common(&c, epfd, events, maxevents, ts_ms(timeout));
}
