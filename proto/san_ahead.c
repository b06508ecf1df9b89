/* proto: the READ-ahead depth — one more after a stall, one less after a calm run. */
#include "proto/san_ahead.h"

void san_ahead_init(struct san_ahead *a, uint32_t max)
{
	*a = (struct san_ahead){ .depth = 1, .max = max ? max : 1 };
}

void san_ahead_reached(struct san_ahead *a, bool waited)
{
	a->reached++;
	if (waited) {
		a->stalls++;
		a->calm = 0;
		if (a->depth < a->max)
			a->depth++;
		return;
	}
	if (++a->calm >= SAN_AHEAD_CALM) {
		a->calm = 0;
		if (a->depth > 1)
			a->depth--;
	}
}
