/* preload — a wait's spin over the rings of the connections it watches (san_watch.h). */
#include "preload/san_preload.h"
#include "preload/san_watch.h"

#include <sched.h>

/*
 * While it finds its connections ready in their rings, a wait still asks the kernel every
 * WATCH_KERNEL_NS for the rest of its fds (a listener, pipes, connections on TCP, EPOLLOUT),
 * so that they wait at most that long behind busy rings.
 */
#define WATCH_KERNEL_NS 50000u

bool san_watch_add(struct san_watchset *x, int fd, int key, bool edge)
{
	bool ready = false;

	if (x->n == SAN_WATCH_MAX ||
	    !san_rxwatch_begin(&x->w[x->n], fd, edge, x->ctl_gen, x->may_sleep, &ready))
		return false;
	x->key[x->n] = key;
	x->ready[x->n] = ready;
	x->found += ready;
	x->n++;
	return true;
}

static bool kernel_due(uint64_t *kernel_at, uint64_t now)
{
	if (now - __atomic_load_n(kernel_at, __ATOMIC_RELAXED) < WATCH_KERNEL_NS)
		return false;
	__atomic_store_n(kernel_at, now, __ATOMIC_RELAXED);
	return true;
}

/* The peer of a watched connection last committed on this CPU. */
static bool peer_here(const struct san_watchset *x)
{
	int cpu = sched_getcpu();

	for (int j = 0; j < x->n; j++)
		if (san_rxwatch_peer_here(&x->w[j], cpu))
			return true;
	return false;
}

static void unwatch(struct san_watchset *x)
{
	for (int j = 0; j < x->n; j++)
		san_rxwatch_end(&x->w[j], false);
	x->n = 0;
}

enum san_watch_end san_watch_spin(struct san_watchset *x, int ms, uint64_t *kernel_at,
				  int (*look)(void *arg), void *arg, int *kr)
{
	uint64_t now;

	*kr = 0;
	x->looked = false;
	x->start = san_sock_now_ns();
	x->until = x->found ? 0 : san_route_spin_until(ms);
	for (int round = 1;; round++) {
		/* the first round's look was the watch's start */
		for (int j = 0; !x->found && round > 1 && j < x->n; j++)
			x->found += x->ready[j] = san_rxwatch_ready(&x->w[j]);
		now = san_sock_now_ns();
		if (x->found) {
			if (round > 1)
				san_route_spin_found(x->until, round, x->found);
			/* busy in the rings: the kernel's part of the wait still gets its turn */
			if (kernel_due(kernel_at, now)) {
				x->looked = true;
				if ((*kr = look(arg)) < 0)
					*kr = 0;
			}
			return SAN_WATCH_FOUND;
		}
		if (kernel_due(kernel_at, now) && (*kr = look(arg)) != 0) {
			if (*kr > 0 && round > 1)
				san_route_spin_found(x->until, round, *kr);
			return SAN_WATCH_KERNEL;
		}
		if (!x->until || !san_route_spinning(x->until))
			break;
		/*
		 * A peer last seen on this CPU needs it to answer: each round gives it the CPU
		 * (a yield returns at once when nothing else waits for it). Sleeping instead
		 * would be the kernel's ping-pong, a wake-up per message.
		 */
		if (peer_here(x))
			sched_yield();
		else
			__builtin_ia32_pause();
	}
	/* to sleep: flags up, and what came meanwhile is reported rather than slept over */
	for (int j = 0; j < x->n; j++)
		x->found += x->ready[j] = san_rxwatch_arm(&x->w[j]);
	if (x->found)
		return SAN_WATCH_FOUND;
	if (san_rxwatch_any_quiet())
		san_rxwatch_announce();
	return SAN_WATCH_SLEEP;
}

void san_watch_done(struct san_watchset *x, const bool *reported)
{
	for (int j = 0; j < x->n; j++)
		san_rxwatch_end(&x->w[j], reported ? reported[j] : x->ready[j]);
	x->n = 0;
}

void san_watch_slept(struct san_watchset *x, int r)
{
	int e = errno;

	/* the spin ran out (or none): would a longer one have caught this? */
	if (r > 0 && x->until)
		san_sock_spin_late(san_sock_now_ns() - x->start, peer_here(x));
	unwatch(x);
	errno = e;
}
