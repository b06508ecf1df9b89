/* core — verbs control buffers: one registered area cut into receive and send slots. */
#ifndef SAN_VPOOL_H
#define SAN_VPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The verbs provider moves every session message through pre-registered slots of max_msg
 * bytes: R receive slots, all posted at start (the credits of docs/protocol.md §11 are these
 * slots) and re-posted once the engine is done with their message, and S send slots, taken for
 * one send and given back when its completion arrives (in any order). The area is registered
 * once by the provider; this file only keeps the books.
 *
 * Slot i is at area + i * slot_size: receive slots are 0 .. R-1, send slots R .. R+S-1. The
 * provider posts a slot with wr_id = its index, so a completion names its slot; an index that
 * is out of range, of the wrong kind or not in the expected state is refused with an error
 * (a provider bug or a corrupted completion), never followed.
 *
 * Pure bookkeeping: no locking (the caller's), O(1) per operation, memory allocated only by
 * san_vpool_init. The bookkeeping lives outside the area: the peer can write into receive slots.
 */
enum san_vpool_slot_state {
	SAN_VPOOL_SEND_FREE,
	SAN_VPOOL_SEND_BUSY,   /* taken for a send whose completion has not come */
	SAN_VPOOL_RECV_POSTED, /* posted as a receive (the peer may fill it) */
	SAN_VPOOL_RECV_HELD,   /* its receive completed; the message is being used */
};

struct san_vpool {
	uint8_t *base;
	size_t slot_size;
	uint32_t nrecv, nsend;
	uint32_t send_nfree;  /* entries on send_free */
	uint32_t recv_posted; /* receive slots in RECV_POSTED */
	uint32_t *send_free;  /* stack of free send slot indices (LIFO: the warmest slot first) */
	uint8_t *state;	      /* enum san_vpool_slot_state, per slot */
};

/*
 * Carve nrecv + nsend slots of slot_size bytes out of [area, area + area_len); every receive
 * slot starts RECV_POSTED (the provider posts them all), every send slot free. slot_size should
 * be a multiple of the cache line. 0, -EINVAL (no slots, slot_size 0, area too small or NULL,
 * sizes overflowing) or -ENOMEM.
 */
int san_vpool_init(struct san_vpool *p, void *area, size_t area_len, size_t slot_size,
		   uint32_t nrecv, uint32_t nsend);
void san_vpool_fini(struct san_vpool *p);

/* A free send slot's index, now SEND_BUSY, or -EAGAIN when all are in flight. */
int64_t san_vpool_send_get(struct san_vpool *p);

/* The send completion of slot @idx (a wr_id): 0, -EINVAL (not a send slot), -EALREADY (free). */
int san_vpool_send_put(struct san_vpool *p, uint64_t idx);

/* The receive completion of slot @idx: POSTED -> HELD. 0, -EINVAL (not a receive slot),
 * -EALREADY (not posted: a second completion for one post). */
int san_vpool_recv_take(struct san_vpool *p, uint64_t idx);

/* The engine is done with held slot @idx: HELD -> POSTED, the provider re-posts it.
 * 0, -EINVAL (not a receive slot), -EALREADY (not held). */
int san_vpool_recv_repost(struct san_vpool *p, uint64_t idx);

/* Slot @idx's first byte, or NULL when @idx is out of range. */
void *san_vpool_addr(const struct san_vpool *p, uint64_t idx);

/* The index of the slot holding byte @addr, or -EINVAL when it is outside every slot. */
int64_t san_vpool_index(const struct san_vpool *p, const void *addr);

static inline uint32_t san_vpool_nslots(const struct san_vpool *p)
{
	return p->nrecv + p->nsend;
}

static inline bool san_vpool_is_recv(const struct san_vpool *p, uint64_t idx)
{
	return idx < p->nrecv;
}

static inline bool san_vpool_is_send(const struct san_vpool *p, uint64_t idx)
{
	return idx >= p->nrecv && idx < (uint64_t)p->nrecv + p->nsend;
}

/* Slot @idx's state; meaningful only for an index below san_vpool_nslots. */
static inline enum san_vpool_slot_state san_vpool_state(const struct san_vpool *p, uint64_t idx)
{
	return (enum san_vpool_slot_state)p->state[idx];
}

#endif /* SAN_VPOOL_H */
