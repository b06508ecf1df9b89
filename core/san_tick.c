/* core — a timer on the progress thread that runs only while there is work for it (san_tick.h). */
#include <string.h>

#include "core/san_engine.h"
#include "core/san_tick.h"

uint32_t san_tick_now(const struct san_tick *t)
{
	return __atomic_load_n(&t->n, __ATOMIC_RELAXED);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct san_tick *t = (struct san_tick *)w;

	(void)revents;
	t->run(__atomic_fetch_add(&t->n, 1, __ATOMIC_RELAXED));
	__atomic_store_n(&t->on, 0, __ATOMIC_SEQ_CST);
	/* work that came meanwhile saw the tick off and asked again, or we go on */
	if (__atomic_load_n(t->count, __ATOMIC_SEQ_CST) &&
	    !__atomic_exchange_n(&t->on, 1, __ATOMIC_SEQ_CST))
		return;
	san_ev.ev_timer_stop(loop, w);
}

static void tick_start(void *arg)
{
	struct san_tick *t = arg;

	if (!ev_is_active(&t->w)) {
		ev_timer_init(&t->w, on_tick, t->period, t->period);
		san_ev.ev_timer_start(san_engine_loop(), &t->w);
	}
}

bool san_tick_want(struct san_tick *t)
{
	if (__atomic_load_n(&t->on, __ATOMIC_SEQ_CST) ||
	    __atomic_exchange_n(&t->on, 1, __ATOMIC_SEQ_CST))
		return true;
	if (san_engine_call(tick_start, t) == 0)
		return true;
	__atomic_store_n(&t->on, 0, __ATOMIC_RELAXED);
	return false;
}

void san_tick_atfork_child(struct san_tick *t)
{
	memset(&t->w, 0, sizeof(t->w));
	__atomic_store_n(&t->on, 0, __ATOMIC_RELAXED);
}
