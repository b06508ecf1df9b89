/* core — the sender's staging area: which of its bytes are free, which wait for the peer. */
#include "core/san_stage.h"

void san_stage_init(struct san_stage *st, uint64_t size)
{
	*st = (struct san_stage){ .size = size };
}

uint64_t san_stage_room(const struct san_stage *st, uint64_t want, uint64_t min, uint64_t *off)
{
	uint64_t used = st->wr - st->rd, free, pos, tail, need, avail;

	if (!st->size || !want || st->n == SAN_STAGE_RECS || used > st->size)
		return 0;
	free = st->size - used;
	pos = st->wr % st->size;
	tail = st->size - pos;
	need = want < min ? want : min;
	if (tail >= need) {
		/* Right here: up to the end of the area, or up to the oldest region if sooner. */
		avail = free < tail ? free : tail;
		*off = pos;
	} else {
		/* The tail is too short for one region: skip it and start at offset 0. */
		if (free < tail || free - tail < need) /* (no tail + need: it could wrap) */
			return 0;
		avail = free - tail;
		*off = 0;
	}
	if (avail < need)
		return 0;
	return avail < want ? avail : want;
}

void san_stage_push(struct san_stage *st, uint64_t off, uint64_t len, uint64_t ring_end)
{
	unsigned int i = (st->head + st->n) % SAN_STAGE_RECS;

	if (off != st->wr % st->size)
		st->wr += st->size - st->wr % st->size; /* the skipped tail goes with this region */
	st->wr += len;
	st->rec[i].ring_end = ring_end;
	st->rec[i].area_end = st->wr;
	st->n++;
}

void san_stage_release(struct san_stage *st, uint64_t cons)
{
	while (st->n && st->rec[st->head].ring_end <= cons) {
		st->rd = st->rec[st->head].area_end;
		st->head = (st->head + 1) % SAN_STAGE_RECS;
		st->n--;
	}
	if (!st->n)
		st->wr = st->rd =
			0; /* empty: the next region starts at offset 0, nothing skipped */
}

uint64_t san_stage_oldest(const struct san_stage *st)
{
	return st->n ? st->rec[st->head].ring_end : 0;
}
