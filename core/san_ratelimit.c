/* core — a per-second line budget, lock-free: what keeps a flood of log lines short. */
#include "core/san_ratelimit.h"

_Static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0),
	       "the budget must be lock-free: it is asked from signal handlers");

bool san_ratelimit_pass(struct san_ratelimit *rl, uint32_t now, uint32_t limit)
{
	uint64_t w, next;

	if (!limit)
		return true;
	w = __atomic_load_n(&rl->word, __ATOMIC_RELAXED);
	do {
		if ((uint32_t)(w >> 32) != now)
			next = (uint64_t)now << 32 | 1; /* a new second: this line opens it */
		else if ((uint32_t)w >= limit)
			return false; /* spent: nothing written, so a flood does not bounce the line
				       */
		else
			next = w + 1;
	} while (!__atomic_compare_exchange_n(&rl->word, &w, next, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}
