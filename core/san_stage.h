/* core — the sender's staging area: which of its bytes are free, which wait for the peer. */
#ifndef SAN_STAGE_H
#define SAN_STAGE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * On shm, a READ transfer's bytes are copied into the sender's half of the connection's
 * shared bulk area and announced by SRC_AVAIL; the receiver copies them out. The region is
 * the peer's to read until it releases the SRC_AVAIL frame from the ring, so each region
 * remembers the ring position just past its SRC_AVAIL (ring_end): once the consumer index
 * reaches it, the region is free (docs/protocol.md, "READ on shm").
 *
 * The area is used as a circular byte FIFO, regions in ring order, each one contiguous (the
 * receiver reads it with one copy): a region that would cross the end skips the tail instead,
 * and the skipped bytes are freed with that region. Positions are byte counts since the
 * start (they never wrap in practice: 2^64 bytes); offset = position mod size.
 *
 * Pure bookkeeping: no memory, no locking (the sock lock covers it); unit-tested.
 */
#define SAN_STAGE_RECS 64 /* regions awaiting release at most */

struct san_stage {
	uint64_t size; /* bytes of the area, 0: no area */
	uint64_t wr;   /* bytes handed out (regions and skipped tails) */
	uint64_t rd;   /* bytes freed */
	struct {
		uint64_t ring_end; /* ring position just past the region's SRC_AVAIL */
		uint64_t area_end; /* wr after the region */
	} rec[SAN_STAGE_RECS];
	unsigned int head, n; /* oldest record, records in use */
};

void san_stage_init(struct san_stage *st, uint64_t size);

/*
 * A contiguous free range for the next region, at most want bytes and at least min (or all of
 * want if that is less): its offset in the area and its length, or 0 when the area (or the
 * record table) is too full now. Nothing is claimed until san_stage_push.
 */
uint64_t san_stage_room(const struct san_stage *st, uint64_t want, uint64_t min, uint64_t *off);

/*
 * Claim the range san_stage_room just gave (len <= what it returned, same off), announced by
 * an SRC_AVAIL ending at ring position ring_end.
 */
void san_stage_push(struct san_stage *st, uint64_t off, uint64_t len, uint64_t ring_end);

/* The consumer index reached cons: free every region whose SRC_AVAIL it passed. */
void san_stage_release(struct san_stage *st, uint64_t cons);

/* The oldest region's ring_end (what to wait for when the area is full); 0 if none. */
uint64_t san_stage_oldest(const struct san_stage *st);

static inline bool san_stage_idle(const struct san_stage *st)
{
	return st->n == 0;
}

#endif /* SAN_STAGE_H */
