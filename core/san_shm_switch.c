/* core — shm: the switch-over word, one per direction (see san_shm_switch.h). */
#include "core/san_shm_switch.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

/* A value some state has: OPEN, READING, WITHDRAWN or COMMITTED with an X. */
static bool sw_known(uint64_t w)
{
	return w == SAN_SHM_SW_OPEN || w == SAN_SHM_SW_READING || w == SAN_SHM_SW_WITHDRAWN ||
	       (w & ~SAN_SHM_SW_X_MAX) == SAN_SHM_SW_COMMITTED;
}

/* Swap want for to; false with *w the value found. Sequentially consistent: see the header. */
static bool sw_swap(struct san_shm_ring_shared *sh, uint64_t *w, uint64_t to)
{
	return atomic_compare_exchange_strong_explicit(&sh->sw, w, to, memory_order_seq_cst,
						       memory_order_seq_cst);
}

/* What the reader makes of a word that is not OPEN (w is not READING: callers check). */
static int sw_found(uint64_t w, uint64_t *x)
{
	if (w == SAN_SHM_SW_WITHDRAWN)
		return -ECANCELED;
	if (!sw_known(w) || w == SAN_SHM_SW_READING)
		return -EPROTO;
	*x = w & SAN_SHM_SW_X_MAX;
	return 1;
}

int san_shm_sw_read_begin(struct san_shm_ring_shared *sh, uint64_t *x)
{
	uint64_t w = SAN_SHM_SW_OPEN;

	if (sw_swap(sh, &w, SAN_SHM_SW_READING))
		return 0;
	return sw_found(w, x);
}

int san_shm_sw_read_end(struct san_shm_ring_shared *sh)
{
	uint64_t w = SAN_SHM_SW_READING;

	/* (nothing but us may change READING: a peer that did lied) */
	return sw_swap(sh, &w, SAN_SHM_SW_OPEN) ? 0 : -EPROTO;
}

bool san_shm_sw_committed(struct san_shm_ring_shared *sh, uint64_t *x)
{
	uint64_t w = atomic_load_explicit(&sh->sw, memory_order_seq_cst);

	if ((w & ~SAN_SHM_SW_X_MAX) != SAN_SHM_SW_COMMITTED)
		return false;
	*x = w & SAN_SHM_SW_X_MAX;
	return true;
}

int san_shm_sw_withdraw(struct san_shm_ring_shared *sh, uint64_t *x)
{
	uint64_t w = SAN_SHM_SW_OPEN;

	if (sw_swap(sh, &w, SAN_SHM_SW_WITHDRAWN) || w == SAN_SHM_SW_WITHDRAWN)
		return 0;
	return sw_found(w, x);
}

int san_shm_sw_commit(struct san_shm_ring_shared *sh, uint64_t x, unsigned int tries)
{
	if (x > SAN_SHM_SW_X_MAX)
		return -EINVAL;
	for (unsigned int i = 0;; i++) {
		uint64_t w = SAN_SHM_SW_OPEN;

		if (sw_swap(sh, &w, SAN_SHM_SW_COMMITTED | x))
			return 0;
		if (w == SAN_SHM_SW_WITHDRAWN)
			return -ECANCELED;
		if (!sw_known(w))
			return -EPROTO;
		if (w != SAN_SHM_SW_READING)
			return -EALREADY;
		if (i + 1 >= tries)
			return -EBUSY;
		/*
		 * The reader is inside a nonblocking receive: a few microseconds, unless its
		 * thread lost its CPU, perhaps to us (then yielding gives it back).
		 */
		sched_yield();
	}
}
