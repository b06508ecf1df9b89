/* tests/unit: proto/san_ahead — the READ-ahead depth: its steps, and a pipeline simulation. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/san_ahead.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_rand.h"
#include "tests/unit/unit_require.h"

START_TEST(test_init)
{
	struct san_ahead a;

	san_ahead_init(&a, 8);
	REQUIRE_EQ(san_ahead_depth(&a), 1);
	REQUIRE_EQ(a.max, 8);
	san_ahead_init(&a, 0); /* taken as 1 */
	REQUIRE_EQ(a.max, 1);
	san_ahead_reached(&a, true);
	REQUIRE_EQ(san_ahead_depth(&a), 1);
}
END_TEST

START_TEST(test_steps)
{
	struct san_ahead a;

	san_ahead_init(&a, 4);
	/* every stall: one more, up to max */
	for (uint32_t want = 2; want <= 4; want++) {
		san_ahead_reached(&a, true);
		REQUIRE_EQ(san_ahead_depth(&a), want);
	}
	san_ahead_reached(&a, true);
	REQUIRE_EQ(san_ahead_depth(&a), 4);
	/* a calm run one short of SAN_AHEAD_CALM changes nothing, and a stall restarts it */
	for (uint32_t i = 0; i + 1 < SAN_AHEAD_CALM; i++)
		san_ahead_reached(&a, false);
	REQUIRE_EQ(san_ahead_depth(&a), 4);
	san_ahead_reached(&a, true);
	for (uint32_t i = 0; i + 1 < SAN_AHEAD_CALM; i++)
		san_ahead_reached(&a, false);
	REQUIRE_EQ(san_ahead_depth(&a), 4);
	/* the full run: one less; each further run another, never below 1 */
	san_ahead_reached(&a, false);
	REQUIRE_EQ(san_ahead_depth(&a), 3);
	for (uint32_t i = 0; i < 10 * SAN_AHEAD_CALM; i++)
		san_ahead_reached(&a, false);
	REQUIRE_EQ(san_ahead_depth(&a), 1);
	REQUIRE_EQ(a.stalls, 5);
	REQUIRE_EQ(a.reached, 5 + 2 * (SAN_AHEAD_CALM - 1) + 1 + 10 * SAN_AHEAD_CALM);
}
END_TEST

/*
 * The pipeline: a receiver far behind (every transfer waits in its ring from the start). The
 * application spends `cost` on each transfer; a transfer's bytes are usable `lat` (+- jitter)
 * after its READ was posted. READs ahead go out, up to the depth, whenever the application has
 * reached a transfer; one it reaches unposted is READ then, on demand. With no waiting the
 * application takes n x cost: efficiency is that over the time it took.
 */
struct asim_cfg {
	uint64_t lat, cost, jitter;
	uint32_t max, n;
};

struct asim_out {
	double eff;
	uint32_t final_depth, waits_late; /* waits in the second half */
};

static void asim_run(const struct asim_cfg *c, struct asim_out *o)
{
	static uint64_t posted_at[4096];
	struct san_ahead a;
	uint64_t now = 0, seed = 42;

	REQUIRE(c->n <= 4096);
	san_ahead_init(&a, c->max);
	*o = (struct asim_out){ 0 };
	for (uint32_t k = 0; k < c->n; k++)
		posted_at[k] = UINT64_MAX;
	for (uint32_t k = 0; k < c->n; k++) {
		uint64_t lat = c->lat + (c->jitter ? unit_rand(&seed) % (2 * c->jitter + 1) : 0) -
			       c->jitter;
		uint64_t ready = (posted_at[k] == UINT64_MAX ? now : posted_at[k]) + lat;
		bool waited = ready > now;

		if (k > 0) /* (the first was not queued behind another) */
			san_ahead_reached(&a, waited);
		if (waited && k >= c->n / 2)
			o->waits_late++;
		if (ready > now)
			now = ready;
		for (uint32_t j = k + 1; j < c->n && j <= k + san_ahead_depth(&a); j++)
			if (posted_at[j] == UINT64_MAX)
				posted_at[j] = now;
		now += c->cost;
	}
	o->eff = (double)c->n * (double)c->cost / (double)now;
	o->final_depth = san_ahead_depth(&a);
	fprintf(stderr,
		"ahead sim lat %5llu +-%3llu, cost %4llu (BDP %5.1f transfers), max %2u: depth "
		"%2u, "
		"efficiency %5.1f%%, waits in the second half %u of %u\n",
		(unsigned long long)c->lat, (unsigned long long)c->jitter,
		(unsigned long long)c->cost, (double)c->lat / (double)c->cost, c->max,
		o->final_depth, 100.0 * o->eff, o->waits_late, c->n - c->n / 2);
}

static const struct asim_cfg asim_cases[] = {
	{ 300, 100, 0, 8, 2000 },   /* BDP 3 */
	{ 1000, 130, 0, 8, 2000 },  /* 7.7 -> 8 */
	{ 50, 100, 0, 8, 2000 },    /* under one transfer: 1 */
	{ 600, 100, 120, 8, 2000 }, /* 6, +-20 % */
};

START_TEST(test_sim_settles)
{
	const struct asim_cfg *c = &asim_cases[_i];
	struct asim_cfg one = *c;
	uint32_t want = (uint32_t)((c->lat + c->jitter + c->cost - 1) / c->cost);
	struct asim_out o, o1;

	if (want < 1)
		want = 1;
	asim_run(c, &o);
	/* the smallest depth without waiting (jitter: its worst case), or one less when probing */
	REQUIRE(o.final_depth + 1 >= want && o.final_depth <= want);
	/* few waits once settled: about one per calm run that tries one less */
	REQUIRE(o.waits_late <= 3 * (c->n - c->n / 2) / SAN_AHEAD_CALM + 2);
	REQUIRE(o.eff >= 0.90);
	/* the control: one READ ahead, fixed, where the BDP is more than one */
	one.max = 1;
	asim_run(&one, &o1);
	if (want > 1)
		REQUIRE(o1.eff < 0.75 * o.eff);
}
END_TEST

/* A BDP beyond max: the depth sits at max and the application gets max transfers per latency. */
START_TEST(test_sim_max_bound)
{
	const struct asim_cfg c = { 5000, 100, 0, 8, 2000 };
	struct asim_out o;
	double bound = 8.0 * 100 / 5000; /* max x cost / lat */

	asim_run(&c, &o);
	REQUIRE_EQ(o.final_depth, 8);
	REQUIRE(o.eff >= bound * 0.9 && o.eff <= bound * 1.2);
}
END_TEST

Suite *make_ahead_suite(void)
{
	Suite *s = suite_create("ahead");
	TCase *tc = tcase_create("depth");

	tcase_add_test(tc, test_init);
	tcase_add_test(tc, test_steps);
	tcase_add_loop_test(tc, test_sim_settles, 0, sizeof(asim_cases) / sizeof(asim_cases[0]));
	tcase_add_test(tc, test_sim_max_bound);
	suite_add_tcase(s, tc);
	return s;
}
