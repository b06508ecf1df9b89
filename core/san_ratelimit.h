/* core — a per-second line budget, lock-free: what keeps a flood of log lines short. */
#ifndef SAN_RATELIMIT_H
#define SAN_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * One budget (a log call site's): the second it counts and the lines let through in it, in one
 * 64-bit word so a compare-and-swap moves both. Zero-initialised is ready to use. No lock and no
 * system call: it may be asked from any thread, and from a signal handler that interrupted
 * another ask (the worst a race does is let a line more or less through).
 */
struct san_ratelimit {
	uint64_t word; /* (second << 32) | lines let through in that second */
};

/*
 * May one more line go out at second @now (any monotonic count of seconds)? At most @limit a
 * second; @limit 0 means no limit. The count saturates at @limit: a flood costs one load.
 */
bool san_ratelimit_pass(struct san_ratelimit *rl, uint32_t now, uint32_t limit);

#endif /* SAN_RATELIMIT_H */
