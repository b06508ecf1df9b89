/* tests/unit: core/san_shm_switch — the switch-over word: states, a lying peer, races, a model. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/san_shm_switch.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

/* Every transition a correct reader and sender make, one after the other. */
START_TEST(test_states)
{
	struct san_shm_ring_shared sh;
	uint64_t x = 0;

	memset(&sh, 0, sizeof(sh));
	/* A reader in and out; the sender kept out meanwhile, in afterwards. */
	REQUIRE(!san_shm_sw_committed(&sh, &x));
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), 0);
	REQUIRE(!san_shm_sw_committed(&sh, &x));
	REQUIRE_EQ(atomic_load(&sh.sw), SAN_SHM_SW_READING);
	REQUIRE_EQ(san_shm_sw_commit(&sh, 10, 3), -EBUSY);
	REQUIRE_EQ(san_shm_sw_read_end(&sh), 0);
	REQUIRE_EQ(atomic_load(&sh.sw), SAN_SHM_SW_OPEN);
	REQUIRE_EQ(san_shm_sw_commit(&sh, SAN_SHM_SW_X_MAX + 1, 1), -EINVAL);
	REQUIRE_EQ(san_shm_sw_commit(&sh, 10, 1), 0);
	REQUIRE_EQ(san_shm_sw_commit(&sh, 11, 1), -EALREADY);
	/* A look learns it too; the next receive learns X and holds nothing, as a late withdrawal. */
	REQUIRE(san_shm_sw_committed(&sh, &x));
	REQUIRE_EQ(x, 10);
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), 1);
	REQUIRE_EQ(x, 10);
	x = 0;
	REQUIRE_EQ(san_shm_sw_withdraw(&sh, &x), 1);
	REQUIRE_EQ(x, 10);
	REQUIRE_EQ(atomic_load(&sh.sw), SAN_SHM_SW_COMMITTED | 10);

	/* Withdrawn first: the sender stays on TCP, the reader too; withdrawing again is no-op. */
	memset(&sh, 0, sizeof(sh));
	REQUIRE_EQ(san_shm_sw_withdraw(&sh, &x), 0);
	REQUIRE_EQ(san_shm_sw_withdraw(&sh, &x), 0);
	REQUIRE_EQ(san_shm_sw_commit(&sh, 5, 1), -ECANCELED);
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), -ECANCELED);
	REQUIRE_EQ(atomic_load(&sh.sw), SAN_SHM_SW_WITHDRAWN);

	/* X 0 (nothing sent on TCP before the switch) and the largest X. */
	memset(&sh, 0, sizeof(sh));
	REQUIRE_EQ(san_shm_sw_commit(&sh, 0, 1), 0);
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), 1);
	REQUIRE_EQ(x, 0);
	memset(&sh, 0, sizeof(sh));
	REQUIRE_EQ(san_shm_sw_commit(&sh, SAN_SHM_SW_X_MAX, 1), 0);
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), 1);
	REQUIRE_EQ(x, SAN_SHM_SW_X_MAX);
}
END_TEST

/* A peer writes what it likes into the word: every call says -EPROTO, none believes it. */
START_TEST(test_lying_peer)
{
	static const uint64_t junk[] = { 2, 1ull << 61, (1ull << 63) | 2, ~0ull,
					 (3ull << 62) | 7, SAN_SHM_SW_READING };
	struct san_shm_ring_shared sh;
	uint64_t x = 77;

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		memset(&sh, 0, sizeof(sh));
		atomic_store(&sh.sw, junk[i]);
		/* (READING found by the one reader: the peer wrote it) */
		REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), -EPROTO);
		REQUIRE_EQ(san_shm_sw_withdraw(&sh, &x), -EPROTO);
		if (junk[i] != SAN_SHM_SW_READING)
			REQUIRE_EQ(san_shm_sw_commit(&sh, 1, 5), -EPROTO);
		REQUIRE_EQ(x, 77);
		REQUIRE_EQ(atomic_load(&sh.sw), junk[i]);
	}
	/* The word changed under our READING: its end says so (and leaves the lie alone). */
	memset(&sh, 0, sizeof(sh));
	REQUIRE_EQ(san_shm_sw_read_begin(&sh, &x), 0);
	atomic_store(&sh.sw, SAN_SHM_SW_COMMITTED | 3);
	REQUIRE_EQ(san_shm_sw_read_end(&sh), -EPROTO);
	REQUIRE_EQ(atomic_load(&sh.sw), SAN_SHM_SW_COMMITTED | 3);
}
END_TEST

/*
 * Two threads: a reader that enters and leaves as fast as it can, and looks, while inside,
 * at whether the sender has written its MARK; a sender that commits (retrying while kept
 * out) and then writes its MARK. Inside READING the MARK must never be seen, and the
 * reader's first look after the commit must find the sender's X.
 */
struct race {
	struct san_shm_ring_shared sh;
	_Atomic bool mark;    /* the sender's MARK is "on TCP" */
	_Atomic bool stop;
	_Atomic int entries;  /* receives the reader has entered */
	uint64_t x;	      /* the X the sender committed */
	int seen_inside;      /* MARKs the reader saw while holding READING (must stay 0) */
	int wrong_x;	      /* commits the reader found with another X (must stay 0) */
	int reader_errors;    /* calls that returned what no correct pair can produce */
};

/*
 * Rounds of the race: each a thread and a few hundred swaps. A loaded 2-CPU machine gives the
 * two threads one CPU at times, so no more than this (a commit that overwrites READING failed
 * the test within the first rounds, every run of 20).
 */
#define RACE_ROUNDS 500

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint64_t x;

	while (!atomic_load(&r->stop)) {
		int b = san_shm_sw_read_begin(&r->sh, &x);

		if (b == 1) {
			if (x != r->x)
				r->wrong_x++;
			break;
		}
		if (b != 0) {
			r->reader_errors++;
			break;
		}
		atomic_fetch_add(&r->entries, 1);
		if (atomic_load(&r->mark))
			r->seen_inside++;
		if (san_shm_sw_read_end(&r->sh) != 0) {
			r->reader_errors++;
			break;
		}
	}
	return NULL;
}

START_TEST(test_race)
{
	int busy = 0, committed = 0;

	for (int round = 0; round < RACE_ROUNDS; round++) {
		struct race r;
		pthread_t t;
		int c;

		memset(&r, 0, sizeof(r));
		r.x = (uint64_t)round * 1000 + 1;
		REQUIRE_EQ(pthread_create(&t, NULL, race_reader, &r), 0);
		while (atomic_load(&r.entries) < 1 + round % 3)
			sched_yield(); /* the reader in its loop: the commit meets it there */
		for (;;) {
			c = san_shm_sw_commit(&r.sh, r.x, 4);
			if (c != -EBUSY)
				break;
			busy++;
		}
		REQUIRE_EQ(c, 0);
		committed++;
		atomic_store(&r.mark, true);
		atomic_store(&r.stop, true);
		REQUIRE_EQ(pthread_join(t, NULL), 0);
		REQUIRE_EQ(r.seen_inside, 0);
		REQUIRE_EQ(r.wrong_x, 0);
		REQUIRE_EQ(r.reader_errors, 0);
	}
	REQUIRE_EQ(committed, RACE_ROUNDS);
	(void)busy; /* how often the reader kept the sender out: timing, not a result */
}
END_TEST

/*
 * Every interleaving of one sender and one reader of a direction, over the real calls: the
 * sender writes up to MODEL_BYTES bytes on TCP, commits at its count (once kept out, it may
 * write more and try again), then writes its MARK; the reader may withdraw before any
 * receive, receives under READING any number of the bytes there (the MARK included, if
 * there: that is the failure looked for), and once it knows X reads up to it, then the MARK.
 * In every end state nothing is left: each byte before X delivered once, the MARK taken as a
 * MARK, and no MARK anywhere in a withdrawn direction.
 */
#define MODEL_BYTES 3

struct mstate {
	uint8_t sent;	  /* bytes the sender wrote on TCP */
	uint8_t sender;	  /* 0 on TCP, 1 committed, 2 MARK written, 3 withdrawn under it */
	uint8_t got;	  /* bytes the reader delivered */
	uint8_t held;	  /* the reader holds READING */
	uint8_t knows;	  /* the reader knows X (then x is it) */
	uint8_t x;
	uint8_t marked;	  /* the reader took the MARK */
	uint8_t withdrew; /* the reader withdrew */
	uint64_t word;
};

struct model {
	long states, ends;
	int bad_mark, bad_end, bad_call;
	uint8_t seen[1 << 16];
};

static unsigned int mkey(const struct mstate *m)
{
	unsigned int w = m->word == SAN_SHM_SW_OPEN	   ? 0
			 : m->word == SAN_SHM_SW_READING   ? 1
			 : m->word == SAN_SHM_SW_WITHDRAWN ? 2
							   : 3;

	return ((((((((m->sent * 4u + m->sender) * 4 + m->got) * 2 + m->held) * 2 + m->knows) * 4 +
		    m->x) * 2 + m->marked) * 2 + m->withdrew) * 4 + w) & 0xffff;
}

static void mstep(struct model *md, struct mstate m);

static void mcall_reader_begin(struct model *md, struct mstate m)
{
	struct san_shm_ring_shared sh;
	uint64_t x = 0;
	int r;

	atomic_store(&sh.sw, m.word);
	r = m.withdrew ? san_shm_sw_withdraw(&sh, &x) : san_shm_sw_read_begin(&sh, &x);
	m.word = atomic_load(&sh.sw);
	if (r == 0 && !m.withdrew)
		m.held = 1;
	else if (r == 1) {
		m.knows = 1;
		m.x = (uint8_t)x;
	} else if (r != 0 && r != -ECANCELED) {
		md->bad_call++;
		return;
	}
	mstep(md, m);
}

static void mstep(struct model *md, struct mstate m)
{
	unsigned int k = mkey(&m);
	bool any = false;

	if (md->seen[k])
		return;
	md->seen[k] = 1;
	md->states++;
	/* ---- the sender ---- */
	if ((m.sender == 0 || m.sender == 3) && m.sent < MODEL_BYTES) {
		struct mstate n = m;

		n.sent++;
		any = true;
		mstep(md, n);
	}
	if (m.sender == 0) {
		struct san_shm_ring_shared sh;
		struct mstate n = m;
		int r;

		atomic_store(&sh.sw, m.word);
		r = san_shm_sw_commit(&sh, m.sent, 1);
		n.word = atomic_load(&sh.sw);
		if (r == 0)
			n.sender = 1;
		else if (r == -ECANCELED)
			n.sender = 3;
		else if (r != -EBUSY)
			md->bad_call++;
		if (r != -EBUSY) {
			any = true;
			mstep(md, n);
		}
	}
	if (m.sender == 1) {
		struct mstate n = m;

		n.sender = 2;
		any = true;
		mstep(md, n);
	}
	/* ---- the reader ---- */
	if (!m.held && !m.knows && !(m.withdrew && m.word == SAN_SHM_SW_WITHDRAWN)) {
		struct mstate n = m;

		any = true;
		mcall_reader_begin(md, n); /* enter a receive */
		n.withdrew = 1;
		mcall_reader_begin(md, n); /* or let go */
	}
	if (m.held || (m.withdrew && !m.knows && m.word == SAN_SHM_SW_WITHDRAWN)) {
		/* a receive of 1.. the bytes there, the MARK counted as one more */
		int there = m.sent - m.got + (m.sender == 2 ? 1 : 0);

		for (int n_ = 1; n_ <= there; n_++) {
			struct mstate n = m;

			if (m.got + n_ > m.sent) {
				md->bad_mark++; /* a MARK byte handed to the application */
				continue;
			}
			n.got = (uint8_t)(m.got + n_);
			any = true;
			mstep(md, n);
		}
	}
	if (m.held) {
		struct san_shm_ring_shared sh;
		struct mstate n = m;

		atomic_store(&sh.sw, m.word);
		if (san_shm_sw_read_end(&sh) != 0)
			md->bad_call++;
		n.word = atomic_load(&sh.sw);
		n.held = 0;
		any = true;
		mstep(md, n);
	}
	if (m.knows && m.got < m.x) {
		struct mstate n = m;

		n.got++;
		any = true;
		mstep(md, n);
	}
	if (m.knows && m.got == m.x && m.sender == 2 && !m.marked) {
		struct mstate n = m;

		n.marked = 1;
		any = true;
		mstep(md, n);
	}
	if (any)
		return;
	md->ends++;
	/* Ended: committed means all of [0, X) delivered and the MARK taken; else all bytes. */
	if (m.sender == 2 ? !(m.knows && m.x == m.sent && m.got == m.x && m.marked)
			  : (m.sender != 3 && !m.withdrew) || m.got != m.sent || m.knows)
		md->bad_end++;
}

START_TEST(test_model)
{
	static struct model md;
	struct mstate m;

	memset(&md, 0, sizeof(md));
	memset(&m, 0, sizeof(m));
	mstep(&md, m);
	REQUIRE_EQ(md.bad_call, 0);
	REQUIRE_EQ(md.bad_mark, 0);
	REQUIRE_EQ(md.bad_end, 0);
	/* the model reached the cases it is for: several states, several ends */
	REQUIRE(md.states > 100);
	REQUIRE(md.ends >= 2);
}
END_TEST

Suite *make_shm_switch_suite(void)
{
	Suite *s = suite_create("shm_switch");
	TCase *tc = tcase_create("word");
	TCase *tr = tcase_create("race");

	tcase_add_test(tc, test_states);
	tcase_add_test(tc, test_lying_peer);
	tcase_add_test(tc, test_model);
	suite_add_tcase(s, tc);
	/* threads that spin: a machine loaded by a build may give them one CPU for a while */
	tcase_set_timeout(tr, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_test(tr, test_race);
	suite_add_tcase(s, tr);
	return s;
}
