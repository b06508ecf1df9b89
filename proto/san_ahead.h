/* proto: how far ahead a receiver READs — the depth of its READ pipeline, found from its stalls. */
#ifndef SAN_AHEAD_H
#define SAN_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

/*
 * On verbs a receiver that is behind (transfers wait in its inbound ring) may RDMA-READ their
 * bytes into its staging mirror before the application asks for them (docs/verbs.md §4). Each
 * such READ costs a copy that a READ on demand, straight into the application's buffer, does
 * not, and pays only if the application would otherwise have waited for those bytes. How many to
 * keep in flight is the pipeline's bandwidth-delay product: the rate at which the application
 * consumes transfers, times the time from a READ's post to its bytes being usable. That time is
 * not the READ's round trip alone: it holds the device's work, every thread wake-up between the
 * completion and the application, and the sender's side; nobody can measure it directly. So the
 * depth is found by feedback, as the kernel's file read-ahead finds its window:
 *
 *   - the application reaches a transfer that was queued behind another and has to wait for its
 *     bytes (its READ not yet done, or not posted at all): the pipeline was too shallow, depth+1;
 *   - SAN_AHEAD_CALM such transfers in a row found their bytes waiting: it may be deeper than it
 *     needs to be, depth-1 (if it was not, the next stall puts the one back).
 *
 * It settles at the smallest depth that keeps the application from waiting, ceil(latency /
 * time the application spends on a transfer) — the BDP in transfers — and tries one less once
 * every SAN_AHEAD_CALM transfers. Clamped to [1, max]: one READ ahead is what tells whether it
 * pays. Pure: no clock, no system calls; unit-tested with a pipeline simulation.
 */
#define SAN_AHEAD_CALM 32u

struct san_ahead {
	uint32_t depth; /* READs ahead the receiver may have in flight, not yet reached */
	uint32_t max;
	uint32_t calm;	  /* transfers reached in a row without waiting */
	uint64_t stalls;  /* transfers the application waited for */
	uint64_t reached; /* transfers reached that had been queued behind another */
};

/* Depth 1; max is at least 1. */
void san_ahead_init(struct san_ahead *a, uint32_t max);

/* The application reached a transfer that was queued behind another; waited: for its bytes. */
void san_ahead_reached(struct san_ahead *a, bool waited);

static inline uint32_t san_ahead_depth(const struct san_ahead *a)
{
	return a->depth;
}

#endif /* SAN_AHEAD_H */
