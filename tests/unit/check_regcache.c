/* tests/unit: core/san_regcache — hits, limits, invalidation, fork, and threads against a fake. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_regcache.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_rand.h"
#include "tests/unit/unit_require.h"


/*
 * The addresses are made up: the fake register callback never touches memory, it only records
 * what it was asked, so the tests can place buffers wherever a scenario needs them.
 */
#define PG 4096u
#define BASE ((uintptr_t)0x10000000u)
#define PA(n) (BASE + (uintptr_t)(n)*PG) /* page n, as an integer */
#define P(n) ((void *)PA(n))		 /* page n, as a pointer */
#define RD 1u				 /* access bits: opaque to the cache */
#define WR 2u

/* ---- the fake provider --------------------------------------------------------------------- */

struct fake_mr {
	uintptr_t start, end;
	unsigned int access;
	uint64_t id;	     /* 1, 2, ... in registration order */
	uint64_t clock;	     /* concurrent test: the invalidation clock when it "pinned" */
	int live;	     /* 1 until deregistered */
	int holders;	     /* concurrent test: threads holding it (atomic) */
	struct fake_mr *all; /* every registration ever made */
};

struct fake {
	pthread_mutex_t mu;
	int fail_err; /* > 0: the next fail_count reg calls fail with -fail_err */
	int fail_count;
	unsigned int reg_calls, nreg, ndereg, bad_dereg;
	unsigned int live;
	uint64_t live_bytes;
	struct fake_mr *all;
	/* run inside the callbacks, where the cache holds no lock */
	void (*on_reg)(struct fake *f, struct fake_mr *m);
	void (*on_dereg)(struct fake *f, struct fake_mr *m);
	struct san_regcache *rc;
	uintptr_t hook_addr; /* for the hooks */
	size_t hook_len;
	int hook_calls;
};

static struct fake fk;

/* concurrent test: the "page tables' lock" that orders pinning against changes (see the test) */
static pthread_mutex_t pt_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t pt_clock;
static __thread int tl_fail_next; /* this thread's next reg fails with -ENOMEM */

static int fake_reg(void *ctx, void *addr, size_t len, unsigned int access, struct san_reg *out)
{
	struct fake *f = ctx;
	struct fake_mr *m;
	int err = 0;

	pthread_mutex_lock(&f->mu);
	f->reg_calls++;
	if (f->fail_count > 0) {
		f->fail_count--;
		err = f->fail_err;
	}
	pthread_mutex_unlock(&f->mu);
	if (tl_fail_next) {
		tl_fail_next = 0;
		err = ENOMEM;
	}
	if (err)
		return -err;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->start = (uintptr_t)addr;
	m->end = (uintptr_t)addr + len;
	m->access = access;
	m->live = 1;
	pthread_mutex_lock(&pt_mu); /* the moment the pages are pinned */
	m->clock = pt_clock;
	pthread_mutex_unlock(&pt_mu);

	pthread_mutex_lock(&f->mu);
	m->id = ++f->nreg;
	m->all = f->all;
	f->all = m;
	f->live++;
	f->live_bytes += len;
	pthread_mutex_unlock(&f->mu);

	out->mr = m;
	out->lkey = (uint32_t)m->id;
	out->rkey = (uint32_t)m->id ^ 0x5a5a0000u;
	if (f->on_reg)
		f->on_reg(f, m);
	return 0;
}

static void fake_dereg(void *ctx, const struct san_reg *reg)
{
	struct fake *f = ctx;
	struct fake_mr *m = reg->mr;

	pthread_mutex_lock(&f->mu);
	f->ndereg++;
	/* twice, or while a thread of the concurrent test still holds it: both are bugs */
	if (!m->live || __atomic_load_n(&m->holders, __ATOMIC_ACQUIRE))
		f->bad_dereg++;
	if (m->live) {
		m->live = 0;
		f->live--;
		f->live_bytes -= m->end - m->start;
	}
	pthread_mutex_unlock(&f->mu);
	if (f->on_dereg)
		f->on_dereg(f, m);
}

static struct san_regcache *fake_cache(uint32_t max_entries, uint64_t max_bytes)
{
	struct san_regcache_ops ops = { .reg = fake_reg, .dereg = fake_dereg, .ctx = &fk };
	struct san_regcache_limits lim = { .max_entries = max_entries,
					   .max_bytes = max_bytes,
					   .page_size = PG };
	struct san_regcache *rc = NULL;

	memset(&fk, 0, sizeof(fk));
	pthread_mutex_init(&fk.mu, NULL);
	REQUIRE_EQ(san_regcache_create(&ops, &lim, &rc), 0);
	REQUIRE(rc != NULL);
	fk.rc = rc;
	return rc;
}

static void fake_free_records(void)
{
	struct fake_mr *m, *next;

	for (m = fk.all; m; m = next) {
		next = m->all;
		free(m);
	}
	fk.all = NULL;
}

/* Destroy, check every registration was undone exactly once, free the fake's records. */
static void fake_done(struct san_regcache *rc)
{
	san_regcache_destroy(rc);
	REQUIRE_EQ(fk.bad_dereg, 0);
	REQUIRE_EQ(fk.live, 0);
	REQUIRE_EQ(fk.ndereg, fk.nreg);
	fake_free_records();
}

static struct fake_mr *mr_of(const struct san_regcache_entry *e)
{
	return e->reg.mr;
}

static struct san_regcache_entry *get(struct san_regcache *rc, uintptr_t a, size_t len,
				      unsigned int access)
{
	struct san_regcache_entry *e = NULL;
	int r = san_regcache_lookup(rc, (void *)a, len, access, &e);

	ck_assert_msg(r == 0, "lookup(%#" PRIxPTR ", %zu) = %d", a, len, r);
	REQUIRE(e != NULL);
	REQUIRE(e->start <= a && e->end >= a + len);
	REQUIRE((e->access & access) == access);
	REQUIRE(mr_of(e)->live);
	return e;
}

/* Look up and release at once: the entry ends up most recently used. */
static struct fake_mr *touch(struct san_regcache *rc, uintptr_t a, size_t len)
{
	struct san_regcache_entry *e = get(rc, a, len, RD);
	struct fake_mr *m = mr_of(e);

	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	return m;
}

static struct san_regcache_stats stats(struct san_regcache *rc)
{
	struct san_regcache_stats s;

	san_regcache_get_stats(rc, &s);
	return s;
}

/* ---- hits and misses ----------------------------------------------------------------------- */

START_TEST(test_hit_miss)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct san_regcache_entry *e, *e2;
	struct san_regcache_stats s;

	e = get(rc, PA(1) + 100, 200, RD);
	REQUIRE_EQ(e->start, PA(1));
	REQUIRE_EQ(e->end, PA(2));
	REQUIRE_EQ(e->access, RD);
	REQUIRE_EQ(e->reg.lkey, mr_of(e)->id);
	REQUIRE_EQ(e->reg.rkey, mr_of(e)->id ^ 0x5a5a0000u);
	REQUIRE_EQ(fk.nreg, 1);
	s = stats(rc);
	REQUIRE_EQ(s.misses, 1);
	REQUIRE_EQ(s.hits, 0);
	REQUIRE_EQ(s.entries, 1);
	REQUIRE_EQ(s.registrations, 1);
	REQUIRE_EQ(s.registered_bytes, PG);
	REQUIRE_EQ(san_regcache_release(rc, e), 0);

	/* the same range, the whole page, its first and last byte: one registration */
	REQUIRE(get(rc, PA(1) + 100, 200, RD) == e);
	REQUIRE(get(rc, PA(1), PG, RD) == e);
	REQUIRE(get(rc, PA(1), 1, RD) == e);
	REQUIRE(get(rc, PA(1) + PG - 1, 1, RD) == e);
	REQUIRE_EQ(fk.nreg, 1);
	s = stats(rc);
	REQUIRE_EQ(s.hits, 4);
	REQUIRE_EQ(s.misses, 1);
	/* four references: three releases keep it, the fourth is the last, a fifth is refused */
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	REQUIRE_EQ(san_regcache_release(rc, e), -EINVAL);
	REQUIRE(mr_of(e)->live); /* cached, not deregistered */

	/* one byte past the page: not covered */
	e2 = get(rc, PA(1) + PG - 1, 2, RD);
	REQUIRE(e2 != e);
	REQUIRE_EQ(fk.nreg, 2);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	e2 = get(rc, PA(3), 1, RD);
	REQUIRE_EQ(fk.nreg, 3);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	s = stats(rc);
	REQUIRE_EQ(s.misses, 3);
	REQUIRE_EQ(s.entries, 3);
	REQUIRE_EQ(s.registered_bytes, 4 * PG);
	REQUIRE_EQ(fk.ndereg, 0);
	fake_done(rc);
}
END_TEST

START_TEST(test_span_pages)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct san_regcache_entry *e, *e2;

	/* 200 bytes across the boundary of pages 5 and 6: both pages */
	e = get(rc, PA(5) + 4000, 200, RD);
	REQUIRE_EQ(e->start, PA(5));
	REQUIRE_EQ(e->end, PA(7));
	REQUIRE_EQ(mr_of(e)->start, PA(5));
	REQUIRE_EQ(mr_of(e)->end, PA(7));
	REQUIRE_EQ(stats(rc).registered_bytes, 2 * PG);
	REQUIRE(get(rc, PA(6), 10, RD) == e);
	REQUIRE(get(rc, PA(6) + PG - 1, 1, RD) == e);
	REQUIRE(get(rc, PA(5), 2 * PG, RD) == e);
	REQUIRE_EQ(fk.nreg, 1);
	/* a byte of page 4 or page 7 more: not covered */
	e2 = get(rc, PA(5) - 1, 2, RD);
	REQUIRE(e2 != e);
	REQUIRE_EQ(e2->start, PA(4));
	REQUIRE_EQ(e2->end, PA(6));
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	e2 = get(rc, PA(5), 2 * PG + 1, RD);
	REQUIRE(e2 != e);
	REQUIRE_EQ(e2->end, PA(8));
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	REQUIRE_EQ(fk.nreg, 3);
	/* a range ending exactly on a page boundary takes no page more */
	e2 = get(rc, PA(10), 3 * PG, RD);
	REQUIRE_EQ(e2->start, PA(10));
	REQUIRE_EQ(e2->end, PA(13));
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	/* a 40-page buffer, then its middle */
	e2 = get(rc, PA(20) + 1, 40 * PG - 2, RD);
	REQUIRE_EQ(e2->end - e2->start, 40 * PG);
	REQUIRE(get(rc, PA(39) + 7, 5 * PG, RD) == e2);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	REQUIRE_EQ(fk.nreg, 5);
	for (int i = 0; i < 4; i++)
		REQUIRE_EQ(san_regcache_release(rc, e), 0);
	fake_done(rc);
}
END_TEST

START_TEST(test_access)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct san_regcache_entry *r, *rw;

	r = get(rc, PA(2), 100, RD);
	REQUIRE_EQ(mr_of(r)->access, RD);
	/* write access is not in a read registration: a second one */
	rw = get(rc, PA(2), 100, RD | WR);
	REQUIRE(rw != r);
	REQUIRE_EQ(mr_of(rw)->access, RD | WR);
	REQUIRE_EQ(fk.nreg, 2);
	/* both now serve reads, only rw serves writes */
	REQUIRE(get(rc, PA(2), 100, WR) == rw);
	{
		struct san_regcache_entry *x = get(rc, PA(2), 100, RD);

		REQUIRE(x == r || x == rw);
		REQUIRE_EQ(san_regcache_release(rc, x), 0);
	}
	REQUIRE_EQ(fk.nreg, 2);
	REQUIRE_EQ(san_regcache_release(rc, r), 0);
	REQUIRE_EQ(san_regcache_release(rc, rw), 0);
	REQUIRE_EQ(san_regcache_release(rc, rw), 0);
	fake_done(rc);
}
END_TEST

/* Entries may overlap: a lookup takes any one that covers it, an invalidate drops all it touches.
 */
START_TEST(test_overlapping_entries)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct fake_mr *a, *b;
	struct san_regcache_entry *e;

	a = touch(rc, PA(0), 3 * PG);
	b = touch(rc, PA(2), 3 * PG);
	REQUIRE(a != b);
	REQUIRE_EQ(stats(rc).entries, 2);
	REQUIRE_EQ(stats(rc).registered_bytes, 6 * PG);
	e = get(rc, PA(2) + 5, 10, RD);
	REQUIRE(mr_of(e) == a || mr_of(e) == b);
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	REQUIRE(touch(rc, PA(0), PG) == a);
	REQUIRE(touch(rc, PA(4), PG) == b);
	REQUIRE_EQ(fk.nreg, 2);
	/* spanning both, covered by neither: a third */
	REQUIRE(touch(rc, PA(1), 3 * PG) != a);
	REQUIRE_EQ(fk.nreg, 3);
	san_regcache_invalidate(rc, P(2) + 1, 1);
	REQUIRE(!a->live);
	REQUIRE(!b->live);
	REQUIRE_EQ(stats(rc).entries, 0);
	REQUIRE_EQ(stats(rc).invalidations, 3);
	fake_done(rc);
}
END_TEST

/* ---- invalidation --------------------------------------------------------------------------- */

START_TEST(test_invalidate_in_use)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct san_regcache_entry *e1, *e2;
	struct fake_mr *m1;
	struct san_regcache_stats s;

	e1 = get(rc, PA(3) + 10, 100, RD);
	m1 = mr_of(e1);
	REQUIRE(get(rc, PA(3) + 10, 100, RD) == e1); /* two references */

	/* freed while a transfer uses it: out of the cache at once, alive until the last release */
	san_regcache_invalidate(rc, P(3) + 50, 8);
	s = stats(rc);
	REQUIRE_EQ(s.invalidations, 1);
	REQUIRE_EQ(s.entries, 0);
	REQUIRE_EQ(s.registrations, 1);
	REQUIRE_EQ(s.registered_bytes, PG);
	REQUIRE_EQ(fk.ndereg, 0);
	REQUIRE(m1->live);
	REQUIRE_EQ(e1->reg.lkey, m1->id); /* still readable by its holder */

	e2 = get(rc, PA(3) + 10, 100, RD);
	REQUIRE(e2 != e1);
	REQUIRE(mr_of(e2) != m1);
	REQUIRE_EQ(fk.nreg, 2);
	REQUIRE_EQ(stats(rc).registered_bytes, 2 * PG); /* both pinned */

	/* a second invalidate does not touch the detached one again */
	san_regcache_invalidate(rc, P(3), PG);
	REQUIRE_EQ(stats(rc).invalidations, 2); /* e2 */
	REQUIRE_EQ(fk.ndereg, 0);

	REQUIRE_EQ(san_regcache_release(rc, e1), 0);
	REQUIRE(m1->live);
	REQUIRE_EQ(fk.ndereg, 0);
	REQUIRE_EQ(san_regcache_release(rc, e1), 0); /* the last: deregistered now */
	REQUIRE(!m1->live);
	REQUIRE_EQ(fk.ndereg, 1);
	REQUIRE_EQ(san_regcache_release(rc, e1), -EINVAL);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	REQUIRE_EQ(fk.ndereg, 2);
	s = stats(rc);
	REQUIRE_EQ(s.registrations, 0);
	REQUIRE_EQ(s.registered_bytes, 0);

	/* an unused entry is deregistered by the invalidate itself */
	m1 = touch(rc, PA(9), 1);
	REQUIRE(m1->live);
	san_regcache_invalidate(rc, P(9), 1);
	REQUIRE(!m1->live);
	REQUIRE_EQ(fk.ndereg, 3);
	REQUIRE_EQ(stats(rc).registrations, 0);
	fake_done(rc);
}
END_TEST

/*
 * Which entries an invalidate drops. Six entries, released (so a dropped one is deregistered
 * at once and its fake record shows it), one range invalidated per row.
 */
static const struct {
	uintptr_t first, npages;
} inval_entries[] = {
	{ 0, 2 },   /* E0 [0, 2) */
	{ 4, 2 },   /* E1 [4, 6) */
	{ 8, 2 },   /* E2 [8, 10) */
	{ 5, 4 },   /* E3 [5, 9): overlaps E1 and E2 */
	{ 20, 40 }, /* E4 [20, 60): long, starts far before its end */
	{ 58, 4 },  /* E5 [58, 62): overlaps E4's end */
};

static const struct {
	const char *what;
	uintptr_t addr; /* absolute */
	size_t len;
	unsigned int dropped; /* bit i: Ei */
} inval_rows[] = {
	{ "nothing (len 0)", PA(1), 0, 0 },
	{ "the gap between E0 and E1 exactly", PA(2), 2 * PG, 0 },
	{ "E0's last byte", PA(2) - 1, 1, 1u << 0 },
	{ "E0's first byte", PA(0), 1, 1u << 0 },
	{ "the byte before E0", PA(0) - 1, 1, 0 },
	{ "the byte before E1 only", PA(4) - 1, 1, 0 },
	{ "that byte and E1's first", PA(4) - 1, 2, 1u << 1 },
	{ "inside E1 and E3", PA(5) + 100, 10, (1u << 1) | (1u << 3) },
	{ "E3 only", PA(6), 1, 1u << 3 },
	{ "E2 after E3's end", PA(9), PG, 1u << 2 },
	{ "E2 and E3", PA(8) + 5, 1, (1u << 2) | (1u << 3) },
	{ "E4 only, 37 pages after its start", PA(57) + 3, 1, 1u << 4 },
	{ "E4's last byte, and E5", PA(60) - 1, 1, (1u << 4) | (1u << 5) },
	{ "after E4: E5 only", PA(60), 10 * PG, 1u << 5 },
	{ "just after E5", PA(62), 10 * PG, 0 },
	{ "just before E4 and its first byte", PA(19), PG + 1, 1u << 4 },
	{ "everything", PA(0), 100 * PG, 0x3f },
	{ "from 0 up to E0's first byte", 0, PA(0) + 1, 1u << 0 },
	{ "to the end of the address space (wrapping length)", PA(9) + 5, SIZE_MAX, 0x34 },
	{ "past everything", PA(62), SIZE_MAX / 2, 0 },
};

START_TEST(test_invalidate_ranges)
{
	const size_t n = sizeof(inval_entries) / sizeof(inval_entries[0]);
	struct san_regcache *rc = fake_cache(16, 1000 * PG);
	struct fake_mr *m[sizeof(inval_entries) / sizeof(inval_entries[0])];
	unsigned int want = inval_rows[_i].dropped, k = 0;
	size_t i;

	for (i = 0; i < n; i++)
		m[i] = touch(rc, PA(inval_entries[i].first), inval_entries[i].npages * PG);
	REQUIRE_EQ(fk.nreg, n);
	san_regcache_invalidate(rc, (void *)inval_rows[_i].addr, inval_rows[_i].len);
	for (i = 0; i < n; i++) {
		bool dropped = !m[i]->live;

		ck_assert_msg(dropped == !!(want & (1u << i)), "%s: E%zu %s", inval_rows[_i].what,
			      i, dropped ? "dropped" : "kept");
		k += dropped;
	}
	REQUIRE_EQ(stats(rc).invalidations, k);
	REQUIRE_EQ(stats(rc).entries, n - k);
	/* the kept ones still hit, the dropped ones register again */
	for (i = 0; i < n; i++) {
		struct fake_mr *again =
			touch(rc, PA(inval_entries[i].first), inval_entries[i].npages * PG);

		REQUIRE((again == m[i]) == !(want & (1u << i)));
	}
	REQUIRE_EQ(fk.nreg, n + k);
	fake_done(rc);
}
END_TEST

/*
 * The register callback runs without the lock: an invalidate can come while it runs (here from
 * the callback itself, which also proves the lock is not held: it would deadlock). The pages it
 * pinned may be the old ones, so the entry serves this caller but is never cached.
 */
static void hook_invalidate(struct fake *f, struct fake_mr *m)
{
	if (f->hook_calls-- > 0)
		san_regcache_invalidate(f->rc, (void *)f->hook_addr, f->hook_len);
}

START_TEST(test_invalidate_while_registering)
{
	struct san_regcache *rc = fake_cache(16, 64 * PG);
	struct san_regcache_entry *e, *e2;
	struct fake_mr *m, *other;
	struct san_regcache_stats s;

	other = touch(rc, PA(50), PG);
	fk.on_reg = hook_invalidate;

	/* an invalidate of another range: no effect on this one */
	fk.hook_addr = PA(40);
	fk.hook_len = PG;
	fk.hook_calls = 1;
	m = touch(rc, PA(7), 10);
	REQUIRE_EQ(stats(rc).invalidations, 0);
	REQUIRE(touch(rc, PA(7), 10) == m);

	/* one overlapping the range being registered (and another, cached, entry) */
	fk.hook_addr = PA(11) - 1;
	fk.hook_len = PA(50) - PA(11) + 2;
	fk.hook_calls = 1;
	e = get(rc, PA(11), 100, RD);
	m = mr_of(e);
	s = stats(rc);
	REQUIRE_EQ(s.invalidations, 2); /* this one and "other" */
	REQUIRE(!other->live);
	REQUIRE_EQ(s.entries, 1); /* only [7] */
	REQUIRE_EQ(s.registrations, 2);
	REQUIRE(m->live);
	e2 = get(rc, PA(11), 100, RD); /* not cached: registers anew */
	REQUIRE(e2 != e);
	REQUIRE_EQ(fk.hook_calls, -1);
	REQUIRE_EQ(san_regcache_release(rc, e2), 0);
	REQUIRE(m->live);
	REQUIRE_EQ(san_regcache_release(rc, e), 0); /* its only reference: deregistered */
	REQUIRE(!m->live);
	REQUIRE_EQ(san_regcache_release(rc, e), -EINVAL);
	REQUIRE(touch(rc, PA(11), 100) == mr_of(e2));
	fake_done(rc);
}
END_TEST

/*
 * ibv_dereg_mr frees memory: the deregister callback re-enters invalidate (and may look up).
 * It runs without the lock, so this must neither deadlock nor disturb the books.
 */
static void hook_dereg_reenter(struct fake *f, struct fake_mr *m)
{
	struct san_regcache_entry *e;

	if (f->hook_calls-- <= 0)
		return;
	san_regcache_invalidate(f->rc, (void *)f->hook_addr, f->hook_len);
	if (san_regcache_lookup(f->rc, (void *)PA(90), 1, RD, &e) == 0)
		san_regcache_release(f->rc, e);
}

START_TEST(test_callbacks_reenter)
{
	struct san_regcache *rc = fake_cache(4, 64 * PG);
	struct fake_mr *a, *b, *c;
	struct san_regcache_stats s;

	a = touch(rc, PA(1), 1);
	b = touch(rc, PA(2), 1);
	c = touch(rc, PA(3), 1);
	fk.on_dereg = hook_dereg_reenter;
	fk.hook_addr = PA(2);
	fk.hook_len = 1;
	fk.hook_calls = 1;
	san_regcache_invalidate(rc, P(1), 1); /* a's dereg invalidates b and registers [90] */
	REQUIRE(!a->live);
	REQUIRE(!b->live);
	REQUIRE(c->live);
	s = stats(rc);
	REQUIRE_EQ(s.invalidations, 2);
	REQUIRE_EQ(s.entries, 2); /* [3] and [90] */
	REQUIRE_EQ(s.registrations, 2);
	REQUIRE_EQ(s.registered_bytes, 2 * PG);
	REQUIRE_EQ(fk.bad_dereg, 0);
	fake_done(rc);
}
END_TEST

/* An empty cache's invalidate does not take the lock (held here through fork_prepare). */
START_TEST(test_invalidate_empty_lockless)
{
	struct san_regcache *rc = fake_cache(4, 64 * PG);

	san_regcache_fork_prepare(rc); /* holds the lock: a locking invalidate would hang */
	san_regcache_invalidate(rc, P(0), 100 * PG);
	san_regcache_invalidate(rc, NULL, SIZE_MAX);
	san_regcache_fork_parent(rc);

	touch(rc, PA(1), 1);
	san_regcache_invalidate(rc, P(1), 1);
	REQUIRE_EQ(stats(rc).registrations, 0);
	san_regcache_fork_prepare(rc); /* empty again: lockless again */
	san_regcache_invalidate(rc, P(0), 100 * PG);
	san_regcache_fork_parent(rc);
	REQUIRE_EQ(fk.ndereg, 1);
	fake_done(rc);
}
END_TEST

/* ---- limits and eviction ------------------------------------------------------------------- */

START_TEST(test_evict_by_count)
{
	struct san_regcache *rc = fake_cache(3, 1000 * PG);
	struct san_regcache_entry *hold[3], *e = (void *)1;
	struct fake_mr *a, *b, *c, *d, *x;
	struct san_regcache_stats s;

	a = touch(rc, PA(1), 1);
	b = touch(rc, PA(2), 1);
	c = touch(rc, PA(3), 1);
	REQUIRE(touch(rc, PA(1), 1) == a); /* LRU order now b, c, a */
	d = touch(rc, PA(4), 1);	   /* evicts b only */
	REQUIRE(!b->live);
	REQUIRE(a->live && c->live && d->live);
	s = stats(rc);
	REQUIRE_EQ(s.evictions, 1);
	REQUIRE_EQ(s.entries, 3);
	REQUIRE_EQ(s.registrations, 3);
	REQUIRE_EQ(s.registered_bytes, 3 * PG);

	REQUIRE(touch(rc, PA(3), 1) == c); /* LRU: a, d, c */
	x = touch(rc, PA(5), 1);	   /* evicts a */
	REQUIRE(!a->live);
	REQUIRE(c->live && d->live && x->live);
	REQUIRE_EQ(stats(rc).evictions, 2);

	/* all three in use: nothing can go, the lookup is refused and nothing changes */
	hold[0] = get(rc, PA(3), 1, RD);
	hold[1] = get(rc, PA(4), 1, RD);
	hold[2] = get(rc, PA(5), 1, RD);
	REQUIRE_EQ(san_regcache_lookup(rc, P(6), 1, RD, &e), -ENOMEM);
	REQUIRE(e == (void *)1);
	s = stats(rc);
	REQUIRE_EQ(s.evictions, 2);
	REQUIRE_EQ(s.limit_failures, 1);
	REQUIRE_EQ(s.entries, 3);
	REQUIRE_EQ(fk.ndereg, 2);
	REQUIRE_EQ(fk.reg_calls, 5);
	/* in use, one invalidated and detached: still counted, still no room */
	san_regcache_invalidate(rc, P(4), 1);
	REQUIRE_EQ(san_regcache_lookup(rc, P(6), 1, RD, &e), -ENOMEM);
	REQUIRE_EQ(san_regcache_release(rc, hold[1]), 0); /* deregistered: room */
	REQUIRE(!d->live);
	REQUIRE(touch(rc, PA(6), 1)->live);
	REQUIRE_EQ(stats(rc).evictions, 2);
	/* now c (held), x (held), [6] (not): [7] evicts [6], never a held one */
	REQUIRE(touch(rc, PA(7), 1)->live);
	REQUIRE(c->live && x->live);
	REQUIRE_EQ(stats(rc).evictions, 3);
	REQUIRE_EQ(san_regcache_release(rc, hold[0]), 0);
	REQUIRE_EQ(san_regcache_release(rc, hold[2]), 0);
	fake_done(rc);
}
END_TEST

START_TEST(test_evict_by_bytes)
{
	struct san_regcache *rc = fake_cache(100, 4 * PG);
	struct san_regcache_entry *held, *e = (void *)1;
	struct fake_mr *a, *b, *c, *d, *x, *f;
	struct san_regcache_stats s;

	a = touch(rc, PA(0), PG);      /* 1 page */
	b = touch(rc, PA(10), 2 * PG); /* 2 pages */
	c = touch(rc, PA(20), PG);     /* 1 page: 4 in all, LRU a, b, c */
	d = touch(rc, PA(30), PG);     /* needs 1: a goes */
	REQUIRE(!a->live);
	REQUIRE(b->live && c->live && d->live);
	REQUIRE_EQ(stats(rc).registered_bytes, 4 * PG);
	x = touch(rc, PA(40), 2 * PG); /* needs 2: b (2) is enough */
	REQUIRE(!b->live);
	REQUIRE(c->live && d->live && x->live);
	REQUIRE_EQ(stats(rc).evictions, 2);

	/* 3 pages with x (2) in use: evicting c and d leaves 2 + 3 > 4. Refused, nothing evicted */
	held = get(rc, PA(40), 1, RD);
	REQUIRE_EQ(san_regcache_lookup(rc, P(50), 3 * PG, RD, &e), -ENOMEM);
	REQUIRE(e == (void *)1);
	REQUIRE(c->live && d->live && x->live);
	s = stats(rc);
	REQUIRE_EQ(s.evictions, 2);
	REQUIRE_EQ(s.entries, 3);
	REQUIRE_EQ(s.registered_bytes, 4 * PG);
	/* 2 pages: c and d go (LRU order), x stays */
	f = touch(rc, PA(60), 2 * PG);
	REQUIRE(!c->live && !d->live);
	REQUIRE(x->live && f->live);
	REQUIRE_EQ(stats(rc).evictions, 4);
	REQUIRE_EQ(san_regcache_release(rc, held), 0);
	/* 3 pages now: x then f */
	REQUIRE(touch(rc, PA(70), 3 * PG)->live);
	REQUIRE(!x->live && !f->live);
	s = stats(rc);
	REQUIRE_EQ(s.evictions, 6);
	REQUIRE_EQ(s.registered_bytes, 3 * PG);
	REQUIRE_EQ(s.entries, 1);
	fake_done(rc);
}
END_TEST

START_TEST(test_limit_too_small)
{
	struct san_regcache_ops ops = { .reg = fake_reg, .dereg = fake_dereg, .ctx = &fk };
	struct san_regcache_limits lim = { .max_entries = 0, .max_bytes = PG, .page_size = PG };
	struct san_regcache *rc = NULL, *rc2;
	struct san_regcache_entry *e = (void *)1;

	REQUIRE_EQ(san_regcache_create(&ops, &lim, &rc), -EINVAL); /* no entry at all */
	lim.max_entries = 1;
	lim.page_size = 3000;
	REQUIRE_EQ(san_regcache_create(&ops, &lim, &rc), -EINVAL);
	ops.dereg = NULL;
	lim.page_size = 0;
	REQUIRE_EQ(san_regcache_create(&ops, &lim, &rc), -EINVAL);
	REQUIRE(rc == NULL);

	rc = fake_cache(8, 2 * PG);
	REQUIRE_EQ(san_regcache_lookup(rc, P(1), 2 * PG + 1, RD, &e), -E2BIG); /* 3 pages */
	REQUIRE_EQ(san_regcache_lookup(rc, P(1) + 1, 2 * PG, RD, &e), -E2BIG);
	REQUIRE(e == (void *)1);
	REQUIRE_EQ(fk.reg_calls, 0);
	REQUIRE_EQ(stats(rc).limit_failures, 2);
	REQUIRE_EQ(stats(rc).misses, 2);
	REQUIRE(touch(rc, PA(1), 2 * PG)->live); /* exactly the limit fits */
	/* no limit on bytes */
	{
		struct san_regcache_limits big = { .max_entries = 2, .max_bytes = UINT64_MAX };

		ops.dereg = fake_dereg;
		REQUIRE_EQ(san_regcache_create(&ops, &big, &rc2), 0);
		REQUIRE_EQ(san_regcache_lookup(rc2, P(0), (size_t)1 << 40, RD, &e), 0);
		REQUIRE_EQ(e->end - e->start, (uintptr_t)1 << 40);
		REQUIRE_EQ(san_regcache_release(rc2, e), 0);
		san_regcache_destroy(rc2);
	}
	fake_done(rc);
}
END_TEST

START_TEST(test_bad_ranges)
{
	struct san_regcache *rc = fake_cache(8, 64 * PG);
	struct san_regcache_entry *e = (void *)1;

	REQUIRE_EQ(san_regcache_lookup(rc, P(1), 0, RD, &e), -EINVAL);
	REQUIRE_EQ(san_regcache_lookup(rc, (void *)(UINTPTR_MAX - 10), 100, RD, &e), -EINVAL);
	/* does not wrap, but its last page's end would */
	REQUIRE_EQ(san_regcache_lookup(rc, (void *)(UINTPTR_MAX - 100), 50, RD, &e), -EINVAL);
	REQUIRE(e == (void *)1);
	REQUIRE_EQ(fk.reg_calls, 0);
	REQUIRE_EQ(stats(rc).misses, 0);
	fake_done(rc);
}
END_TEST

/* ---- register failures --------------------------------------------------------------------- */

static const int reg_errors[] = { ENOMEM, EPERM, EFAULT, EACCES, EINVAL };

START_TEST(test_reg_failure)
{
	struct san_regcache *rc = fake_cache(8, 64 * PG);
	struct san_regcache_entry *held, *e = (void *)1;
	struct san_regcache_stats before, after;
	struct fake_mr *a, *b;
	int err = reg_errors[_i];

	a = touch(rc, PA(1), 1);
	b = touch(rc, PA(2), 2 * PG);
	held = get(rc, PA(10), 1, RD);
	before = stats(rc);

	fk.fail_err = err;
	fk.fail_count = 1;
	REQUIRE_EQ(san_regcache_lookup(rc, P(20), 5, RD, &e), -err);
	REQUIRE(e == (void *)1);
	after = stats(rc);
	REQUIRE_EQ(after.reg_failures, 1);
	REQUIRE_EQ(after.misses, before.misses + 1);
	REQUIRE_EQ(after.entries, before.entries);
	REQUIRE_EQ(after.registrations, before.registrations);
	REQUIRE_EQ(after.registered_bytes, before.registered_bytes);
	REQUIRE_EQ(after.evictions, 0);
	REQUIRE_EQ(after.invalidations, 0);
	REQUIRE_EQ(fk.nreg, 3);
	REQUIRE_EQ(fk.ndereg, 0);
	/* everything cached still hits, the held one is still held */
	REQUIRE(touch(rc, PA(1), 1) == a);
	REQUIRE(touch(rc, PA(3), 1) == b);
	REQUIRE(touch(rc, PA(10), 1) == mr_of(held));
	REQUIRE_EQ(stats(rc).hits, before.hits + 3);
	REQUIRE_EQ(san_regcache_release(rc, held), 0);
	/* and the next attempt works */
	REQUIRE(touch(rc, PA(20), 5)->live);
	REQUIRE_EQ(stats(rc).registered_bytes, before.registered_bytes + PG);
	fake_done(rc);
}
END_TEST

/* At the limit, a failing register has already evicted what it needed (the pages had to be
 * unpinned first); the books stay exact and the next lookup works. */
START_TEST(test_reg_failure_after_eviction)
{
	struct san_regcache *rc = fake_cache(2, 64 * PG);
	struct san_regcache_entry *e = (void *)1;
	struct fake_mr *a, *b;
	struct san_regcache_stats s;

	a = touch(rc, PA(1), 1);
	b = touch(rc, PA(2), 1);
	fk.fail_err = EFAULT;
	fk.fail_count = 1;
	REQUIRE_EQ(san_regcache_lookup(rc, P(3), 1, RD, &e), -EFAULT);
	REQUIRE(e == (void *)1);
	REQUIRE(!a->live);
	REQUIRE(b->live);
	s = stats(rc);
	REQUIRE_EQ(s.evictions, 1);
	REQUIRE_EQ(s.entries, 1);
	REQUIRE_EQ(s.registrations, 1);
	REQUIRE_EQ(s.registered_bytes, PG);
	REQUIRE(touch(rc, PA(3), 1)->live);
	REQUIRE(touch(rc, PA(2), 1) == b);
	REQUIRE_EQ(stats(rc).registrations, 2);
	fake_done(rc);
}
END_TEST

/* ---- fork ------------------------------------------------------------------------------------ */

/* The child's side, as a result code (0: as expected); runs in the real child too. */
static int child_checks(struct san_regcache *rc, struct san_regcache_entry *b,
			struct san_regcache_entry *c)
{
	struct san_regcache_stats s;
	struct san_regcache_entry *e, *held[4];
	unsigned int dereg0 = fk.ndereg;

	san_regcache_fork_child(rc);
	s = stats(rc);
	if (fk.ndereg != dereg0)
		return 1; /* the parent's registrations are not ours to undo */
	if (s.entries != 0 || s.registrations != 2 || s.registered_bytes != 0)
		return 2;
	/* nothing is found, a new registration works */
	if (san_regcache_lookup(rc, P(1), 1, RD, &e) || mr_of(e) == NULL || e == b || e == c)
		return 3;
	if (san_regcache_release(rc, e))
		return 4;
	/* held at fork: released without a callback, then the slot is free again */
	if (san_regcache_release(rc, b) || san_regcache_release(rc, c) ||
	    san_regcache_release(rc, c) || san_regcache_release(rc, c) != -EINVAL)
		return 5;
	if (fk.ndereg != dereg0)
		return 6;
	s = stats(rc);
	if (s.registrations != 1 || s.registered_bytes != PG || s.entries != 1)
		return 7;
	/* all four slots usable (the fourth evicts [1]) */
	for (int i = 0; i < 4; i++) {
		if (san_regcache_lookup(rc, P(10 + i), 1, RD, &held[i]))
			return 8;
	}
	if (fk.ndereg != dereg0 + 1)
		return 9;
	for (int i = 0; i < 4; i++) {
		if (san_regcache_release(rc, held[i]))
			return 10;
	}
	return 0;
}

START_TEST(test_fork_child)
{
	struct san_regcache *rc = fake_cache(4, 64 * PG);
	struct san_regcache_entry *b, *c;
	struct fake_mr *a;
	int status = -1, r;
	pid_t pid;

	a = touch(rc, PA(1), 1);
	b = get(rc, PA(2), 1, RD);
	c = get(rc, PA(3), 1, RD);
	REQUIRE(get(rc, PA(3), 1, RD) == c); /* two references */

	san_regcache_fork_prepare(rc);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(child_checks(rc, b, c));
	san_regcache_fork_parent(rc);
	REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x", status);

	/* the parent's cache is untouched */
	REQUIRE(touch(rc, PA(1), 1) == a);
	REQUIRE_EQ(stats(rc).registrations, 3);
	REQUIRE_EQ(fk.ndereg, 0);

	/* the same checks in this process (as if it were the child), without prepare */
	r = child_checks(rc, b, c);
	REQUIRE_EQ(r, 0);
	/* a, b, c were dropped without a callback: the fake still has them */
	REQUIRE(a->live);
	REQUIRE_EQ(fk.ndereg, 1); /* the "child's" [1], evicted */
	san_regcache_destroy(rc);
	REQUIRE_EQ(fk.ndereg, 5); /* and its [10..13] */
	REQUIRE_EQ(fk.bad_dereg, 0);
	REQUIRE_EQ(fk.live, 3);
	fake_free_records();
}
END_TEST

START_TEST(test_destroy)
{
	struct san_regcache *rc = fake_cache(8, 64 * PG);
	struct san_regcache_entry *e;

	touch(rc, PA(1), 1);
	touch(rc, PA(2), 5 * PG);
	e = get(rc, PA(30), 1, RD);
	san_regcache_invalidate(rc, P(30), 1); /* detached, its reference dropped just below */
	REQUIRE_EQ(san_regcache_release(rc, e), 0);
	touch(rc, PA(30), 1);
	REQUIRE_EQ(fk.ndereg, 1);
	REQUIRE_EQ(fk.live, 3);
	fake_done(rc); /* deregisters the 3 cached ones */
	REQUIRE_EQ(fk.ndereg, 4);
}
END_TEST

/* ---- single-threaded random walk: the books against the fake ----------------------------- */

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return unit_rand(s) % n;
}

#define WALK_PAGES 48
#define WALK_HELD 6

START_TEST(test_random_walk)
{
	struct san_regcache *rc = fake_cache(12, 20 * PG);
	struct san_regcache_entry *held[WALK_HELD] = { 0 };
	/* per page: registrations made before this id are stale there (invalidated since) */
	uint64_t valid_from[WALK_PAGES] = { 0 };
	uint64_t seed = 42 + (uint64_t)_i;
	unsigned long hits = 0, refusals = 0, invals = 0;
	struct san_regcache_stats s;
	int step, i;

	for (step = 0; step < 20000; step++) {
		uint64_t op = rnd_below(&seed, 10);
		uintptr_t a = PA(rnd_below(&seed, WALK_PAGES - 8)) + rnd_below(&seed, PG);
		size_t len = 1 + rnd_below(&seed, 6 * PG);

		if (op < 6) {
			struct san_regcache_entry *e;
			unsigned int nreg0 = fk.nreg;
			int r;

			if (rnd_below(&seed, 20) == 0) {
				fk.fail_err = EPERM;
				fk.fail_count = 1;
			}
			r = san_regcache_lookup(rc, (void *)a, len, RD, &e);
			fk.fail_count = 0;
			if (r) {
				REQUIRE(r == -EPERM || r == -ENOMEM);
				REQUIRE_EQ(fk.nreg, nreg0);
				refusals++;
				continue;
			}
			REQUIRE(e->start <= a && e->end >= a + len);
			REQUIRE(mr_of(e)->live);
			/* never a registration older than an invalidate of one of its pages */
			for (uintptr_t p = (a - BASE) / PG; p <= (a + len - 1 - BASE) / PG; p++)
				REQUIRE(mr_of(e)->id >= valid_from[p]);
			hits += fk.nreg == nreg0;
			i = (int)rnd_below(&seed, WALK_HELD);
			if (held[i])
				REQUIRE_EQ(san_regcache_release(rc, held[i]), 0);
			held[i] = e;
		} else if (op < 8) {
			i = (int)rnd_below(&seed, WALK_HELD);
			if (held[i]) {
				REQUIRE_EQ(san_regcache_release(rc, held[i]), 0);
				held[i] = NULL;
			}
		} else {
			uintptr_t p;

			san_regcache_invalidate(rc, (void *)a, len);
			for (p = (a - BASE) / PG; p <= (a + len - 1 - BASE) / PG; p++)
				valid_from[p] = fk.nreg + 1;
			invals++;
		}
		/* the books: exactly what the fake holds, within the limits, none in use lost */
		s = stats(rc);
		REQUIRE_EQ(s.registrations, fk.live);
		REQUIRE_EQ(s.registered_bytes, fk.live_bytes);
		REQUIRE(s.registrations <= 12);
		REQUIRE(s.registered_bytes <= 20 * PG);
		REQUIRE(s.entries <= s.registrations);
		REQUIRE_EQ(fk.bad_dereg, 0);
		for (i = 0; i < WALK_HELD; i++)
			REQUIRE(!held[i] || mr_of(held[i])->live);
	}
	for (i = 0; i < WALK_HELD; i++)
		if (held[i])
			REQUIRE_EQ(san_regcache_release(rc, held[i]), 0);
	s = stats(rc);
	REQUIRE(hits > 100);
	REQUIRE(refusals > 10);
	REQUIRE(s.evictions > 100);
	REQUIRE(s.invalidations > 100);
	REQUIRE(invals > 100);
	fake_done(rc);
}
END_TEST

/* ---- threads ------------------------------------------------------------------------------- */

/*
 * 4 threads look up, hold, release and invalidate random ranges of 64 pages. The property: a
 * lookup that starts after an invalidate of page p returned is never served by a registration
 * that pinned p before that invalidate started.
 *
 * In the real world "pinned before the change" is ordered by the kernel's page-table locks;
 * here pt_mu plays that part: the fake register reads pt_clock under it (the pin), an
 * invalidator bumps pt_clock under it (the change), then calls san_regcache_invalidate, then
 * publishes the stamp in done_inval[] for the pages. A lookup snapshots done_inval[] for its
 * pages first; the entry it gets must have clock >= each snapshot.
 */
#define MT_THREADS 4
#define MT_OPS 25000
#define MT_PAGES 64

static uint64_t done_inval[MT_PAGES];
static pthread_mutex_t mt_err_mu = PTHREAD_MUTEX_INITIALIZER;
static char mt_err[256];
static int mt_nerr;

struct mt_counts {
	unsigned long lookups, refused, invals;
};

#define MT_FAIL(...)                                                   \
	do {                                                           \
		pthread_mutex_lock(&mt_err_mu);                        \
		if (!mt_nerr++)                                        \
			snprintf(mt_err, sizeof(mt_err), __VA_ARGS__); \
		pthread_mutex_unlock(&mt_err_mu);                      \
	} while (0)

static void mt_release(struct san_regcache *rc, struct san_regcache_entry *e)
{
	__atomic_fetch_sub(&mr_of(e)->holders, 1, __ATOMIC_RELEASE);
	if (san_regcache_release(rc, e))
		MT_FAIL("release refused");
}

static void *mt_worker(void *arg)
{
	struct mt_counts *cnt = arg;
	struct san_regcache *rc = fk.rc;
	struct san_regcache_entry *held[3] = { 0 };
	uint64_t seed = (uint64_t)(uintptr_t)arg * 7919;
	int op, i;

	for (op = 0; op < MT_OPS && !__atomic_load_n(&mt_nerr, __ATOMIC_RELAXED); op++) {
		uint64_t k = rnd_below(&seed, 10);
		uintptr_t a = PA(rnd_below(&seed, MT_PAGES - 6)) + rnd_below(&seed, PG);
		size_t len = 1 + rnd_below(&seed, 5 * PG);
		uintptr_t p0 = (a - BASE) / PG, p1 = (a + len - 1 - BASE) / PG, p;

		if (k < 6) {
			static const unsigned int acc[] = { RD, WR, RD | WR };
			unsigned int want = acc[rnd_below(&seed, 3)];
			uint64_t snap[MT_PAGES];
			struct san_regcache_entry *e;
			struct fake_mr *m;
			int r;

			for (p = p0; p <= p1; p++)
				snap[p] = __atomic_load_n(&done_inval[p], __ATOMIC_ACQUIRE);
			tl_fail_next = rnd_below(&seed, 50) == 0;
			r = san_regcache_lookup(rc, (void *)a, len, want, &e);
			tl_fail_next = 0;
			cnt->lookups++;
			if (r) {
				if (r != -ENOMEM)
					MT_FAIL("lookup: %d", r);
				cnt->refused++;
				continue;
			}
			m = mr_of(e);
			__atomic_fetch_add(&m->holders, 1, __ATOMIC_ACQUIRE);
			if (e->start > a || e->end < a + len || (e->access & want) != want ||
			    m->start != e->start || m->end != e->end)
				MT_FAIL("entry [%#" PRIxPTR ", %#" PRIxPTR ") for %#" PRIxPTR
					" + %zu",
					e->start, e->end, a, len);
			if (!__atomic_load_n(&m->live, __ATOMIC_RELAXED))
				MT_FAIL("entry %" PRIu64 " handed out deregistered", m->id);
			for (p = p0; p <= p1; p++)
				if (m->clock < snap[p])
					MT_FAIL("page %" PRIuPTR ": registration %" PRIu64
						" (clock %" PRIu64 ") older than a finished "
						"invalidate (clock %" PRIu64 ")",
						p, m->id, m->clock, snap[p]);
			i = (int)rnd_below(&seed, 3);
			if (held[i])
				mt_release(rc, held[i]);
			held[i] = e;
		} else if (k < 8) {
			i = (int)rnd_below(&seed, 3);
			if (held[i]) {
				mt_release(rc, held[i]);
				held[i] = NULL;
			}
		} else {
			uint64_t c;

			pthread_mutex_lock(&pt_mu);
			c = ++pt_clock;
			pthread_mutex_unlock(&pt_mu);
			san_regcache_invalidate(rc, (void *)a, len);
			for (p = p0; p <= p1; p++) {
				uint64_t old = __atomic_load_n(&done_inval[p], __ATOMIC_RELAXED);

				while (old < c && !__atomic_compare_exchange_n(
							  &done_inval[p], &old, c, false,
							  __ATOMIC_RELEASE, __ATOMIC_RELAXED))
					;
			}
			cnt->invals++;
		}
		if (rnd_below(&seed, 64) == 0)
			sched_yield(); /* shuffle the interleavings a little more */
	}
	for (i = 0; i < 3; i++)
		if (held[i])
			mt_release(rc, held[i]);
	return NULL;
}

START_TEST(test_threads)
{
	struct san_regcache *rc = fake_cache(24, 40 * PG);
	struct mt_counts cnt[MT_THREADS];
	pthread_t th[MT_THREADS];
	unsigned long lookups = 0, refused = 0, invals = 0;
	struct san_regcache_stats s;
	int i;

	memset(cnt, 0, sizeof(cnt));
	memset(done_inval, 0, sizeof(done_inval));
	pt_clock = 0;
	mt_nerr = 0;
	for (i = 0; i < MT_THREADS; i++)
		REQUIRE_EQ(pthread_create(&th[i], NULL, mt_worker, &cnt[i]), 0);
	for (i = 0; i < MT_THREADS; i++)
		REQUIRE_EQ(pthread_join(th[i], NULL), 0);
	ck_assert_msg(mt_nerr == 0, "%d failures, first: %s", mt_nerr, mt_err);
	for (i = 0; i < MT_THREADS; i++) {
		lookups += cnt[i].lookups;
		refused += cnt[i].refused;
		invals += cnt[i].invals;
	}

	s = stats(rc);
	REQUIRE_EQ(fk.bad_dereg, 0);
	REQUIRE_EQ(s.registrations, fk.live);
	REQUIRE_EQ(s.registered_bytes, fk.live_bytes);
	REQUIRE_EQ(s.registrations, s.entries); /* nothing held: every one alive is cached */
	REQUIRE_EQ(s.hits + s.misses, lookups);
	REQUIRE_EQ(fk.reg_calls, s.misses - s.limit_failures);
	/* the run reached the interesting states */
	REQUIRE(s.hits > 1000);
	REQUIRE(s.misses > 1000);
	REQUIRE(s.evictions > 100);
	REQUIRE(s.invalidations > 100);
	REQUIRE(s.reg_failures > 10);
	REQUIRE(invals > 1000);
	REQUIRE_EQ(refused, s.limit_failures + s.reg_failures);
	REQUIRE(s.limit_failures > 0);

	/* one invalidate of everything empties it; destroy has nothing left to do */
	san_regcache_invalidate(rc, NULL, SIZE_MAX);
	s = stats(rc);
	REQUIRE_EQ(s.registrations, 0);
	REQUIRE_EQ(s.registered_bytes, 0);
	REQUIRE_EQ(fk.live, 0);
	fake_done(rc);
}
END_TEST

Suite *make_regcache_suite(void)
{
	Suite *s = suite_create("regcache");
	TCase *tc = tcase_create("regcache");
	TCase *tm = tcase_create("random");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_hit_miss);
	tcase_add_test(tc, test_span_pages);
	tcase_add_test(tc, test_access);
	tcase_add_test(tc, test_overlapping_entries);
	tcase_add_test(tc, test_invalidate_in_use);
	tcase_add_loop_test(tc, test_invalidate_ranges, 0,
			    sizeof(inval_rows) / sizeof(inval_rows[0]));
	tcase_add_test(tc, test_invalidate_while_registering);
	tcase_add_test(tc, test_callbacks_reenter);
	tcase_add_test(tc, test_invalidate_empty_lockless);
	tcase_add_test(tc, test_evict_by_count);
	tcase_add_test(tc, test_evict_by_bytes);
	tcase_add_test(tc, test_limit_too_small);
	tcase_add_test(tc, test_bad_ranges);
	tcase_add_loop_test(tc, test_reg_failure, 0, sizeof(reg_errors) / sizeof(reg_errors[0]));
	tcase_add_test(tc, test_reg_failure_after_eviction);
	tcase_add_test(tc, test_fork_child);
	tcase_add_test(tc, test_destroy);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tm, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_loop_test(tm, test_random_walk, 0, 4);
	tcase_add_test(tm, test_threads);
	suite_add_tcase(s, tm);
	return s;
}
