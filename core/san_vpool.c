/* core — verbs control buffers: one registered area cut into receive and send slots. */
#include "core/san_vpool.h"

#include <errno.h>
#include <stdlib.h>

int san_vpool_init(struct san_vpool *p, void *area, size_t area_len, size_t slot_size,
		   uint32_t nrecv, uint32_t nsend)
{
	uint64_t n = (uint64_t)nrecv + nsend;
	uint32_t i;

	*p = (struct san_vpool){ 0 };
	/* n < 2^31 keeps every index a valid int64_t and a uint32_t */
	if (!area || !slot_size || !n || n >= (1u << 31) || slot_size > SIZE_MAX / n ||
	    n * slot_size > area_len || (uintptr_t)area > UINTPTR_MAX - n * slot_size)
		return -EINVAL;
	p->state = malloc(n);
	p->send_free = malloc((nsend ? nsend : 1) * sizeof(p->send_free[0]));
	if (!p->state || !p->send_free) {
		free(p->state);
		free(p->send_free);
		*p = (struct san_vpool){ 0 };
		return -ENOMEM;
	}
	p->base = area;
	p->slot_size = slot_size;
	p->nrecv = nrecv;
	p->nsend = nsend;
	for (i = 0; i < nrecv; i++)
		p->state[i] = SAN_VPOOL_RECV_POSTED;
	p->recv_posted = nrecv;
	/* the lowest send index on top: slots are handed out in address order at first */
	for (i = 0; i < nsend; i++) {
		p->state[nrecv + i] = SAN_VPOOL_SEND_FREE;
		p->send_free[i] = nrecv + nsend - 1 - i;
	}
	p->send_nfree = nsend;
	return 0;
}

void san_vpool_fini(struct san_vpool *p)
{
	free(p->state);
	free(p->send_free);
	*p = (struct san_vpool){ 0 };
}

int64_t san_vpool_send_get(struct san_vpool *p)
{
	uint32_t idx;

	if (!p->send_nfree)
		return -EAGAIN;
	idx = p->send_free[--p->send_nfree];
	p->state[idx] = SAN_VPOOL_SEND_BUSY;
	return idx;
}

int san_vpool_send_put(struct san_vpool *p, uint64_t idx)
{
	if (!san_vpool_is_send(p, idx))
		return -EINVAL;
	if (p->state[idx] != SAN_VPOOL_SEND_BUSY)
		return -EALREADY;
	/* cannot overflow: only a BUSY slot comes back, and a BUSY slot is not on the stack */
	p->state[idx] = SAN_VPOOL_SEND_FREE;
	p->send_free[p->send_nfree++] = (uint32_t)idx;
	return 0;
}

int san_vpool_recv_take(struct san_vpool *p, uint64_t idx)
{
	if (!san_vpool_is_recv(p, idx))
		return -EINVAL;
	if (p->state[idx] != SAN_VPOOL_RECV_POSTED)
		return -EALREADY;
	p->state[idx] = SAN_VPOOL_RECV_HELD;
	p->recv_posted--;
	return 0;
}

int san_vpool_recv_repost(struct san_vpool *p, uint64_t idx)
{
	if (!san_vpool_is_recv(p, idx))
		return -EINVAL;
	if (p->state[idx] != SAN_VPOOL_RECV_HELD)
		return -EALREADY;
	p->state[idx] = SAN_VPOOL_RECV_POSTED;
	p->recv_posted++;
	return 0;
}

void *san_vpool_addr(const struct san_vpool *p, uint64_t idx)
{
	if (idx >= san_vpool_nslots(p))
		return NULL;
	return p->base + idx * p->slot_size;
}

int64_t san_vpool_index(const struct san_vpool *p, const void *addr)
{
	uintptr_t a = (uintptr_t)addr, base = (uintptr_t)p->base;

	/* compared as integers: a pointer outside the area must be refused, not subtracted */
	if (!p->base || a < base || a - base >= (uint64_t)san_vpool_nslots(p) * p->slot_size)
		return -EINVAL;
	return (int64_t)((a - base) / p->slot_size);
}
