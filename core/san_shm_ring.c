/* core — shm provider: the SPSC frame ring, its index checks and its doorbell flags. */
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "core/san_shm_ring.h"
#include "proto/san_frame.h"
#include "proto/san_wire.h"

/* The PAD marker as it sits in memory: magic then the next frame's seq, both big-endian. */
struct san_shm_pad {
	uint32_t magic;
	uint32_t seq;
};
_Static_assert(sizeof(struct san_shm_pad) == SAN_SHM_PAD_LEN && SAN_SHM_PAD_LEN <= SAN_FRAME_ALIGN,
	       "a PAD marker must fit in the smallest tail a frame can leave");

static int san_shm_ring_size_ok(uint64_t size)
{
	return size >= SAN_SHM_RING_MIN && size <= SAN_SHM_RING_MAX && !(size & (size - 1));
}

int san_shm_ring_init(void *base, size_t map_len, uint64_t data_size)
{
	struct san_shm_ring_shared *sh = base;

	if (!base || (uintptr_t)base % SAN_SHM_RING_ALIGN || !san_shm_ring_size_ok(data_size) ||
	    map_len < san_shm_ring_bytes(data_size))
		return -EINVAL;
	memset(sh, 0, sizeof(*sh));
	sh->magic = SAN_SHM_RING_MAGIC;
	sh->version = SAN_SHM_RING_VERSION;
	sh->hdr_size = SAN_SHM_RING_HDR_SIZE;
	sh->data_size = data_size;
	atomic_store_explicit(&sh->prod, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->cons, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->cons_armed, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->bells, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->cons_edges, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->cons_window, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->direct, SAN_SHM_DIRECT_FREE, memory_order_relaxed);
	atomic_store_explicit(&sh->src, SAN_SHM_SRC_FREE, memory_order_relaxed);
	/* The mapping reaches the peer through the engine's handshake, a syscall: a barrier. */
	atomic_store_explicit(&sh->prod_armed, 0, memory_order_release);
	return 0;
}

/*
 * Common part of both attaches: check the header once, copy what we need, and never look at
 * block 0 again (the peer may rewrite it at any time after this).
 */
static int san_shm_ring_attach(void *base, size_t map_len, uint32_t max_msg, uint64_t *size,
			       uint32_t *max_out)
{
	const struct san_shm_ring_shared *sh = base;
	uint64_t ds;
	uint32_t fit;

	if (!base || (uintptr_t)base % SAN_SHM_RING_ALIGN || map_len < SAN_SHM_RING_HDR_SIZE)
		return -EINVAL;
	ds = *(volatile const uint64_t *)&sh->data_size; /* read once */
	if (*(volatile const uint32_t *)&sh->magic != SAN_SHM_RING_MAGIC ||
	    *(volatile const uint16_t *)&sh->version != SAN_SHM_RING_VERSION ||
	    *(volatile const uint16_t *)&sh->hdr_size != SAN_SHM_RING_HDR_SIZE ||
	    !san_shm_ring_size_ok(ds) || map_len - SAN_SHM_RING_HDR_SIZE < ds)
		return -EPROTO;
	/*
	 * Largest message whose frame (align8(msg) + trailer) fills at most half the data area.
	 * A bigger frame could find no place at all from some positions: the tail it must skip
	 * (up to its own length - 8) plus the frame itself would exceed the ring.
	 */
	fit = (uint32_t)(ds / 2 > SAN_MSG_MAX + (uint64_t)SAN_TRAILER_LEN
				 ? SAN_MSG_MAX
				 : ds / 2 - SAN_TRAILER_LEN);
	if (!max_msg)
		max_msg = fit;
	if (max_msg < SAN_HDR_LEN || max_msg > fit)
		return -EINVAL;
	*size = ds;
	*max_out = max_msg;
	return 0;
}

int san_shm_ring_prod_attach(struct san_shm_prod *p, void *base, size_t map_len, uint32_t max_msg)
{
	uint64_t size;
	uint32_t max;
	int err = san_shm_ring_attach(base, map_len, max_msg, &size, &max);

	if (err)
		return err;
	memset(p, 0, sizeof(*p));
	p->sh = base;
	p->data = (uint8_t *)base + SAN_SHM_RING_HDR_SIZE;
	p->size = size;
	p->max_msg = max;
	return 0;
}

int san_shm_ring_cons_attach(struct san_shm_cons *c, void *base, size_t map_len, uint32_t max_msg)
{
	uint64_t size;
	uint32_t max;
	int err = san_shm_ring_attach(base, map_len, max_msg, &size, &max);

	if (err)
		return err;
	memset(c, 0, sizeof(*c));
	c->sh = base;
	c->data = (uint8_t *)base + SAN_SHM_RING_HDR_SIZE;
	c->size = size;
	c->max_msg = max;
	return 0;
}

/* ---- producer ------------------------------------------------------------------------------ */

static int san_shm_prod_fail(struct san_shm_prod *p, const char *why)
{
	p->err = -EPROTO;
	p->why = why;
	p->res_cap = 0;
	return -EPROTO;
}

/*
 * Take a fresh look at the consumer's index. seq_cst (not just acquire, which is all the space
 * check needs: our writes into freed bytes must not overtake the consumer's reads of them)
 * because san_shm_ring_prod_arm relies on it as the second half of its Dekker pair.
 */
static int san_shm_prod_refresh(struct san_shm_prod *p)
{
	uint64_t c = atomic_load_explicit(&p->sh->cons, memory_order_seq_cst);

	if (c < p->cons)
		return san_shm_prod_fail(p, "consumer index went backwards");
	if (c > p->prod)
		return san_shm_prod_fail(p, "consumer index passed the producer index");
	p->cons = c;
	return 0;
}

/* Bytes a message of msg_len needs at the current position: the frame, plus the PAD'd tail. */
static int san_shm_prod_need(const struct san_shm_prod *p, uint32_t msg_len, uint64_t *pad,
			     uint32_t *flen)
{
	uint64_t tail;

	if (msg_len < SAN_HDR_LEN || msg_len > p->max_msg)
		return -EMSGSIZE;
	*flen = (uint32_t)san_frame_len(msg_len);
	tail = p->size - (p->prod & (p->size - 1));
	*pad = *flen > tail ? tail : 0;
	return 0;
}

static uint64_t san_shm_prod_room(const struct san_shm_prod *p)
{
	return p->size - (p->prod - p->cons);
}

void san_shm_ring_prod_rewind(struct san_shm_prod *p, uint64_t at)
{
	if (at && (at < SAN_SHM_RING_MIN || at > p->size / 2 || (at & (at - 1))))
		at = 0;
	p->rewind_at = at;
	p->rewind_look = 0;
	p->rewind_missed = false;
}

uint64_t san_shm_ring_prod_since(const struct san_shm_prod *p, uint64_t from)
{
	uint64_t n = p->prod - from;

	if (from < p->skip_to)
		n -= p->skip_to - (from > p->skip_from ? from : p->skip_from);
	return n;
}

/* Unread bytes that look like the reply being written rather than a stream (rewind_pad). */
#define REWIND_FEW 4096u

/*
 * The PAD of a rewind for a frame of flen bytes (san_shm_ring_prod_rewind), or 0: the ring
 * empty, as far as a look at the consumer's index says, and the frame fits before here (so
 * the room the PAD leaves holds it). Only an -EPROTO from that look is an error.
 */
static int rewind_pad(struct san_shm_prod *p, uint32_t flen, uint64_t *pad)
{
	uint64_t off = p->prod & (p->size - 1);
	int err;

	*pad = 0;
	if (!p->rewind_at || off < p->rewind_at || flen > off || p->prod < p->rewind_look)
		return 0;
	if (p->cons != p->prod) {
		err = san_shm_prod_refresh(p);
		if (err)
			return err;
		if (p->cons != p->prod) {
			/*
			 * Bytes unread. A few, at a first miss: most likely the frames of this
			 * reply so far (a header, then its body), and the next reply's first
			 * frame finds the ring empty: look at the next frame. Else a stream,
			 * which would find bytes unread at every frame: look again a little
			 * later. (A fixed distance alone can alias with a reply's frames:
			 * nginx's 288 + 96 bytes met the body every time.)
			 */
			bool next = !p->rewind_missed && p->prod - p->cons <= REWIND_FEW;

			p->rewind_missed = next;
			p->rewind_look = p->prod + (next ? 0 : p->rewind_at / 64);
			return 0;
		}
	}
	p->rewind_missed = false;
	*pad = p->size - off;
	return 0;
}

int san_shm_ring_prod_reserve(struct san_shm_prod *p, uint32_t msg_len, void **buf)
{
	uint64_t pad;
	uint32_t flen;
	int err;

	if (p->err)
		return p->err;
	bool rewound = false;

	err = san_shm_prod_need(p, msg_len, &pad, &flen);
	if (!err && !pad) {
		err = rewind_pad(p, flen, &pad);
		rewound = pad != 0;
	}
	if (err)
		return err;
	if (san_shm_prod_room(p) < pad + flen) {
		err = san_shm_prod_refresh(p);
		if (err)
			return err;
		if (san_shm_prod_room(p) < pad + flen)
			return -EAGAIN;
	}
	p->res_pad = pad;
	p->res_rewind = rewound;
	p->res_cap = flen;
	*buf = p->data + ((p->prod + pad) & (p->size - 1));
	return (int)flen;
}

/*
 * cons_armed: 0, or the consumer's arm word: SAN_SHM_ARMED and the read position it waits at
 * (8-byte units, 31 bits; san_shm_ring.h, "Doorbells"). An older consumer writes 1: armed, no
 * position (every commit that finds it rings).
 */
static uint32_t arm_word(uint64_t rd)
{
	return SAN_SHM_ARMED | ((uint32_t)(rd >> 3) & ~SAN_SHM_ARMED);
}

/*
 * Producer, having published up to @end: does the consumer sleep waiting for something we
 * published? Then take its flag (the one who takes it rings). A flag raised at or past @end
 * (with @at_end, past it only) is a later sleep, for what we have not published: left alone, or
 * a frame it has already read would be rung for and its socket left readable over an empty
 * ring, while its next sleep went unrung-for by the commit that would need it.
 */
static bool take_armed(struct san_shm_ring_shared *sh, uint64_t end, bool at_end)
{
	uint32_t w = atomic_load_explicit(&sh->cons_armed, memory_order_seq_cst);

	while (w) {
		if (w & SAN_SHM_ARMED) {
			uint32_t d = ((uint32_t)(end >> 3) - w) & ~SAN_SHM_ARMED;

			if (d >= (SAN_SHM_ARMED >> 1) || (!d && !at_end))
				return false;
		}
		if (atomic_compare_exchange_weak_explicit(&sh->cons_armed, &w, 0,
							  memory_order_seq_cst, memory_order_seq_cst))
			return true;
	}
	return false;
}

/* prod_cpu: a store only when it changes (the line is ours, and hot: prod is on it). */
static void note_cpu(struct san_shm_prod *p)
{
	int cpu = sched_getcpu();
	uint32_t v = cpu >= 0 ? (uint32_t)cpu + 1 : 0;

	if (atomic_load_explicit(&p->sh->prod_cpu, memory_order_relaxed) != v)
		atomic_store_explicit(&p->sh->prod_cpu, v, memory_order_relaxed);
}

/*
 * (4) of the doorbell argument, after publishing up to p->prod: 1 if the consumer sleeps for
 * something published (its flag taken) or asks for a doorbell per commit (cons_edges).
 */
static int peer_wants_bell(struct san_shm_prod *p)
{
	if (take_armed(p->sh, p->prod, false))
		return 1;
	/* seq_cst: the consumer's watch takes it down and puts it up (then looks at prod) */
	return atomic_load_explicit(&p->sh->cons_edges, memory_order_seq_cst) != 0;
}

static int prod_commit(struct san_shm_prod *p, bool look);

int san_shm_ring_prod_commit(struct san_shm_prod *p)
{
	return prod_commit(p, true);
}

int san_shm_ring_prod_commit_held(struct san_shm_prod *p)
{
	return prod_commit(p, false);
}

int san_shm_ring_prod_wake(struct san_shm_prod *p)
{
	/* (for everything published so far: commit_held's (3)) */
	return p->err ? 0 : peer_wants_bell(p);
}

static int prod_commit(struct san_shm_prod *p, bool look)
{
	uint64_t mask = p->size - 1;
	uint8_t *f = p->data + ((p->prod + p->res_pad) & mask);
	uint32_t cap = p->res_cap, seq_be = htobe32(p->seq);
	int n;

	if (p->err)
		return p->err;
	if (!cap)
		return -EINVAL;
	p->res_cap = 0;
	memcpy(f + offsetof(struct san_wire_hdr, seq), &seq_be, sizeof(seq_be));
	n = (p->unhashed ? san_frame_seal_unhashed : san_frame_seal)(f, cap);
	if (n < 0)
		return -EINVAL;
	if (p->res_pad) {
		struct san_shm_pad pad = { htobe32(SAN_SHM_PAD_MAGIC), seq_be };

		memcpy(p->data + (p->prod & mask), &pad, sizeof(pad));
		if (p->res_rewind) {
			p->skip_from = p->prod;
			p->skip_to = p->prod + p->res_pad;
		}
	}
	p->prod += p->res_pad + (uint64_t)n;
	p->seq++;
	if (p->hold)
		return 0; /* published by san_shm_ring_src_move, with the offer's move */
	/*
	 * (3) then (4) of the doorbell argument in the header. The exchange is the seq_cst store
	 * (on x86 one locked xchg, cheaper than mov + mfence); it is also the release that
	 * publishes the frame bytes above. Its old value is the peer's to scribble: ignored.
	 */
	atomic_exchange_explicit(&p->sh->prod, p->prod, memory_order_seq_cst);
	note_cpu(p);
	return look ? peer_wants_bell(p) : 0;
}

int san_shm_ring_prod_arm(struct san_shm_prod *p, uint32_t msg_len)
{
	uint64_t pad;
	uint32_t flen;
	int err;

	if (p->err)
		return p->err;
	err = san_shm_prod_need(p, msg_len, &pad, &flen);
	if (err)
		return err;
	atomic_exchange_explicit(&p->sh->prod_armed, 1, memory_order_seq_cst);
	err = san_shm_prod_refresh(p);
	if (err)
		return err;
	if (san_shm_prod_room(p) >= pad + flen) {
		san_shm_ring_prod_disarm(p);
		return 1;
	}
	return 0;
}

void san_shm_ring_prod_disarm(struct san_shm_prod *p)
{
	atomic_store_explicit(&p->sh->prod_armed, 0, memory_order_relaxed);
}

int san_shm_ring_prod_released(struct san_shm_prod *p, uint64_t *cons)
{
	int err = p->err ? p->err : san_shm_prod_refresh(p);

	*cons = p->cons;
	return err;
}

int san_shm_ring_prod_arm_cons(struct san_shm_prod *p, uint64_t target)
{
	int err;

	if (p->err)
		return p->err;
	/* The same Dekker pair as san_shm_ring_prod_arm: flag first, then the index. */
	atomic_exchange_explicit(&p->sh->prod_armed, 1, memory_order_seq_cst);
	err = san_shm_prod_refresh(p);
	if (err)
		return err;
	if (p->cons >= target) {
		san_shm_ring_prod_disarm(p);
		return 1;
	}
	return 0;
}

/* ---- consumer ------------------------------------------------------------------------------ */

static int san_shm_cons_fail(struct san_shm_cons *c, const char *why)
{
	c->err = -EPROTO;
	c->why = why;
	c->peek_end = 0;
	return -EPROTO;
}

static uint64_t src_moved_to(struct san_shm_cons *c);

/*
 * Take a fresh look at the producer's index and check the claim. seq_cst: it is the acquire
 * that makes the frame bytes below prod visible, and (2) of the doorbell argument. When
 * nothing new is published, a direct-read offer the producer gave up may have put its bytes
 * into the ring already (MOVED, protocol.md "Direct read on shm"): its src_to is then a claim
 * like prod, readable at once and checked the same way. The slot goes FREE only after prod is
 * published, so prod is loaded again after the slot's word: a move published between the two
 * looks is not missed.
 */
static int san_shm_cons_refresh(struct san_shm_cons *c)
{
	uint64_t pub = atomic_load_explicit(&c->sh->prod, memory_order_seq_cst), p = pub;

	if (pub < c->pub)
		return san_shm_cons_fail(c, "producer index went backwards");
	if (pub <= c->prod) {
		uint64_t to = src_moved_to(c);

		pub = atomic_load_explicit(&c->sh->prod, memory_order_seq_cst);
		if (pub < c->pub)
			return san_shm_cons_fail(c, "producer index went backwards");
		p = pub > to ? pub : to;
		if (p <= c->prod) {
			c->pub = pub;
			return 0;
		}
	}
	if (p - c->cons > c->size)
		return san_shm_cons_fail(c, "producer index claims more than the ring holds");
	if (p % SAN_FRAME_ALIGN)
		return san_shm_cons_fail(c, "producer index not a multiple of 8");
	c->prod = p;
	c->pub = pub;
	return 0;
}

static const char *san_shm_frame_why(int err)
{
	switch (err) {
	case SAN_PROTO_ESEQ:
		return "frame seq is not the expected one";
	case SAN_PROTO_EVERSION:
		return "frame has no valid header";
	case SAN_PROTO_EOVERSIZE:
		return "frame longer than max_msg";
	case SAN_PROTO_ETRUNC:
		return "frame runs past the producer index or the end of the data area";
	case SAN_PROTO_EHASH:
		return "frame hash mismatch";
	default:
		return "frame check failed";
	}
}

int san_shm_ring_cons_peek(struct san_shm_cons *c, struct san_shm_frame *f)
{
	uint64_t mask = c->size - 1, pos = c->rd, avail, off, tail;
	struct san_shm_pad pad;
	size_t flen;
	int err;

	if (c->err)
		return c->err;
	if (c->peek_end)
		goto out;
	if (c->prod == pos) {
		err = san_shm_cons_refresh(c);
		if (err)
			return err;
		if (c->prod == pos)
			return -EAGAIN;
	}
	/*
	 * From here every offset is derived from private values (pos, size) and bounded by
	 * tail = bytes left before the end of the data area; avail (checked at refresh) only
	 * shrinks what may be read.
	 */
	avail = c->prod - pos;
	off = pos & mask;
	tail = c->size - off;
	if (avail < SAN_SHM_PAD_LEN)
		return san_shm_cons_fail(c, "committed bytes end inside a frame");
	memcpy(&pad, c->data + off, sizeof(pad));
	if (pad.magic == htobe32(SAN_SHM_PAD_MAGIC)) {
		if (be32toh(pad.seq) != c->seq)
			return san_shm_cons_fail(c, "PAD seq is not the expected one");
		if (avail <= tail)
			return san_shm_cons_fail(c, "PAD not committed with the frame after it");
		pos += tail;
		avail -= tail;
		off = 0;
		tail = c->size;
	}
	err = (pos < c->hashed_to ? san_frame_check_known
	       : c->unhashed_ok	  ? san_frame_check_unhashed_ok
				  : san_frame_check)(c->data + off, avail < tail ? avail : tail,
						     c->seq, c->max_msg, &flen);
	if (err)
		return san_shm_cons_fail(c, san_shm_frame_why(-err));
	if (pos + flen > c->hashed_to)
		c->hashed_to = pos + flen;
	c->peek_msg = c->data + off;
	c->peek_len = (uint32_t)(flen - SAN_TRAILER_LEN);
	c->peek_end = pos + flen;
out:
	f->msg = c->peek_msg;
	f->len = c->peek_len;
	f->seq = c->seq;
	f->end = c->peek_end;
	return 0;
}

int san_shm_ring_cons_skip(struct san_shm_cons *c)
{
	if (c->err)
		return c->err;
	if (!c->peek_end)
		return -EINVAL;
	/* atomic: a watching wait reads it without the lock (san_rxwatch_ready) */
	__atomic_store_n(&c->rd, c->peek_end, __ATOMIC_RELAXED);
	c->peek_end = 0;
	c->seq++;
	return 0;
}

int san_shm_ring_cons_release(struct san_shm_cons *c, uint64_t end)
{
	if (c->err)
		return c->err;
	if (end < c->cons || end > c->rd)
		return -EINVAL;
	if (end == c->cons)
		return 0;
	c->cons = end;
	/*
	 * The mirror of commit: the exchange is a release (our reads of the freed frames are
	 * done before the producer may overwrite them) and the seq_cst store of the Dekker pair
	 * with san_shm_ring_prod_arm.
	 */
	atomic_exchange_explicit(&c->sh->cons, end, memory_order_seq_cst);
	if (atomic_load_explicit(&c->sh->prod_armed, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&c->sh->prod_armed, 0, memory_order_seq_cst))
		return 1;
	return 0;
}

int san_shm_ring_cons_consume(struct san_shm_cons *c)
{
	int err = san_shm_ring_cons_skip(c);

	if (err)
		return err;
	return san_shm_ring_cons_release(c, c->rd);
}

int san_shm_ring_cons_arm(struct san_shm_cons *c)
{
	int err;

	if (c->err)
		return c->err;
	c->bell_coming = false;
	atomic_exchange_explicit(&c->sh->cons_armed, arm_word(c->rd), memory_order_seq_cst);
	c->armed = true;
	err = san_shm_cons_refresh(c);
	if (err)
		return err;
	/*
	 * Found something (a frame, or an offer made before our flag was up): take the flag
	 * back. A producer that published after the flag went up may have taken it first, and
	 * rings: then the caller must not ring itself as well, or one doorbell would stay on the
	 * socket after the frame is read.
	 */
	if (c->prod != c->rd || san_shm_ring_src_find(c, &(struct san_shm_src){ 0 }) != 0) {
		c->bell_coming = !atomic_exchange_explicit(&c->sh->cons_armed, 0,
							   memory_order_seq_cst);
		c->armed = false;
		c->bells_due += c->bell_coming;
		return 1;
	}
	return 0;
}

void san_shm_ring_cons_unarm(struct san_shm_cons *c)
{
	if (!c->armed || !c->sh)
		return;
	c->armed = false;
	/* 0: a producer took the flag (the one who takes it rings): its doorbell is owed */
	if (atomic_exchange_explicit(&c->sh->cons_armed, 0, memory_order_seq_cst) == 0)
		c->bells_due++;
}

void san_shm_ring_cons_disarm(struct san_shm_cons *c)
{
	c->armed = false;
	atomic_store_explicit(&c->sh->cons_armed, 0, memory_order_relaxed);
}

void san_shm_ring_prod_bell(struct san_shm_prod *p)
{
	/* one writer (this producer, under its connection's lock): no locked add needed */
	uint32_t n = atomic_load_explicit(&p->sh->bells, memory_order_relaxed);

	atomic_store_explicit(&p->sh->bells, n + 1, memory_order_relaxed);
}

void san_shm_ring_cons_bells_drained(struct san_shm_cons *c)
{
	/*
	 * Loaded before the drain's first receive: a doorbell counted after this load is
	 * either taken by the drain or still counted by bells_since; one counted before it
	 * but sent after the drain (at most one: the producer rings under its lock) is the
	 * "give or take one".
	 */
	c->bells_at = atomic_load_explicit(&c->sh->bells, memory_order_seq_cst);
	c->bells_self = 0;
}

uint32_t san_shm_ring_cons_bells_since(const struct san_shm_cons *c)
{
	return atomic_load_explicit(&c->sh->bells, memory_order_relaxed) - c->bells_at +
	       c->bells_self;
}

void san_shm_ring_cons_window(struct san_shm_cons *c, uint32_t bytes)
{
	atomic_store_explicit(&c->sh->cons_window, bytes, memory_order_relaxed);
}

uint32_t san_shm_ring_peer_window(const struct san_shm_prod *p)
{
	/* any value a peer writes only bounds its own stream: no check needed beyond reading */
	return atomic_load_explicit(&p->sh->cons_window, memory_order_relaxed);
}

void san_shm_ring_cons_edges(struct san_shm_cons *c, bool on)
{
	atomic_store_explicit(&c->sh->cons_edges, on ? 1u : 0u, memory_order_relaxed);
}

/*
 * The direct grant slot. The consumer writes the offer's fields, then publishes OFFERED with
 * a release store; the producer claims with a compare-and-swap (acquire) and only then reads
 * the fields, which the consumer no longer touches. The consumer revokes with the opposite
 * compare-and-swap, so exactly one of the two wins. A claim is current only while the
 * producer has committed nothing since the consumer read its cursor: then the consumer, which
 * found the ring empty there, reads our WRITE_DONE next and nothing else. Both sides trust
 * nothing else: the producer writes only its own application's bytes, into the consumer's
 * own memory; the consumer checks the WRITE_DONE against its private record of the offer.
 */
static inline uint64_t direct_word(uint32_t id, uint32_t state)
{
	return (uint64_t)id << 32 | state;
}

int san_shm_ring_direct_offer(struct san_shm_cons *c, uint32_t id, uint64_t addr, uint64_t len)
{
	struct san_shm_ring_shared *sh = c->sh;

	if ((uint32_t)atomic_load_explicit(&sh->direct, memory_order_acquire) !=
	    SAN_SHM_DIRECT_FREE)
		return -EBUSY;
	sh->direct_at = c->rd;
	sh->direct_addr = addr;
	sh->direct_len = len;
	atomic_store_explicit(&sh->direct, direct_word(id, SAN_SHM_DIRECT_OFFERED),
			      memory_order_seq_cst);
	return 0;
}

bool san_shm_ring_direct_revoke(struct san_shm_cons *c)
{
	uint64_t w = atomic_load_explicit(&c->sh->direct, memory_order_seq_cst);

	while ((uint32_t)w == SAN_SHM_DIRECT_OFFERED)
		if (atomic_compare_exchange_weak_explicit(&c->sh->direct, &w, SAN_SHM_DIRECT_FREE,
							  memory_order_seq_cst,
							  memory_order_seq_cst))
			return true;
	if ((uint32_t)w == SAN_SHM_DIRECT_CLAIMED)
		return false;
	/* FREE, or garbage a peer wrote into the word: nothing was claimed. */
	atomic_store_explicit(&c->sh->direct, SAN_SHM_DIRECT_FREE, memory_order_relaxed);
	return true;
}

void san_shm_ring_direct_done(struct san_shm_cons *c)
{
	atomic_store_explicit(&c->sh->direct, SAN_SHM_DIRECT_FREE, memory_order_release);
}

int san_shm_ring_direct_claim(struct san_shm_prod *p, struct san_shm_direct *d)
{
	struct san_shm_ring_shared *sh = p->sh;
	uint64_t w = atomic_load_explicit(&sh->direct, memory_order_acquire);

	if (p->err || (uint32_t)w != SAN_SHM_DIRECT_OFFERED)
		return 0;
	/*
	 * The acquire above makes the fields of offer w visible. They are that offer's only if
	 * the claim below succeeds on the same word (same id): a revoke and a new offer change
	 * the id, and the consumer does not touch the fields once we hold the claim.
	 */
	d->id = (uint32_t)(w >> 32);
	d->addr = sh->direct_addr;
	d->len = sh->direct_len;
	if (sh->direct_at != p->prod || !d->len)
		return 0; /* we committed since it looked (its doorbell is on its way), or empty */
	return atomic_compare_exchange_strong_explicit(&sh->direct, &w,
						       direct_word(d->id, SAN_SHM_DIRECT_CLAIMED),
						       memory_order_seq_cst, memory_order_seq_cst);
}

/*
 * The direct read slot: the direct grant's mirror (same word discipline, roles swapped). The
 * producer writes the offer's fields, then publishes OFFERED (seq_cst: with the load of
 * cons_armed after it, the Dekker pattern of commit: a consumer that arms after our store sees
 * the offer in san_shm_ring_cons_arm, one that armed before is rung). The consumer reads the
 * fields (they are the offer's only if the word is unchanged after: src_find) and claims with
 * a compare-and-swap; the producer revokes (or moves: MOVED) with the opposite
 * compare-and-swap, so exactly one wins. A claim is current only at the read cursor the offer
 * names (nothing committed before it is unread, and while its offer is out the producer
 * publishes no data: the frames of a move are committed held, invisible unless the move
 * wins), so the claimed bytes are the next bytes of the stream.
 */
static inline uint64_t src_word(uint32_t id, uint32_t state)
{
	return (uint64_t)id << 32 | state;
}

bool san_shm_ring_cons_waiting(const struct san_shm_prod *p)
{
	return atomic_load_explicit(&p->sh->cons_armed, memory_order_relaxed) != 0;
}

int san_shm_ring_src_offer(struct san_shm_prod *p, uint32_t id, uint64_t addr, uint64_t len)
{
	struct san_shm_ring_shared *sh = p->sh;

	if (p->err)
		return p->err;
	if (atomic_load_explicit(&sh->src, memory_order_acquire) != SAN_SHM_SRC_FREE)
		return -EBUSY;
	/*
	 * The fields change only after the word left every state a reader may still hold (it
	 * is FREE now). The release fence orders that change before our field stores: a reader
	 * that reads one of them (relaxed) and then, after its acquire fence, the word again
	 * sees the word changed (fence to fence), so it never takes our fields for an older
	 * word's (the seqlock argument, in the C11 model rather than only under x86's TSO).
	 */
	atomic_thread_fence(memory_order_release);
	__atomic_store_n(&sh->src_at, p->prod, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->src_addr, addr, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->src_len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->src_got, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&sh->src, src_word(id, SAN_SHM_SRC_OFFERED), memory_order_seq_cst);
	/* the offer stands at prod: a consumer asleep there has not seen it */
	if (take_armed(sh, p->prod, true))
		return 1;
	return 0;
}

int san_shm_ring_src_settle(struct san_shm_prod *p, uint32_t id, uint64_t len, bool give_up,
			    uint64_t *got)
{
	struct san_shm_ring_shared *sh = p->sh;
	uint64_t w = atomic_load_explicit(&sh->src, memory_order_acquire);
	uint32_t st;

	for (;;) {
		st = (uint32_t)w;
		if (st == SAN_SHM_SRC_OFFERED && (uint32_t)(w >> 32) == id && give_up) {
			if (atomic_compare_exchange_weak_explicit(&sh->src, &w, SAN_SHM_SRC_FREE,
								  memory_order_seq_cst,
								  memory_order_acquire))
				return SAN_SHM_SRC_FREE;
			continue; /* claimed meanwhile (or spurious failure): look again */
		}
		break;
	}
	if ((uint32_t)(w >> 32) != id || st > SAN_SHM_SRC_FAILED || st == SAN_SHM_SRC_FREE) {
		/* not our offer's word: only the consumer can have written that */
		atomic_store_explicit(&sh->src, SAN_SHM_SRC_FREE, memory_order_relaxed);
		return -EPROTO;
	}
	if (st == SAN_SHM_SRC_OFFERED || st == SAN_SHM_SRC_CLAIMED)
		return (int)st;
	*got = sh->src_got; /* written before the report; acquire above */
	atomic_store_explicit(&sh->src, SAN_SHM_SRC_FREE, memory_order_relaxed);
	if (*got > len || (st == SAN_SHM_SRC_DONE && *got == 0))
		return -EPROTO;
	return (int)st;
}

/*
 * The slot says MOVED with src_at where our index stands: the src_to it names (unchecked: the
 * caller checks it as a producer index), else 0. The fields belong to word w only if the word
 * is still w after we read them (each read once: the peer may rewrite them meanwhile).
 */
static uint64_t src_moved_to(struct san_shm_cons *c)
{
	struct san_shm_ring_shared *sh = c->sh;
	uint64_t w = atomic_load_explicit(&sh->src, memory_order_seq_cst), at, to;

	if ((uint32_t)w != SAN_SHM_SRC_MOVED)
		return 0;
	at = __atomic_load_n(&sh->src_at, __ATOMIC_RELAXED);
	to = __atomic_load_n(&sh->src_to, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_acquire); /* pairs with the writer's release fence */
	if (atomic_load_explicit(&sh->src, memory_order_relaxed) != w || at != c->prod ||
	    to <= c->prod)
		return 0;
	return to;
}

/*
 * With the ring empty at rd, and no offer there: did frames come after all (an offer moved
 * into the ring, or frames published since the caller looked)? 2 if so, or if the ring broke
 * (the caller's peek says so); else 0.
 */
static int src_moved(struct san_shm_cons *c)
{
	if (c->prod != c->rd)
		return 0;
	if (san_shm_cons_refresh(c) < 0 || c->prod != c->rd)
		return 2;
	return 0;
}

int san_shm_ring_src_find(struct san_shm_cons *c, struct san_shm_src *o)
{
	struct san_shm_ring_shared *sh = c->sh;
	uint64_t w = atomic_load_explicit(&sh->src, memory_order_seq_cst), at;

	if (c->err)
		return 0;
	if ((uint32_t)w != SAN_SHM_SRC_OFFERED)
		return src_moved(c);
	o->id = (uint32_t)(w >> 32);
	o->addr = __atomic_load_n(&sh->src_addr, __ATOMIC_RELAXED);
	o->len = __atomic_load_n(&sh->src_len, __ATOMIC_RELAXED);
	at = __atomic_load_n(&sh->src_at, __ATOMIC_RELAXED);
	/*
	 * The fields belong to offer w only if the word is still w after we read them (the
	 * acquire fence pairs with the release fence before the writer's field stores).
	 */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&sh->src, memory_order_relaxed) != w)
		return src_moved(c);
	if (at != c->rd || !o->len)
		return 0;
	return 1;
}

void san_shm_ring_prod_hold(struct san_shm_prod *p)
{
	p->hold = true;
	p->hold_prod = p->prod;
	p->hold_seq = p->seq;
	p->hold_look = p->rewind_look;
	p->hold_missed = p->rewind_missed;
	p->hold_skip_from = p->skip_from;
	p->hold_skip_to = p->skip_to;
}

void san_shm_ring_prod_unhold(struct san_shm_prod *p)
{
	if (!p->hold)
		return;
	/* the held frames were never visible: drop them */
	p->hold = false;
	p->prod = p->hold_prod;
	p->seq = p->hold_seq;
	p->res_cap = 0;
	/* (a rewind among them never happened either) */
	p->rewind_look = p->hold_look;
	p->rewind_missed = p->hold_missed;
	p->skip_from = p->hold_skip_from;
	p->skip_to = p->hold_skip_to;
	/*
	 * A refresh while we held accepted a consumer index up to the held prod; a consumer
	 * that released frames it could never see (nothing was published, the slot never said
	 * MOVED) broke the ring, and cons may not stay beyond prod.
	 */
	if (p->cons > p->hold_prod && !p->err)
		(void)san_shm_prod_fail(p, "consumer index passed the producer index");
}

int san_shm_ring_src_move(struct san_shm_prod *p, uint32_t id)
{
	struct san_shm_ring_shared *sh = p->sh;
	uint64_t w = src_word(id, SAN_SHM_SRC_OFFERED);
	uint64_t to0;

	if (!p->hold)
		return -EBUSY;
	if (p->err || p->prod == p->hold_prod) {
		san_shm_ring_prod_unhold(p); /* nothing to move */
		return -EBUSY;
	}
	to0 = __atomic_load_n(&sh->src_to, __ATOMIC_RELAXED);
	/* as in the offer: the word left the last MOVED (FREE) before src_to changes */
	atomic_thread_fence(memory_order_release);
	__atomic_store_n(&sh->src_to, p->prod, __ATOMIC_RELAXED);
	/* seq_cst: also the release of the frames and of src_to, as a commit's store of prod */
	if (!atomic_compare_exchange_strong_explicit(&sh->src, &w, src_word(id, SAN_SHM_SRC_MOVED),
						     memory_order_seq_cst, memory_order_seq_cst)) {
		/* claimed first: as if we had never tried (src_to means nothing unless MOVED) */
		__atomic_store_n(&sh->src_to, to0, __ATOMIC_RELAXED); /* (its old value) */
		san_shm_ring_prod_unhold(p);
		return -EBUSY;
	}
	p->hold = false;
	return 0;
}

int san_shm_ring_src_publish(struct san_shm_prod *p)
{
	struct san_shm_ring_shared *sh = p->sh;

	atomic_exchange_explicit(&sh->prod, p->prod, memory_order_seq_cst);
	atomic_store_explicit(&sh->src, SAN_SHM_SRC_FREE, memory_order_release);
	return peer_wants_bell(p);
}

bool san_shm_ring_src_still(struct san_shm_cons *c, const struct san_shm_src *o)
{
	return atomic_load_explicit(&c->sh->src, memory_order_seq_cst) ==
	       src_word(o->id, SAN_SHM_SRC_OFFERED);
}

bool san_shm_ring_src_claim(struct san_shm_cons *c, const struct san_shm_src *o)
{
	uint64_t w = src_word(o->id, SAN_SHM_SRC_OFFERED);

	return atomic_compare_exchange_strong_explicit(&c->sh->src, &w,
						       src_word(o->id, SAN_SHM_SRC_CLAIMED),
						       memory_order_seq_cst, memory_order_seq_cst);
}

void san_shm_ring_src_report(struct san_shm_cons *c, const struct san_shm_src *o, bool ok,
			     uint64_t got)
{
	c->sh->src_got = got;
	atomic_store_explicit(&c->sh->src,
			      src_word(o->id, ok ? SAN_SHM_SRC_DONE : SAN_SHM_SRC_FAILED),
			      memory_order_release);
}
