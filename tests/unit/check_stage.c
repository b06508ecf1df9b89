/* tests/unit: core/san_stage — the staging area's free/used bookkeeping, scripted and random. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_stage.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_rand.h"

/* Check's ck_assert_* report every passing check to the runner: these call it only on failure. */
#define REQUIRE_MSG(x, ...)                        \
	do {                                       \
		if (!(x))                          \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)
#define REQUIRE(x) REQUIRE_MSG(x, "Assertion '%s' failed", #x)

/* ---- empty area -------------------------------------------------------------------------- */

static const struct {
	uint64_t size, want, min;
	/* expected room; its offset is always 0 when it is > 0 */
	uint64_t len;
	/* clang-format off */
} empty_rows[] = {
	/* size, want, min, expected room */
	{ 100, 1, 1, 1 },
	{ 100, 50, 1, 50 },
	{ 100, 100, 1, 100 },
	{ 100, 101, 1, 100 },
	{ 100, 1000, 100, 100 },
	{ 100, UINT64_MAX, 1, 100 },
	{ 100, UINT64_MAX, 0, 100 },
	{ 100, 50, 0, 50 },
	{ 100, 50, 50, 50 },
	{ 100, 50, 80, 50 },          /* want < min: want is enough */
	{ 100, 50, UINT64_MAX, 50 },
	{ 100, 150, 101, 0 },         /* at least 101 bytes asked of a 100-byte area */
	{ 100, UINT64_MAX, UINT64_MAX, 0 },
	{ 100, 0, 0, 0 },             /* want 0: nothing */
	{ 100, 0, 1, 0 },
	{ 100, 0, UINT64_MAX, 0 },
	{ 1, 1, 1, 1 },
	{ 1, 5, 1, 1 },
	{ 1, 5, 2, 0 },
	{ 0, 1, 1, 0 },               /* no area */
	{ 0, 100, 0, 0 },
	{ 0, UINT64_MAX, 1, 0 },
	{ 1ull << 40, 1ull << 20, 1, 1ull << 20 },
	{ 1ull << 40, UINT64_MAX, 1ull << 40, 1ull << 40 },
};
/* clang-format on */

START_TEST(test_empty)
{
	struct san_stage st;
	uint64_t off = 12345, got;

	san_stage_init(&st, empty_rows[_i].size);
	ck_assert(san_stage_idle(&st));
	ck_assert_uint_eq(san_stage_oldest(&st), 0);
	got = san_stage_room(&st, empty_rows[_i].want, empty_rows[_i].min, &off);
	ck_assert_msg(got == empty_rows[_i].len,
		      "size %" PRIu64 " want %" PRIu64 " min %" PRIu64 ": room %" PRIu64
		      ", expected %" PRIu64,
		      empty_rows[_i].size, empty_rows[_i].want, empty_rows[_i].min, got,
		      empty_rows[_i].len);
	if (got)
		ck_assert_uint_eq(off, 0);
	/* room claims nothing */
	ck_assert(san_stage_idle(&st));
	ck_assert_uint_eq(san_stage_room(&st, empty_rows[_i].want, empty_rows[_i].min, &off), got);
}
END_TEST

/* ---- scripted scenarios ------------------------------------------------------------------ */

enum { END, ROOM, PUSH, REL };

struct step {
	int op;
	uint64_t a, b; /* ROOM: want, min; PUSH: len, ring_end; REL: cons */
	uint64_t exp;  /* ROOM: room; REL: san_stage_oldest after */
	uint64_t off;  /* ROOM: offset when exp > 0 */
};

/* clang-format off */
#define R(want, min, len, off) { ROOM, want, min, len, off }
#define P(len, ring_end) { PUSH, len, ring_end, 0, 0 }
#define L(cons, oldest) { REL, cons, 0, oldest, 0 }
/* clang-format on */

static const struct {
	const char *what;
	uint64_t size;
	struct step s[40];
	/* clang-format off */
} scripts[] = {
	{ "fill, full, release exactly the first", 100, {
		R(25, 1, 25, 0), P(25, 10),
		R(25, 1, 25, 25), P(25, 20),
		R(25, 1, 25, 50), P(25, 30),
		R(100, 1, 25, 75), P(25, 40),
		R(1, 1, 0, 0), R(100, 0, 0, 0), R(100, 1, 0, 0),
		L(0, 10), L(9, 10), /* below the first ring_end: nothing freed */
		R(1, 1, 0, 0),
		L(10, 20),          /* exactly the first: only it */
		R(100, 1, 25, 0), R(26, 26, 0, 0), R(10, 1, 10, 0),
		L(19, 20), R(100, 1, 25, 0),
		L(20, 30), R(100, 1, 50, 0), R(100, 50, 50, 0), R(100, 51, 0, 0),
		P(10, 50), R(100, 1, 40, 10),
		L(40, 50), R(100, 1, 90, 10), /* region at [0,10) still live */
		L(50, 0),  R(100, 1, 100, 0), /* everything free: reset */
	} },
	{ "uneven fill: short tail skipped, freed with its region", 100, {
		R(30, 1, 30, 0), P(30, 1),
		R(30, 1, 30, 30), P(30, 2),
		R(30, 1, 30, 60), P(30, 3),
		R(20, 20, 0, 0),   /* tail 10 < min 20 and nothing free at 0 */
		R(20, 11, 0, 0),
		R(20, 10, 10, 90), /* tail 10 >= min: used */
		L(1, 2),
		R(20, 20, 20, 0),  /* tail skipped: [0,30) free */
		R(40, 11, 30, 0),
		R(40, 10, 10, 90), /* tail is still enough for min 10 */
		R(20, 20, 20, 0), P(20, 4),
		R(100, 1, 10, 20), /* [20,30) free, [90,100) held as skipped tail */
		L(2, 3),
		R(100, 1, 40, 20), /* [20,60) */
		L(3, 4),
		R(100, 1, 70, 20), /* [20,90): the tail [90,100) goes with region 4 */
		R(71, 71, 0, 0),
		L(4, 0), R(100, 1, 100, 0), R(100, 100, 100, 0),
	} },
	{ "tail used when it is >= min: region ends at the area end", 100, {
		R(70, 1, 70, 0), P(70, 5),
		R(50, 30, 30, 70), P(30, 6),   /* [70,100) */
		R(1, 1, 0, 0),
		L(5, 6),
		R(100, 1, 70, 0),              /* wrapped back to 0 */
		R(100, 70, 70, 0), R(100, 71, 0, 0),
		P(70, 7), R(1, 1, 0, 0),
		L(6, 7), R(100, 1, 30, 70), P(30, 8),
		L(7, 8), R(100, 1, 70, 0),
		L(8, 0), R(100, 1, 100, 0),
	} },
	{ "tail skip with partial push; skipped tail not freed with the previous region", 10, {
		R(6, 1, 6, 0), P(6, 1),      /* A [0,6) */
		R(3, 1, 3, 6), P(3, 2),      /* B [6,9): tail of 1 left */
		L(1, 2),
		R(5, 2, 5, 0), P(5, 3),      /* C: skips [9,10), takes [0,5) */
		R(10, 1, 1, 5),              /* only [5,6) free */
		L(2, 3),                     /* B freed; [9,10) still held for C */
		R(10, 1, 4, 5), R(10, 5, 0, 0), R(4, 5, 4, 5),
		P(4, 4),                     /* D [5,9): full again */
		R(1, 1, 0, 0),
		L(3, 4),                     /* C freed, and [9,10) with it */
		R(10, 2, 5, 0),
		R(10, 6, 0, 0),
		R(10, 1, 1, 9),
		P(1, 5),                     /* E [9,10) */
		R(10, 1, 5, 0),
		L(5, 0), R(10, 1, 10, 0),
	} },
	{ "min semantics", 100, {
		R(60, 1, 60, 0), P(60, 1),
		R(50, 50, 0, 0),   /* 40 contiguous < min 50 < want */
		R(50, 41, 0, 0),
		R(50, 40, 40, 60),
		R(41, 41, 0, 0),
		R(30, 50, 30, 60), /* want < min: want is enough */
		R(40, 100, 40, 60),
		R(41, 100, 0, 0),
		R(50, 0, 40, 60),
		R(40, 40, 40, 60), P(40, 2),
		R(1, 0, 0, 0), R(1, 1, 0, 0), R(0, 0, 0, 0),
		L(1, 2),
		R(61, 1, 60, 0), R(61, 61, 0, 0), R(60, 61, 60, 0),
		L(2, 0),
	} },
	{ "oldest follows the FIFO; release with cons far ahead frees all", 50, {
		L(0, 0), L(1000, 0),
		R(10, 1, 10, 0), P(10, 7),
		L(6, 7),
		R(10, 1, 10, 10), P(10, 8),
		R(10, 1, 10, 20), P(10, 100),
		L(7, 8), L(8, 100), L(99, 100),
		R(10, 1, 10, 30), P(10, 101),
		L(UINT64_MAX, 0),
		R(50, 1, 50, 0), R(50, 50, 50, 0), R(51, 51, 0, 0),
	} },
	{ "one-byte area", 1, {
		R(1, 1, 1, 0), P(1, 1), R(1, 1, 0, 0), R(1, 0, 0, 0),
		L(0, 1), L(1, 0),
		R(2, 1, 1, 0), P(1, 2), L(2, 0),
		R(1, 1, 1, 0),
	} },
	{ "huge want and min, full area: nothing (tail + min must not wrap)", 1, {
		R(1, 1, 1, 0), P(1, 1),
		R(UINT64_MAX, UINT64_MAX, 0, 0),
		R(UINT64_MAX, 2, 0, 0),
		L(1, 0), R(UINT64_MAX, UINT64_MAX, 0, 0), R(UINT64_MAX, 1, 1, 0),
	} },
	{ "huge want and min, wrapped area: nothing (tail + min must not wrap)", 100, {
		R(50, 1, 50, 0), P(50, 1),
		R(40, 1, 40, 50), P(40, 2),
		L(1, 2),
		R(20, 20, 20, 0), P(20, 3),  /* skips [90,100): free [20,50), tail 80 */
		R(UINT64_MAX - 50, UINT64_MAX - 50, 0, 0),
		R(UINT64_MAX, UINT64_MAX - 50, 0, 0),
		R(UINT64_MAX, UINT64_MAX, 0, 0),
		R(UINT64_MAX, 31, 0, 0),
		R(UINT64_MAX, 30, 30, 20),
	} },
	{ "no area", 0, {
		R(1, 0, 0, 0), R(1, 1, 0, 0), L(5, 0), R(1, 1, 0, 0),
	} },
};
/* clang-format on */

START_TEST(test_script)
{
	struct san_stage st;
	uint64_t off = 0, last_off = 0, got;
	unsigned int k;

	san_stage_init(&st, scripts[_i].size);
	for (k = 0; k < 40 && scripts[_i].s[k].op != END; k++) {
		const struct step *s = &scripts[_i].s[k];

		switch (s->op) {
		case ROOM:
			off = UINT64_MAX;
			got = san_stage_room(&st, s->a, s->b, &off);
			ck_assert_msg(got == s->exp,
				      "%s, step %u: room(%" PRIu64 ", %" PRIu64 ") = %" PRIu64
				      ", expected %" PRIu64,
				      scripts[_i].what, k, s->a, s->b, got, s->exp);
			if (got) {
				ck_assert_msg(off == s->off,
					      "%s, step %u: room(%" PRIu64 ", %" PRIu64
					      ") at %" PRIu64 ", expected %" PRIu64,
					      scripts[_i].what, k, s->a, s->b, off, s->off);
				last_off = off;
			}
			break;
		case PUSH:
			san_stage_push(&st, last_off, s->a, s->b);
			ck_assert(!san_stage_idle(&st));
			break;
		case REL:
			san_stage_release(&st, s->a);
			ck_assert_msg(san_stage_oldest(&st) == s->exp,
				      "%s, step %u: release(%" PRIu64 "): oldest %" PRIu64
				      ", expected %" PRIu64,
				      scripts[_i].what, k, s->a, san_stage_oldest(&st), s->exp);
			ck_assert(san_stage_idle(&st) == (s->exp == 0));
			break;
		}
	}
}
END_TEST

/* ---- record table limit ------------------------------------------------------------------ */

START_TEST(test_record_limit)
{
	enum { ROUNDS = 20 * SAN_STAGE_RECS };
	static uint64_t fifo[SAN_STAGE_RECS + 1 + ROUNDS]; /* ring_end of every push, in order */
	unsigned int head = 0, tail = 0, i;
	struct san_stage st;
	uint64_t off, got;

	san_stage_init(&st, 1000);
	for (i = 0; i < SAN_STAGE_RECS; i++) {
		got = san_stage_room(&st, 1, 1, &off);
		ck_assert_uint_eq(got, 1);
		ck_assert_uint_eq(off, i);
		fifo[tail++] = 100 + i;
		san_stage_push(&st, off, 1, 100 + i);
	}
	/* 1000 - 64 bytes free, but no record to remember another region */
	ck_assert_uint_eq(san_stage_room(&st, 1, 1, &off), 0);
	ck_assert_uint_eq(san_stage_room(&st, 500, 0, &off), 0);
	ck_assert_uint_eq(san_stage_oldest(&st), 100);

	san_stage_release(&st, 100);
	head++;
	ck_assert_uint_eq(san_stage_oldest(&st), 101);
	got = san_stage_room(&st, 2000, 1, &off);
	ck_assert_uint_eq(got, 1000 - SAN_STAGE_RECS);
	ck_assert_uint_eq(off, SAN_STAGE_RECS);
	fifo[tail++] = 1000;
	san_stage_push(&st, off, 10, 1000);
	ck_assert_uint_eq(san_stage_room(&st, 1, 1, &off), 0);

	/* the table is circular, so is the area: wrap both, one region out, one in */
	for (i = 0; i < ROUNDS; i++) {
		ck_assert_uint_eq(san_stage_oldest(&st), fifo[head]);
		san_stage_release(&st, fifo[head] - 1);
		ck_assert_uint_eq(san_stage_oldest(&st), fifo[head]);
		ck_assert_uint_eq(san_stage_room(&st, 1, 1, &off), 0);
		san_stage_release(&st, fifo[head]);
		head++;
		ck_assert_uint_eq(san_stage_oldest(&st), fifo[head]);
		got = san_stage_room(&st, 1, 1, &off);
		ck_assert_uint_eq(got, 1);
		fifo[tail++] = 1001 + i;
		san_stage_push(&st, off, 1, 1001 + i);
		ck_assert_uint_eq(san_stage_room(&st, 1, 1, &off), 0);
	}
	san_stage_release(&st, UINT64_MAX);
	ck_assert(san_stage_idle(&st));
	ck_assert_uint_eq(san_stage_room(&st, 1000, 1000, &off), 1000);
	ck_assert_uint_eq(off, 0);
}
END_TEST

/* ---- reset after everything is released ------------------------------------------------- */

START_TEST(test_reset)
{
	static const uint64_t lens[] = { 1, 7, 33, 99, 100 };
	struct san_stage st;
	uint64_t off, got;
	unsigned int i, j;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		san_stage_init(&st, 100);
		/* leave the write position somewhere in the middle, several times over */
		for (j = 1; j <= 3; j++) {
			got = san_stage_room(&st, lens[i], 1, &off);
			ck_assert_uint_eq(got, lens[i]);
			ck_assert_uint_eq(off, 0);
			san_stage_push(&st, off, lens[i], j);
			san_stage_release(&st, j);
			ck_assert(san_stage_idle(&st));
			/* a region as large as the area fits at once: nothing is left skipped */
			got = san_stage_room(&st, 100, 100, &off);
			ck_assert_uint_eq(got, 100);
			ck_assert_uint_eq(off, 0);
		}
	}
}
END_TEST

/* ---- random model ------------------------------------------------------------------------ */

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi) /* lo .. hi inclusive */
{
	return lo + unit_rand(s) % (hi - lo + 1);
}

#define MODEL_MAX_SIZE 1024
#define MODEL_STEPS 100000

struct mregion {
	uint64_t off, len; /* the region, [off, off + len) */
	uint64_t skip_off; /* tail skipped for it, [skip_off, size); skip_off == size: none */
	uint64_t ring_end;
	unsigned int id;
};

struct model {
	uint64_t size;
	unsigned int owner[MODEL_MAX_SIZE]; /* id of the region holding each byte, 0: free */
	struct mregion live[SAN_STAGE_RECS + 1];
	unsigned int n; /* live regions, oldest first */
	uint64_t wpos;	/* offset just past the newest region (0 when there is none) */
	uint64_t bytes; /* region bytes held (skipped tails excluded) */
	uint64_t held;	/* bytes held, skipped tails included */
};

/* Free bytes from off on, up to the area end or the first held byte. */
static uint64_t model_run(const struct model *m, uint64_t off)
{
	uint64_t i;

	for (i = off; i < m->size && !m->owner[i]; i++)
		;
	return i - off;
}

/*
 * The documented policy, computed from the byte map: the next region starts where the newest
 * ended, or at 0 if the tail there is shorter than min(want, min) (the tail is then skipped,
 * which needs it free); it is contiguous, at least min(want, min) and at most want bytes.
 */
static uint64_t model_room(const struct model *m, uint64_t want, uint64_t min, uint64_t *off)
{
	uint64_t need = want < min ? want : min, tail, run, avail;

	if (!m->size || !want || m->n == SAN_STAGE_RECS)
		return 0;
	tail = m->size - m->wpos;
	run = model_run(m, m->wpos);
	if (tail >= need) {
		*off = m->wpos;
		avail = run;
	} else {
		if (run < tail) /* the oldest region sits in the tail: offset 0 is held */
			return 0;
		*off = 0;
		avail = model_run(m, 0);
	}
	if (avail < need)
		return 0;
	return avail < want ? avail : want;
}

static void model_check_empty_room(const struct san_stage *st, const struct model *m,
				   unsigned long step)
{
	uint64_t off = UINT64_MAX, got;

	if (m->n || !m->size)
		return;
	REQUIRE_MSG(san_stage_idle(st), "step %lu: model empty, stage not idle", step);
	REQUIRE_MSG(m->held == 0, "step %lu: model empty, %" PRIu64 " bytes held", step, m->held);
	got = san_stage_room(st, m->size, 1, &off);
	REQUIRE_MSG(got == m->size && off == 0,
		    "step %lu: empty area of %" PRIu64 ": room %" PRIu64 " at %" PRIu64, step,
		    m->size, got, off);
}

static const struct {
	uint64_t size, seed;
} model_rows[] = {
	{ 1, 1 }, { 2, 2 }, { 3, 3 }, { 10, 4 }, { 64, 5 }, { 100, 6 }, { 257, 7 }, { 1024, 8 },
};

START_TEST(test_model)
{
	static struct model m; /* too large for a comfortable stack frame */
	struct san_stage st;
	uint64_t seed = model_rows[_i].seed * 0x1234567ull, ring = 0;
	unsigned int next_id = 1, i;
	unsigned long step, pushes = 0, skips = 0, frees = 0, limits = 0, zero_rooms = 0;
	int push_pct = 70;
	bool tiny = false;

	memset(&m, 0, sizeof(m));
	m.size = model_rows[_i].size;
	san_stage_init(&st, m.size);
	model_check_empty_room(&st, &m, 0);

	for (step = 1; step <= MODEL_STEPS; step++) {
		if (step % 1000 == 0) { /* phases: mostly filling or mostly draining, 1-byte runs */
			push_pct = (int)rng_range(&seed, 20, 95);
			tiny = rng_range(&seed, 0, 3) == 0;
		}

		if ((int)rng_range(&seed, 0, 99) < push_pct) {
			uint64_t want, min, got, exp, off = UINT64_MAX, eoff = UINT64_MAX, len, b;
			struct mregion *r;

			switch (rng_range(&seed, 0, 9)) {
			case 0:
				want = UINT64_MAX;
				break;
			case 1:
				want = rng_range(&seed, 1, 3);
				break;
			default:
				want = rng_range(&seed, 0, m.size + 2);
				break;
			}
			switch (rng_range(&seed, 0, 9)) {
			case 0:
				min = UINT64_MAX;
				break;
			case 1:
				min = 0;
				break;
			case 2:
				min = 1;
				break;
			default:
				min = rng_range(&seed, 0, m.size + 2);
				break;
			}
			got = san_stage_room(&st, want, min, &off);
			exp = model_room(&m, want, min, &eoff);
			REQUIRE_MSG(got == exp && (!got || off == eoff),
				    "size %" PRIu64 " step %lu: room(%" PRIu64 ", %" PRIu64
				    ") = %" PRIu64 " at %" PRIu64 ", model %" PRIu64 " at %" PRIu64
				    " (live %u, wpos %" PRIu64 ", held %" PRIu64 ")",
				    m.size, step, want, min, got, off, exp, eoff, m.n, m.wpos,
				    m.held);
			if (!got) {
				zero_rooms++;
				if (m.n == SAN_STAGE_RECS)
					limits++;
				continue;
			}
			/* the properties, whatever the model's policy */
			REQUIRE_MSG(got <= want, "step %lu: room %" PRIu64 " > want", step, got);
			REQUIRE_MSG(got >= (want < min ? want : min),
				    "step %lu: room %" PRIu64 " < min", step, got);
			REQUIRE_MSG(off < m.size && got <= m.size - off,
				    "step %lu: [%" PRIu64 ", +%" PRIu64 ") outside the area", step,
				    off, got);
			for (b = off; b < off + got; b++)
				REQUIRE_MSG(!m.owner[b],
					    "step %lu: [%" PRIu64 ", +%" PRIu64
					    ") overlaps live region %u at byte %" PRIu64,
					    step, off, got, m.owner[b], b);

			switch (tiny ? 1 : rng_range(&seed, 0, 3)) {
			case 0:
				len = got;
				break;
			case 1:
				len = 1;
				break;
			default:
				len = rng_range(&seed, 1, got);
				break;
			}
			ring += rng_range(&seed, 1, 3);
			san_stage_push(&st, off, len, ring);
			pushes++;

			r = &m.live[m.n++];
			*r = (struct mregion){ .off = off,
					       .len = len,
					       .skip_off = m.size,
					       .ring_end = ring,
					       .id = next_id++ };
			if (!next_id)
				next_id = 1;
			if (off != m.wpos) {
				REQUIRE_MSG(off == 0,
					    "step %lu: region at %" PRIu64
					    ", write position %" PRIu64,
					    step, off, m.wpos);
				r->skip_off = m.wpos;
				for (b = m.wpos; b < m.size; b++)
					m.owner[b] = r->id;
				m.held += m.size - m.wpos;
				skips++;
			}
			for (b = off; b < off + len; b++)
				m.owner[b] = r->id;
			m.bytes += len;
			m.held += len;
			m.wpos = (off + len) % m.size;
			REQUIRE_MSG(m.bytes <= m.size && m.held <= m.size,
				    "step %lu: %" PRIu64 " region bytes, %" PRIu64
				    " held, in an area of %" PRIu64,
				    step, m.bytes, m.held, m.size);
			REQUIRE_MSG(san_stage_oldest(&st) == m.live[0].ring_end,
				    "step %lu: oldest %" PRIu64 ", model %" PRIu64, step,
				    san_stage_oldest(&st), m.live[0].ring_end);
		} else {
			uint64_t cons, b;
			unsigned int k = 0;

			if (!m.n) {
				/* nothing to free: a stray release must not disturb anything */
				san_stage_release(&st, rng_range(&seed, 0, ring + 1));
				model_check_empty_room(&st, &m, step);
				continue;
			}
			/* half the time just around the oldest, so that the table fills up too */
			if (rng_range(&seed, 0, 1))
				cons = rng_range(&seed, m.live[0].ring_end - 1, m.live[0].ring_end);
			else
				cons = rng_range(&seed, m.live[0].ring_end - 1,
						 m.live[m.n - 1].ring_end);
			san_stage_release(&st, cons);
			while (k < m.n && m.live[k].ring_end <= cons) {
				struct mregion *r = &m.live[k++];

				for (b = r->off; b < r->off + r->len; b++)
					m.owner[b] = 0;
				m.bytes -= r->len;
				m.held -= r->len;
				if (r->skip_off < m.size) {
					for (b = r->skip_off; b < m.size; b++)
						m.owner[b] = 0;
					m.held -= m.size - r->skip_off;
				}
				frees++;
			}
			memmove(m.live, m.live + k, (m.n - k) * sizeof(m.live[0]));
			m.n -= k;
			if (!m.n) {
				m.wpos = 0;
				REQUIRE_MSG(m.held == 0 && m.bytes == 0,
					    "step %lu: model leaked %" PRIu64 " bytes", step,
					    m.held);
			}
			REQUIRE_MSG(san_stage_idle(&st) == !m.n, "step %lu: idle %d, %u live", step,
				    san_stage_idle(&st), m.n);
			REQUIRE_MSG(san_stage_oldest(&st) == (m.n ? m.live[0].ring_end : 0),
				    "step %lu: release(%" PRIu64 "): oldest %" PRIu64
				    ", model %" PRIu64,
				    step, cons, san_stage_oldest(&st),
				    m.n ? m.live[0].ring_end : 0);
			/* FIFO: every region still live is one the consumer has not passed */
			for (i = 0; i < m.n; i++)
				REQUIRE(m.live[i].ring_end > cons);
			model_check_empty_room(&st, &m, step);
		}
	}
	/* the random walk must have reached the interesting states */
	ck_assert_uint_gt(pushes, MODEL_STEPS / 10);
	ck_assert_uint_gt(frees, MODEL_STEPS / 10);
	if (m.size >= 4) {
		ck_assert_uint_gt(skips, 100);
		ck_assert_uint_gt(zero_rooms, 100);
	}
	if (m.size >= 2 * SAN_STAGE_RECS)
		ck_assert_uint_gt(limits, 0);
}
END_TEST

Suite *make_stage_suite(void)
{
	Suite *s = suite_create("stage");
	TCase *tc = tcase_create("stage");
	TCase *tm = tcase_create("model");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_empty, 0, sizeof(empty_rows) / sizeof(empty_rows[0]));
	tcase_add_loop_test(tc, test_script, 0, sizeof(scripts) / sizeof(scripts[0]));
	tcase_add_test(tc, test_record_limit);
	tcase_add_test(tc, test_reset);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tm, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_loop_test(tm, test_model, 0, sizeof(model_rows) / sizeof(model_rows[0]));
	suite_add_tcase(s, tm);
	return s;
}
