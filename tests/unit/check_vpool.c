/* tests/unit: core/san_vpool — slot layout, send slots in any order, receive slots, bad ids. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_vpool.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_rand.h"
#include "tests/unit/unit_require.h"


#define SLOT 256u
#define NRECV 8u
#define NSEND 5u
#define NSLOTS (NRECV + NSEND)

static uint8_t area[NSLOTS * SLOT + 64];

static void pool(struct san_vpool *p)
{
	REQUIRE_EQ(san_vpool_init(p, area, NSLOTS * SLOT, SLOT, NRECV, NSEND), 0);
}

/* ---- layout --------------------------------------------------------------------------------- */

START_TEST(test_init_rejects)
{
	struct san_vpool p;

	REQUIRE_EQ(san_vpool_init(&p, NULL, sizeof(area), SLOT, 1, 1), -EINVAL);
	REQUIRE_EQ(san_vpool_init(&p, area, sizeof(area), 0, 1, 1), -EINVAL);
	REQUIRE_EQ(san_vpool_init(&p, area, sizeof(area), SLOT, 0, 0), -EINVAL);
	/* one byte short */
	REQUIRE_EQ(san_vpool_init(&p, area, NSLOTS * SLOT - 1, SLOT, NRECV, NSEND), -EINVAL);
	/* slots * size overflowing */
	REQUIRE_EQ(san_vpool_init(&p, area, SIZE_MAX, SIZE_MAX / 2, 2, 2), -EINVAL);
	REQUIRE_EQ(san_vpool_init(&p, area, SIZE_MAX, SLOT, UINT32_MAX, UINT32_MAX), -EINVAL);
	/* a failed init leaves a pool that refuses everything, and fini is harmless */
	REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
	REQUIRE(san_vpool_addr(&p, 0) == NULL);
	REQUIRE_EQ(san_vpool_index(&p, area), -EINVAL);
	REQUIRE_EQ(san_vpool_send_put(&p, 0), -EINVAL);
	REQUIRE_EQ(san_vpool_recv_take(&p, 0), -EINVAL);
	san_vpool_fini(&p);

	/* exactly enough, only receive slots, only send slots */
	REQUIRE_EQ(san_vpool_init(&p, area, NSLOTS * SLOT, SLOT, NRECV, NSEND), 0);
	san_vpool_fini(&p);
	REQUIRE_EQ(san_vpool_init(&p, area, sizeof(area), SLOT, NSLOTS, 0), 0);
	REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
	san_vpool_fini(&p);
	REQUIRE_EQ(san_vpool_init(&p, area, sizeof(area), SLOT, 0, NSLOTS), 0);
	REQUIRE_EQ(san_vpool_recv_take(&p, 0), -EINVAL);
	REQUIRE_EQ(san_vpool_send_get(&p), 0);
	san_vpool_fini(&p);
}
END_TEST

START_TEST(test_layout)
{
	struct san_vpool p;
	uint64_t i;

	pool(&p);
	REQUIRE_EQ(san_vpool_nslots(&p), NSLOTS);
	for (i = 0; i < NSLOTS; i++) {
		uint8_t *a = san_vpool_addr(&p, i);

		REQUIRE(a == area + i * SLOT);
		REQUIRE_EQ(san_vpool_index(&p, a), i);
		REQUIRE_EQ(san_vpool_index(&p, a + 1), i);
		REQUIRE_EQ(san_vpool_index(&p, a + SLOT - 1), i);
		REQUIRE(san_vpool_is_recv(&p, i) == (i < NRECV));
		REQUIRE(san_vpool_is_send(&p, i) == (i >= NRECV));
		REQUIRE_EQ(san_vpool_state(&p, i),
			   i < NRECV ? SAN_VPOOL_RECV_POSTED : SAN_VPOOL_SEND_FREE);
	}
	REQUIRE_EQ(p.recv_posted, NRECV);
	REQUIRE_EQ(p.send_nfree, NSEND);
	/* outside every slot: before, just past the last, far away, NULL */
	REQUIRE(san_vpool_addr(&p, NSLOTS) == NULL);
	REQUIRE(san_vpool_addr(&p, UINT64_MAX) == NULL);
	REQUIRE(san_vpool_addr(&p, (uint64_t)1 << 32) == NULL);
	REQUIRE_EQ(san_vpool_index(&p, area + NSLOTS * SLOT), -EINVAL);
	REQUIRE_EQ(san_vpool_index(&p, (void *)((uintptr_t)area - 1)), -EINVAL);
	REQUIRE_EQ(san_vpool_index(&p, NULL), -EINVAL);
	REQUIRE_EQ(san_vpool_index(&p, (void *)UINTPTR_MAX), -EINVAL);
	REQUIRE(!san_vpool_is_send(&p, NSLOTS));
	REQUIRE(!san_vpool_is_recv(&p, NSLOTS));
	san_vpool_fini(&p);
}
END_TEST

/* ---- send slots ----------------------------------------------------------------------------- */

START_TEST(test_send_exhaustion)
{
	struct san_vpool p;
	bool seen[NSLOTS] = { false };
	int64_t idx;
	unsigned int i;

	pool(&p);
	for (i = 0; i < NSEND; i++) {
		idx = san_vpool_send_get(&p);
		REQUIRE(idx >= 0);
		REQUIRE(san_vpool_is_send(&p, (uint64_t)idx));
		REQUIRE(!seen[idx]);
		seen[idx] = true;
		REQUIRE_EQ(san_vpool_state(&p, (uint64_t)idx), SAN_VPOOL_SEND_BUSY);
	}
	REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
	REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
	REQUIRE_EQ(san_vpool_send_put(&p, NRECV + 2), 0);
	REQUIRE_EQ(san_vpool_send_get(&p), NRECV + 2); /* the one just given back */
	REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
	/* receive slots were never handed out for sending */
	for (i = 0; i < NRECV; i++)
		REQUIRE_EQ(san_vpool_state(&p, i), SAN_VPOOL_RECV_POSTED);
	san_vpool_fini(&p);
}
END_TEST

/* Completions in any order: every permutation of the puts gives every slot back exactly once. */
START_TEST(test_send_out_of_order)
{
	static const unsigned int orders[][NSEND] = {
		{ 0, 1, 2, 3, 4 },
		{ 4, 3, 2, 1, 0 },
		{ 2, 0, 4, 1, 3 },
		{ 1, 4, 0, 3, 2 },
	};
	struct san_vpool p;
	int64_t got[NSEND];
	unsigned int o, i, round;

	pool(&p);
	for (round = 0; round < 3; round++) {
		for (o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
			bool seen[NSLOTS] = { false };

			for (i = 0; i < NSEND; i++)
				got[i] = san_vpool_send_get(&p);
			REQUIRE_EQ(san_vpool_send_get(&p), -EAGAIN);
			for (i = 0; i < NSEND; i++) {
				REQUIRE(got[i] >= 0);
				REQUIRE(!seen[got[i]]);
				seen[got[i]] = true;
			}
			for (i = 0; i < NSEND; i++) {
				REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)got[orders[o][i]]), 0);
				REQUIRE_EQ(p.send_nfree, i + 1);
			}
		}
	}
	/* part-way: take 3, give back the middle one, take again */
	for (i = 0; i < 3; i++)
		got[i] = san_vpool_send_get(&p);
	REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)got[1]), 0);
	REQUIRE_EQ(san_vpool_send_get(&p), got[1]);
	san_vpool_fini(&p);
}
END_TEST

START_TEST(test_send_bad_put)
{
	struct san_vpool p;
	int64_t a, b;

	pool(&p);
	a = san_vpool_send_get(&p);
	b = san_vpool_send_get(&p);
	REQUIRE(a >= 0 && b >= 0);
	REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)a), 0);
	/* the same completion twice */
	REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)a), -EALREADY);
	/* a send slot never taken */
	REQUIRE_EQ(san_vpool_send_put(&p, NSLOTS - 1), -EALREADY);
	/* a receive slot, out of range, garbage */
	REQUIRE_EQ(san_vpool_send_put(&p, 0), -EINVAL);
	REQUIRE_EQ(san_vpool_send_put(&p, NRECV - 1), -EINVAL);
	REQUIRE_EQ(san_vpool_send_put(&p, NSLOTS), -EINVAL);
	REQUIRE_EQ(san_vpool_send_put(&p, UINT64_MAX), -EINVAL);
	REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)NRECV << 32), -EINVAL);
	/* none of it changed the books: b is still out, the rest free */
	REQUIRE_EQ(p.send_nfree, NSEND - 1);
	REQUIRE_EQ(san_vpool_state(&p, (uint64_t)b), SAN_VPOOL_SEND_BUSY);
	REQUIRE_EQ(p.recv_posted, NRECV);
	REQUIRE_EQ(san_vpool_send_put(&p, (uint64_t)b), 0);
	REQUIRE_EQ(p.send_nfree, NSEND);
	san_vpool_fini(&p);
}
END_TEST

/* ---- receive slots -------------------------------------------------------------------------- */

START_TEST(test_recv_cycle)
{
	static const unsigned int order[NRECV] = { 3, 0, 7, 1, 6, 2, 5, 4 };
	struct san_vpool p;
	unsigned int i;

	pool(&p);
	for (i = 0; i < NRECV; i++) {
		REQUIRE_EQ(san_vpool_recv_take(&p, order[i]), 0);
		REQUIRE_EQ(san_vpool_state(&p, order[i]), SAN_VPOOL_RECV_HELD);
		REQUIRE_EQ(p.recv_posted, NRECV - 1 - i);
	}
	/* re-posted in another order, held ones stay held meanwhile */
	for (i = 0; i < NRECV; i++) {
		REQUIRE_EQ(san_vpool_recv_repost(&p, NRECV - 1 - i), 0);
		REQUIRE_EQ(san_vpool_state(&p, NRECV - 1 - i), SAN_VPOOL_RECV_POSTED);
		if (i + 1 < NRECV)
			REQUIRE_EQ(san_vpool_state(&p, 0), SAN_VPOOL_RECV_HELD);
	}
	REQUIRE_EQ(p.recv_posted, NRECV);
	san_vpool_fini(&p);
}
END_TEST

START_TEST(test_recv_bad_ids)
{
	struct san_vpool p;

	pool(&p);
	/* repost of a slot that is posted (never completed) */
	REQUIRE_EQ(san_vpool_recv_repost(&p, 2), -EALREADY);
	REQUIRE_EQ(san_vpool_recv_take(&p, 2), 0);
	/* a second completion for the same post */
	REQUIRE_EQ(san_vpool_recv_take(&p, 2), -EALREADY);
	REQUIRE_EQ(san_vpool_recv_repost(&p, 2), 0);
	REQUIRE_EQ(san_vpool_recv_repost(&p, 2), -EALREADY);
	/* send slots and out of range */
	REQUIRE_EQ(san_vpool_recv_take(&p, NRECV), -EINVAL);
	REQUIRE_EQ(san_vpool_recv_take(&p, NSLOTS), -EINVAL);
	REQUIRE_EQ(san_vpool_recv_take(&p, UINT64_MAX), -EINVAL);
	REQUIRE_EQ(san_vpool_recv_repost(&p, NRECV + 1), -EINVAL);
	REQUIRE_EQ(san_vpool_recv_repost(&p, UINT64_MAX), -EINVAL);
	/* a send slot in use is not disturbed by a receive completion naming it */
	REQUIRE_EQ(san_vpool_send_get(&p), NRECV);
	REQUIRE_EQ(san_vpool_recv_take(&p, NRECV), -EINVAL);
	REQUIRE_EQ(san_vpool_state(&p, NRECV), SAN_VPOOL_SEND_BUSY);
	REQUIRE_EQ(p.recv_posted, NRECV);
	san_vpool_fini(&p);
}
END_TEST

/* ---- random walk against a model ---------------------------------------------------------- */

START_TEST(test_model)
{
	enum { R = 16, S = 24, N = R + S };
	static uint8_t big[N * 64];
	uint8_t model[N]; /* enum san_vpool_slot_state, as the pool should have it */
	uint64_t seed = 7, idx;
	unsigned long gets = 0, refused = 0, bad = 0;
	struct san_vpool p;
	int step, i, busy = 0;

	REQUIRE_EQ(san_vpool_init(&p, big, sizeof(big), 64, R, S), 0);
	for (i = 0; i < N; i++)
		model[i] = i < R ? SAN_VPOOL_RECV_POSTED : SAN_VPOOL_SEND_FREE;
	for (step = 0; step < 200000; step++) {
		uint64_t k = unit_rand(&seed) % 8;

		/* mostly valid ids, sometimes any, sometimes far out */
		idx = unit_rand(&seed) % (N + 4);
		if (unit_rand(&seed) % 50 == 0)
			idx = unit_rand(&seed);
		switch (k) {
		case 0:
		case 1: {
			int64_t got = san_vpool_send_get(&p);

			if (busy == S) {
				REQUIRE_EQ(got, -EAGAIN);
				refused++;
				break;
			}
			REQUIRE(got >= R && got < N);
			REQUIRE_EQ(model[got], SAN_VPOOL_SEND_FREE);
			model[got] = SAN_VPOOL_SEND_BUSY;
			busy++;
			gets++;
			break;
		}
		case 2:
		case 3: {
			int r = san_vpool_send_put(&p, idx);

			if (idx < R || idx >= N) {
				REQUIRE_EQ(r, -EINVAL);
			} else if (model[idx] != SAN_VPOOL_SEND_BUSY) {
				REQUIRE_EQ(r, -EALREADY);
			} else {
				REQUIRE_EQ(r, 0);
				model[idx] = SAN_VPOOL_SEND_FREE;
				busy--;
			}
			bad += r != 0;
			break;
		}
		case 4:
		case 5:
		case 6:
		case 7: {
			bool take = k < 6;
			int r = take ? san_vpool_recv_take(&p, idx)
				     : san_vpool_recv_repost(&p, idx);
			uint8_t from = take ? SAN_VPOOL_RECV_POSTED : SAN_VPOOL_RECV_HELD;

			if (idx >= R) {
				REQUIRE_EQ(r, -EINVAL);
			} else if (model[idx] != from) {
				REQUIRE_EQ(r, -EALREADY);
			} else {
				REQUIRE_EQ(r, 0);
				model[idx] = take ? SAN_VPOOL_RECV_HELD : SAN_VPOOL_RECV_POSTED;
			}
			bad += r != 0;
			break;
		}
		}
		REQUIRE_EQ(p.send_nfree, S - busy);
		if (step % 97 == 0) {
			unsigned int posted = 0;

			for (i = 0; i < N; i++) {
				REQUIRE_EQ(san_vpool_state(&p, (uint64_t)i), model[i]);
				posted += model[i] == SAN_VPOOL_RECV_POSTED;
			}
			REQUIRE_EQ(p.recv_posted, posted);
		}
	}
	REQUIRE(gets > 1000);
	REQUIRE(refused > 100);
	REQUIRE(bad > 1000);
	san_vpool_fini(&p);
}
END_TEST

Suite *make_vpool_suite(void)
{
	Suite *s = suite_create("vpool");
	TCase *tc = tcase_create("vpool");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_init_rejects);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_send_exhaustion);
	tcase_add_test(tc, test_send_out_of_order);
	tcase_add_test(tc, test_send_bad_put);
	tcase_add_test(tc, test_recv_cycle);
	tcase_add_test(tc, test_recv_bad_ids);
	tcase_add_test(tc, test_model);
	suite_add_tcase(s, tc);
	return s;
}
