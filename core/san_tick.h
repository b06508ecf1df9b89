/*
 * core — a periodic timer on the progress thread that runs only while there is work for it.
 *
 * Two ticks bound how long the library may leave something undone: the quiet tick arms
 * connections a wait left quiet (core/san_rxwatch.c), the cork tick rings for corked sends
 * (core/san_cork.c). Each runs while a count of its own (quiet connections, holds) is above
 * zero, and stops by itself after a period with none, so an idle process has no timer.
 *
 * The count and `on` make a Dekker pair: a caller raises the count (seq_cst), then asks for
 * the tick (san_tick_want: reads `on`, sets it); the tick, after its run, clears `on` (seq_cst)
 * and reads the count again. Either the tick sees the new count and goes on, or the caller
 * sees `on` clear and starts it.
 */
#ifndef SAN_TICK_H
#define SAN_TICK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/san_ev.h"

struct san_tick {
	ev_timer w;	       /* first: the timer's callback finds its tick from it */
	double period;	       /* seconds */
	const int *count;      /* the work left: the tick runs while it is above 0 */
	void (*run)(uint32_t); /* on the progress thread, given the tick's number */
	int on;		       /* the tick runs, or is asked for */
	uint32_t n;	       /* ticks so far */
};

#define SAN_TICK_INIT(period_, count_, run_) \
	{ .period = (period_), .count = (count_), .run = (run_) }

/* The tick's number now: the run of tick n sees what began before n (n - 1 and earlier). */
uint32_t san_tick_now(const struct san_tick *t);

/* After raising the count: make sure the tick runs. false: no progress thread to run it. */
bool san_tick_want(struct san_tick *t);

/* fork(), in the child: the parent's timer is not the child's (its loop is a new one). */
void san_tick_atfork_child(struct san_tick *t);

#endif
