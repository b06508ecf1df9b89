/* core — lite candidates' gates (san_lite.h). */
#include "core/san_lite.h"

#include "core/san_fdtable.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static struct san_lite *lites;
static unsigned int lites_size;
static unsigned int lites_end; /* 1 + the highest number ever opened */
static pthread_mutex_t lites_lock = PTHREAD_MUTEX_INITIALIZER;

int san_lite_init(unsigned int size)
{
	void *p;

	if (__atomic_load_n(&lites, __ATOMIC_ACQUIRE))
		return 0;
	if (!size)
		return -ENOMEM;
	pthread_mutex_lock(&lites_lock);
	if (!lites) {
		p = mmap(NULL, (size_t)size * sizeof(*lites), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) {
			lites_size = size;
			__atomic_store_n(&lites, (struct san_lite *)p, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&lites_lock);
	return __atomic_load_n(&lites, __ATOMIC_ACQUIRE) ? 0 : -ENOMEM;
}

static struct san_lite *slot(int fd)
{
	struct san_lite *t = __atomic_load_n(&lites, __ATOMIC_ACQUIRE);

	return t && (unsigned int)fd < lites_size ? &t[fd] : NULL;
}

struct san_lite *san_lite_of(int fd)
{
	struct san_lite *l = slot(fd);

	return l && (__atomic_load_n(&l->gate, __ATOMIC_ACQUIRE) & SAN_LITE_LIVE) ? l : NULL;
}

static bool lite_open(int fd, struct san_stats_conn *stc, const struct san_lite_a *a)
{
	struct san_lite *l;
	uint64_t g;
	unsigned int end;

	if (san_lite_init(san_fdt.size) < 0 || !(l = slot(fd)))
		return false;
	for (;;) {
		g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
		if (!(g & SAN_LITE_CALLS))
			break;
		/*
		 * Calls of the number's previous connection are still inside (another thread's
		 * receive, its number closed under it): what they move is not this connection's,
		 * and their lite_moved() and sleepers count would land in this record. No lite:
		 * a sock. (A gate left open by a close we never saw is shut first.)
		 */
		if (!(g & SAN_LITE_LIVE) ||
		    __atomic_compare_exchange_n(&l->gate, &g,
						(g & ~(uint64_t)(SAN_LITE_LIVE | SAN_LITE_DRAIN)) |
							SAN_LITE_CLOSED,
						false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return false;
	}
	l->tx = l->rx = l->a_ex_rx0 = 0;
	l->a_end_ns = a ? a->end_ns : 0;
	l->a_ex_done = l->a_want = 0;
	l->a_peer_known = a && a->peer;
	if (a && a->peer)
		l->a_peer = *a->peer;
	l->stc = stc;
	l->sent = l->last_tx = l->touched = l->sleepers = l->b_ex = l->b_outside = 0;
	l->nep = 0;
	for (uint32_t i = 0; a && i < a->nep && i < SAN_LITE_EPOLL_MAX; i++) {
		l->ep[i].epfd = a->ep[i].epfd;
		l->ep[i].ev = a->ep[i].ev;
		l->nep = i + 1;
	}
	l->ep_lock = 0; /* (a fork child's copy may hold a parent thread's) */
	/* (the engine's tuple is tagged with the generation it was asked for) */
	__atomic_store_n(&l->gate, (((g >> 32) + 1) << 32) | SAN_LITE_LIVE, __ATOMIC_SEQ_CST);
	end = __atomic_load_n(&lites_end, __ATOMIC_RELAXED);
	while ((unsigned int)fd >= end &&
	       !__atomic_compare_exchange_n(&lites_end, &end, (unsigned int)fd + 1, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return true;
}

bool san_lite_open(int fd, struct san_stats_conn *stc)
{
	return lite_open(fd, stc, NULL);
}

bool san_lite_open_a(int fd, struct san_stats_conn *stc, const struct san_lite_a *a)
{
	return a->end_ns && a->nep <= SAN_LITE_EPOLL_MAX && lite_open(fd, stc, a);
}

bool san_lite_is_a(int fd)
{
	struct san_lite *l = slot(fd);

	return l && __atomic_load_n(&l->a_end_ns, __ATOMIC_RELAXED) != 0;
}

struct san_lite *san_lite_enter(int fd, uint32_t *gen)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return NULL;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	do {
		if ((g & (SAN_LITE_LIVE | SAN_LITE_CLOSED | SAN_LITE_DRAIN)) != SAN_LITE_LIVE)
			return NULL;
	} while (!__atomic_compare_exchange_n(&l->gate, &g, g + 1, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	*gen = (uint32_t)(g >> 32);
	return l;
}

void san_lite_leave(struct san_lite *l, uint32_t gen)
{
	uint64_t g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);

	do {
		/* (a later connection's gate under the same number is not ours to count down) */
		if ((uint32_t)(g >> 32) != gen || !(g & SAN_LITE_CALLS))
			return;
	} while (!__atomic_compare_exchange_n(&l->gate, &g, g - 1, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
}

bool san_lite_close_gate(int fd, uint32_t *gen)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return false;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	do {
		if ((uint32_t)g != SAN_LITE_LIVE) /* calls inside, closed already, or no lite */
			return false;
	} while (!__atomic_compare_exchange_n(&l->gate, &g, g | SAN_LITE_CLOSED, false,
					      __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE));
	*gen = (uint32_t)(g >> 32);
	return true;
}

int san_lite_drain(int fd, uint32_t *gen)
{
	struct san_lite *l = slot(fd);
	uint64_t g, want;

	if (!l)
		return -1;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	do {
		if ((g & (SAN_LITE_LIVE | SAN_LITE_CLOSED)) != SAN_LITE_LIVE)
			return -1;
		if ((g & SAN_LITE_CALLS) == 0)
			want = (g & ~(uint64_t)SAN_LITE_DRAIN) | SAN_LITE_CLOSED;
		else if (!(g & SAN_LITE_DRAIN))
			want = g | SAN_LITE_DRAIN;
		else
			return 0;
	} while (!__atomic_compare_exchange_n(&l->gate, &g, want, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_ACQUIRE));
	*gen = (uint32_t)(g >> 32);
	return (want & SAN_LITE_CLOSED) ? 1 : 0;
}

void san_lite_undrain(int fd)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	while ((g & (SAN_LITE_LIVE | SAN_LITE_CLOSED | SAN_LITE_DRAIN)) ==
		       (SAN_LITE_LIVE | SAN_LITE_DRAIN) &&
	       !__atomic_compare_exchange_n(&l->gate, &g, g & ~(uint64_t)SAN_LITE_DRAIN, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

void san_lite_refused_busy(int fd)
{
	struct san_lite *l = slot(fd);
	uint64_t g = l ? __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE) : 0;

	/*
	 * Still draining: the connection the engine refused. Its generation is the mark, so that
	 * a later connection on the number (closed and accepted again between the look and the
	 * store) does not take it for its own.
	 */
	if ((g & (SAN_LITE_LIVE | SAN_LITE_CLOSED | SAN_LITE_DRAIN)) == (SAN_LITE_LIVE | SAN_LITE_DRAIN))
		__atomic_store_n(&l->b_outside, (uint32_t)(g >> 32), __ATOMIC_RELAXED);
}

void san_lite_end(struct san_lite *l, uint32_t gen)
{
	__atomic_store_n(&l->gate, (uint64_t)gen << 32, __ATOMIC_RELEASE);
}

struct san_lite *san_lite_shut(int fd, uint32_t *gen)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return NULL;
	for (;;) {
		g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
		if (!(g & SAN_LITE_LIVE))
			return NULL;
		if (g & SAN_LITE_CLOSED) {
			/* being made a sock: the caller finds that once it is done */
			san_lite_wait_closing(fd);
			continue;
		}
		/*
		 * (calls inside leave through the generation's count, which stays). A drain of the
		 * engine's is overridden, not waited for: the engine may be unable to run (a fork's
		 * prepare handler holds its loop, san_engine.c), and its next look finds no lite
		 * (san_lite_drain -1; san_lite_undrain does nothing to a gate that is not LIVE).
		 */
		if (__atomic_compare_exchange_n(&l->gate, &g,
						(g & ~(uint64_t)(SAN_LITE_LIVE | SAN_LITE_DRAIN)) |
							SAN_LITE_CLOSED,
						false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			*gen = (uint32_t)(g >> 32);
			return l;
		}
	}
}

void san_lite_wait_closing(int fd)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	/*
	 * A closer makes a sock or gives up in a few system calls; the engine drains for at most
	 * 20 ms (san_up.c, SAN_B_BUSY_TRIES), and only while a receive inside has bytes to return.
	 */
	for (int i = 0; l; i++) {
		g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
		if (!(g & SAN_LITE_LIVE) || !(g & (SAN_LITE_CLOSED | SAN_LITE_DRAIN)))
			return;
		if (i < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };

			nanosleep(&ts, NULL);
		}
	}
}

bool san_lite_forget(int fd)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return false;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	if (!(g & SAN_LITE_LIVE))
		return false;
	/* (whatever the calls, closers or drains of other threads were: they are not here) */
	__atomic_store_n(&l->gate, (g >> 32) << 32, __ATOMIC_RELEASE);
	return true;
}

bool san_lite_forget_stale(int fd)
{
	struct san_lite *l = slot(fd);
	uint64_t g;

	if (!l)
		return false;
	g = __atomic_load_n(&l->gate, __ATOMIC_ACQUIRE);
	do {
		if (!(g & SAN_LITE_LIVE))
			return false;
		/*
		 * (the calls inside stay counted: they are this process's threads, and leave through
		 * the generation's count; until they have, san_lite_open makes the number's next
		 * connection a sock, as after a close we saw)
		 */
	} while (!__atomic_compare_exchange_n(&l->gate, &g,
					      g & ~(uint64_t)(SAN_LITE_LIVE | SAN_LITE_CLOSED |
							      SAN_LITE_DRAIN),
					      false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return true;
}

unsigned int san_lite_end_of_numbers(void)
{
	return __atomic_load_n(&lites_end, __ATOMIC_ACQUIRE);
}
