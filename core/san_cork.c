/* core — a corked switched connection's held doorbells: the tick that bounds the hold (san_cork.h). */
#include <stdlib.h>

#include "core/san_cork.h"
#include "core/san_sock.h"
#include "core/san_tick.h"

/*
 * A hold ends at the fourth tick after it began: after 150 to 200 ms, never later than TCP's
 * cork timer (200 ms) and not much sooner (a sender paused between a header and its body
 * longer than that would have its pieces sent apart by TCP too).
 */
#define CORK_TICK 0.05
#define CORK_TICKS 3 /* ticks between the one a hold began before and the one that ends it */

static int held;   /* holds in this process (never fewer) */
static int broken; /* the tick could not be started: no more holds */

static void flush_old(uint32_t now);
static struct san_tick tick = SAN_TICK_INIT(CORK_TICK, &held, flush_old);

uint32_t san_cork_now(void)
{
	return san_tick_now(&tick);
}

static bool held_before(const struct san_sock *s, void *arg)
{
	/* (unlocked: one that began since is the next tick's; the lock decides below) */
	return __atomic_load_n(&s->bell_held, __ATOMIC_ACQUIRE) &&
	       (int32_t)(*(uint32_t *)arg - __atomic_load_n(&s->bell_tick, __ATOMIC_RELAXED)) >=
		       CORK_TICKS;
}

/* The holds old enough: rung for now. */
static void flush_old(uint32_t now)
{
	struct san_sock **v;
	int n = san_sock_all(&v, held_before, &now);

	for (int i = 0; i < n; i++) {
		san_sock_lock(v[i]);
		if (v[i]->bell_held && (int32_t)(now - v[i]->bell_tick) >= CORK_TICKS)
			san_conn_cork_flush(v[i]);
		pthread_mutex_unlock(&v[i]->lock);
		san_sock_put(v[i]);
	}
	free(v);
}

bool san_cork_begin(void)
{
	/* seq_cst: the count before the tick's `on` (san_tick.h) */
	__atomic_add_fetch(&held, 1, __ATOMIC_SEQ_CST);
	if (san_tick_want(&tick))
		return true;
	/*
	 * No progress thread: no hold from now on. (A hold another thread began meanwhile, which
	 * saw the tick asked for, is not bounded by it: ended by its uncork or its next send.)
	 */
	__atomic_store_n(&broken, 1, __ATOMIC_RELAXED);
	return false;
}

bool san_cork_usable(void)
{
	return !__atomic_load_n(&broken, __ATOMIC_RELAXED);
}

void san_cork_end(void)
{
	/* (a fork child ends holds its parent began: never below 0) */
	int n = __atomic_load_n(&held, __ATOMIC_RELAXED);

	while (n > 0 && !__atomic_compare_exchange_n(&held, &n, n - 1, false, __ATOMIC_RELAXED,
						     __ATOMIC_RELAXED))
		;
}

void san_cork_atfork_child(void)
{
	/* the parent's tick flushes the parent's holds (none is on a connection it shares) */
	san_tick_atfork_child(&tick);
	__atomic_store_n(&held, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&broken, 0, __ATOMIC_RELAXED);
}
