/* tests/unit: proto/san_window — samples, the BDP rule, bad input, and a link simulation. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/san_window.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define US 1000ull
#define MS (1000ull * US)
#define S_ (1000ull * MS)

static void mk(struct san_window *w, uint64_t region, uint32_t min, uint32_t max, uint32_t init)
{
	const struct san_window_params p = { region, min, max, init };

	REQUIRE_EQ(san_window_init(w, &p), 0);
}

/* ceil(rate * rtt / region) + 1, clamped: the rule, computed independently of the module. */
static uint32_t expect_window(uint64_t rate, uint64_t rtt_ns, uint64_t region, uint32_t min,
			      uint32_t max)
{
	double regions = (double)rate * (double)rtt_ns / 1e9 / (double)region;
	uint64_t w = (uint64_t)regions;

	if ((double)w < regions)
		w++;
	w += 1;
	if (w > max)
		w = max;
	if (w < min)
		w = min;
	return (uint32_t)w;
}

/*
 * A sender that keeps transfers going at exactly `rate` (one region every region/rate ns), each
 * answered exactly `rtt` after it was sent, for n transfers from t0; ids from id0. Completions
 * due at or before a send are delivered first. Every send must be allowed by the window.
 */
static uint64_t paced(struct san_window *w, uint64_t t0, uint32_t id0, uint32_t n, uint64_t rate,
		      uint64_t rtt, uint64_t region)
{
	uint64_t gap = region * 1000000000ull / rate;
	uint64_t sent_at[SAN_WINDOW_CAP];
	uint32_t ids[SAN_WINDOW_CAP], head = 0, tail = 0, k;
	uint64_t t = t0;

	for (k = 0; k < n; k++) {
		t = t0 + k * gap;
		while (head != tail && sent_at[head % SAN_WINDOW_CAP] + rtt <= t) {
			REQUIRE_EQ(san_window_on_done(w, sent_at[head % SAN_WINDOW_CAP] + rtt,
						      ids[head % SAN_WINDOW_CAP]),
				   0);
			head++;
		}
		REQUIRE(san_window_may_send(w));
		REQUIRE_EQ(san_window_on_sent(w, t, region, id0 + k), 0);
		sent_at[tail % SAN_WINDOW_CAP] = t;
		ids[tail % SAN_WINDOW_CAP] = id0 + k;
		tail++;
	}
	while (head != tail) {
		t = sent_at[head % SAN_WINDOW_CAP] + rtt;
		REQUIRE_EQ(san_window_on_done(w, t, ids[head % SAN_WINDOW_CAP]), 0);
		head++;
	}
	return t;
}

/* One transfer at a time, each answered after rtt; returns the last completion time. */
static uint64_t one_at_a_time(struct san_window *w, uint64_t t, uint32_t id0, uint32_t n,
			      uint64_t bytes, uint64_t rtt, bool app_limited)
{
	for (uint32_t k = 0; k < n; k++) {
		if (app_limited)
			san_window_app_limited(w);
		REQUIRE_EQ(san_window_on_sent(w, t, bytes, id0 + k), 0);
		t += rtt;
		REQUIRE_EQ(san_window_on_done(w, t, id0 + k), 0);
		t += 1000; /* the application's own pause between sends */
	}
	return t;
}

/* ---- discrete-event link model ------------------------------------------------------------- */

/*
 * A READ transfer crosses a path with a fixed propagation delay (rtt/2 each way) and one FIFO
 * bottleneck of `rate` bytes/s: its region is serialised after the regions ahead of it, then
 * the READ_DONE comes back, plus an optional return-path jitter in [0, jitter_ns] (the peer's
 * engine not answering at once). The sender always has data and issues whenever may_send.
 */
struct sim_cfg {
	uint64_t rtt_ns, rate, region;
	uint32_t min, max, initial, n;
	uint64_t jitter_ns;
};

struct sim_out {
	double eff;	       /* achieved rate / bottleneck rate */
	uint64_t elapsed_ns;   /* first send to last completion */
	uint32_t final_window; /* after the last completion */
	uint32_t max_outstanding;
	uint64_t max_srtt_ns;	/* over the run */
	uint64_t late_queue_ns; /* largest bottleneck queueing delay in the second half */
	uint64_t min_rtt_ns, srtt_ns;
	bool left_startup;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void sim_run(const struct sim_cfg *c, struct sim_out *o)
{
	struct san_window w;
	uint64_t serial = c->region * 1000000000ull / c->rate; /* one region's transfer time */
	uint64_t done_at[SAN_WINDOW_CAP];
	uint32_t id_of[SAN_WINDOW_CAP], npend = 0, issued = 0, completed = 0;
	uint64_t now = 0, link_free = 0, seed = 0x9e3779b97f4a7c15ull;

	memset(o, 0, sizeof(*o));
	mk(&w, c->region, c->min, c->max, c->initial);
	while (completed < c->n) {
		while (issued < c->n && san_window_may_send(&w)) {
			uint64_t arrive = now + c->rtt_ns / 2;
			uint64_t start = arrive > link_free ? arrive : link_free;

			if (issued >= c->n / 2 && start - arrive > o->late_queue_ns)
				o->late_queue_ns = start - arrive;
			link_free = start + serial;
			REQUIRE(npend < SAN_WINDOW_CAP);
			done_at[npend] = link_free + c->rtt_ns / 2 +
					 (c->jitter_ns ? xorshift(&seed) % (c->jitter_ns + 1) : 0);
			id_of[npend] = issued;
			npend++;
			REQUIRE_EQ(san_window_on_sent(&w, now, c->region, issued), 0);
			issued++;
			if (w.outstanding > o->max_outstanding)
				o->max_outstanding = w.outstanding;
		}
		/* The next event: the earliest READ_DONE (with jitter they may overtake). */
		REQUIRE(npend > 0);
		uint32_t j = 0;
		for (uint32_t i = 1; i < npend; i++)
			if (done_at[i] < done_at[j])
				j = i;
		now = done_at[j];
		REQUIRE_EQ(san_window_on_done(&w, now, id_of[j]), 0);
		done_at[j] = done_at[npend - 1];
		id_of[j] = id_of[npend - 1];
		npend--;
		completed++;
		if (w.srtt_ns > o->max_srtt_ns)
			o->max_srtt_ns = w.srtt_ns;
	}
	o->elapsed_ns = now;
	o->eff = (double)c->n * (double)c->region * 1e9 / (double)now / (double)c->rate;
	o->final_window = san_window_size(&w);
	o->min_rtt_ns = w.min_rtt_ns;
	o->srtt_ns = w.srtt_ns;
	o->left_startup = !w.startup;
	REQUIRE(o->max_outstanding <= c->max);
	REQUIRE_EQ(w.outstanding, 0);
	REQUIRE_EQ(w.n_unknown + w.n_dup + w.n_bad_time, 0);
}

static void sim_print(const char *what, const struct sim_cfg *c, const struct sim_out *o)
{
	fprintf(stderr,
		"window sim %-9s rtt %6.0f us, %5.1f GB/s, region %5llu KiB, max %2u: window %2u, "
		"min_rtt %7.1f us, max srtt %8.1f us, late queue %6.1f us, throughput %5.1f%%\n",
		what, (double)c->rtt_ns / 1e3, (double)c->rate / 1e9,
		(unsigned long long)(c->region / KIB), c->max, o->final_window,
		(double)o->min_rtt_ns / 1e3, (double)o->max_srtt_ns / 1e3,
		(double)o->late_queue_ns / 1e3, 100.0 * o->eff);
}

/* ---- init, before samples ------------------------------------------------------------------ */

START_TEST(test_init_params)
{
	struct san_window w;
	struct san_window_params p = { 64 * KIB, 1, 16, 4 };

	REQUIRE_EQ(san_window_init(&w, &p), 0);
	REQUIRE_EQ(san_window_size(&w), 4);
	p = (struct san_window_params){ 0, 1, 16, 4 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* region 0 */
	p = (struct san_window_params){ 64 * KIB, 0, 16, 4 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* min 0: nothing could ever be sent */
	p = (struct san_window_params){ 64 * KIB, 8, 4, 4 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* max < min */
	p = (struct san_window_params){ 64 * KIB, 1, SAN_WINDOW_CAP + 1, 4 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* beyond the tracking array */
	p = (struct san_window_params){ 64 * KIB, 2, 16, 1 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* initial < min */
	p = (struct san_window_params){ 64 * KIB, 2, 16, 17 };
	REQUIRE_EQ(san_window_init(&w, &p), -EINVAL); /* initial > max */
	p = (struct san_window_params){ 1, SAN_WINDOW_CAP, SAN_WINDOW_CAP, SAN_WINDOW_CAP };
	REQUIRE_EQ(san_window_init(&w, &p), 0);
	REQUIRE_EQ(san_window_size(&w), SAN_WINDOW_CAP);
	REQUIRE_EQ(san_window_rto_ns(&w), 0);
}
END_TEST

START_TEST(test_initial_before_samples)
{
	struct san_window w;

	mk(&w, 64 * KIB, 1, 32, 4);
	for (uint32_t i = 0; i < 4; i++) {
		REQUIRE(san_window_may_send(&w));
		REQUIRE_EQ(san_window_on_sent(&w, 1000 + i, 64 * KIB, i), 0);
	}
	/* The window is full: a fifth is refused and nothing is recorded. */
	REQUIRE(!san_window_may_send(&w));
	REQUIRE_EQ(san_window_on_sent(&w, 2000, 64 * KIB, 4), -EAGAIN);
	REQUIRE_EQ(w.outstanding, 4);
	REQUIRE_EQ(san_window_size(&w), 4);
	/* Neither an unknown id nor a completion from the past gives a sample. */
	REQUIRE_EQ(san_window_on_done(&w, 5000, 77), -ENOENT);
	REQUIRE_EQ(san_window_on_done(&w, 500, 0), 0);
	REQUIRE_EQ(san_window_size(&w), 4);
	REQUIRE(!w.have_rtt);
	REQUIRE_EQ(w.btl_rate, 0);
	REQUIRE(san_window_may_send(&w)); /* the slot was freed all the same */
}
END_TEST

/* ---- the rule ------------------------------------------------------------------------------- */

/*
 * One transfer at a time: every sample says "one region per round trip", so whatever the RTT
 * the BDP is one region: 2 in steady state (the region + the headroom), 3 at most in start-up.
 */
START_TEST(test_one_at_a_time_small)
{
	struct san_window w;

	mk(&w, 64 * KIB, 1, 64, 1);
	for (uint32_t k = 0; k < 20; k++) {
		one_at_a_time(&w, k * 100 * US, k, 1, 64 * KIB, 10 * US, false);
		REQUIRE(san_window_size(&w) <= 3);
	}
	REQUIRE(!w.startup);
	REQUIRE_EQ(san_window_size(&w), 2);
	REQUIRE_EQ(w.min_rtt_ns, 10 * US);
	REQUIRE_EQ(w.btl_rate, 64 * KIB * 1000000000ull / (10 * US));
}
END_TEST

/*
 * The brief's numbers: 1 GB/s, RTT 1 ms, 64 KiB regions. The BDP is 10^6 bytes = 15.26
 * regions: ceil -> 16, + 1 headroom = 17. Driven exactly: one region every 65.536 us (1 GB/s),
 * each answered 1 ms later. Start-up (from a generous initial window) settles to 17.
 */
START_TEST(test_bdp_window)
{
	struct san_window w;
	const uint64_t rate = 1000000000ull, rtt = 1 * MS, region = 64 * KIB;
	uint32_t want = expect_window(rate, rtt, region, 1, 64);

	REQUIRE_EQ(want, 17);
	mk(&w, region, 1, 64, 64);
	paced(&w, 0, 0, 2000, rate, rtt, region);
	REQUIRE(!w.startup);
	REQUIRE_EQ(w.btl_rate, rate);
	REQUIRE_EQ(w.min_rtt_ns, rtt);
	REQUIRE_EQ(san_window_size(&w), want);
	ck_assert_uint_eq(san_window_size(&w), 17);
}
END_TEST

/*
 * Growing: the same kind of link, the window starting at 2. Through the link model the no-queue
 * RTT is 1 ms + one region's serialisation (65.5 us), so the expected window is computed from
 * that: ceil(1e9 * 1.0655e-3 / 65536) + 1 = 18.
 */
START_TEST(test_bdp_grows)
{
	const struct sim_cfg c = { 1 * MS, 1000000000ull, 64 * KIB, 1, 64, 2, 3000, 0 };
	struct sim_out o;
	uint64_t serial = c.region * 1000000000ull / c.rate;
	uint32_t want = expect_window(c.rate, c.rtt_ns + serial, c.region, c.min, c.max);

	sim_run(&c, &o);
	sim_print("grow", &c, &o);
	REQUIRE_EQ(want, 18);
	REQUIRE(o.left_startup);
	REQUIRE_EQ(o.min_rtt_ns, c.rtt_ns + serial);
	REQUIRE_EQ(o.final_window, want);
	REQUIRE(o.eff >= 0.90);
}
END_TEST

START_TEST(test_clamps)
{
	struct sim_cfg c = { 1 * MS, 1000000000ull, 64 * KIB, 1, 8, 2, 1000, 0 };
	struct sim_out o;
	/* 8 regions per no-queue round trip: 8 * 64 KiB / 1.0655 ms = 0.49 GB/s */
	double bound = 8.0 * 65536 * 1e9 / (double)(1 * MS + 65536) / 1e9;

	/* max 8 < the 18 the BDP asks for: 8, and the throughput that 8 regions per RTT give. */
	sim_run(&c, &o);
	sim_print("max8", &c, &o);
	REQUIRE_EQ(o.final_window, 8);
	REQUIRE(o.eff <= bound * 1.01 && o.eff >= bound * 0.9);

	/* min 6 > the 3 a short link asks for: 6. */
	c = (struct sim_cfg){ 10 * US, 1000000000ull, 64 * KIB, 6, 64, 6, 1000, 0 };
	sim_run(&c, &o);
	sim_print("min6", &c, &o);
	REQUIRE_EQ(expect_window(c.rate, c.rtt_ns + 65536, c.region, 1, 64), 3);
	REQUIRE_EQ(o.final_window, 6);
	REQUIRE(o.eff >= 0.95);
}
END_TEST

/*
 * Queueing delay does not inflate the window. Starting with 64 regions outstanding on a link
 * whose BDP is 18 queues ~46 regions (3 ms) at the bottleneck: srtt climbs to several times
 * the propagation RTT. Sized by srtt the window would stay near max (and keep the queue);
 * sized by min_rtt it comes down to 18 and the queue drains to at most the headroom.
 */
START_TEST(test_queueing_no_inflation)
{
	const struct sim_cfg c = { 1 * MS, 1000000000ull, 64 * KIB, 1, 64, 64, 3000, 0 };
	struct sim_out o;
	uint64_t serial = c.region * 1000000000ull / c.rate;
	uint32_t want = expect_window(c.rate, c.rtt_ns + serial, c.region, c.min, c.max);

	sim_run(&c, &o);
	sim_print("queue", &c, &o);
	REQUIRE(o.max_srtt_ns > 2 * o.min_rtt_ns);
	/* What srtt would have asked for at its peak. */
	REQUIRE(expect_window(c.rate, o.max_srtt_ns, c.region, c.min, c.max) > 2 * want);
	REQUIRE_EQ(o.min_rtt_ns, c.rtt_ns + serial);
	REQUIRE_EQ(o.final_window, want);
	REQUIRE(o.late_queue_ns <= 2 * serial);
}
END_TEST

/*
 * A quiet period must not shrink the window the next burst needs: samples from app-limited
 * transfers only raise the estimate. The same trickle, not marked, lowers it after the filter
 * forgets (SAN_WINDOW_RATE_ROUNDS rounds).
 */
START_TEST(test_app_limited)
{
	struct san_window w, v;
	const uint64_t rate = 1000000000ull, rtt = 1 * MS, region = 64 * KIB;
	uint64_t t;

	mk(&w, region, 1, 64, 64);
	t = paced(&w, 0, 0, 2000, rate, rtt, region);
	REQUIRE_EQ(san_window_size(&w), 17);
	v = w;
	one_at_a_time(&w, t + 1 * MS, 5000, 30, region, rtt, true);
	REQUIRE_EQ(san_window_size(&w), 17);
	REQUIRE_EQ(w.btl_rate, rate);
	one_at_a_time(&v, t + 1 * MS, 5000, 30, region, rtt, false);
	REQUIRE_EQ(san_window_size(&v), 2);
	/* Marking is ignored while the window is full: that is not the application's doing. */
	mk(&w, region, 1, 2, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, region, 1), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 0, region, 2), 0);
	san_window_app_limited(&w);
	REQUIRE(!w.app_limited);
}
END_TEST

/* min_rtt follows a path that got longer, but only after SAN_WINDOW_MIN_RTT_EXPIRE_NS. */
START_TEST(test_min_rtt_expires)
{
	struct san_window w;
	uint64_t t;

	mk(&w, 64 * KIB, 1, 64, 2);
	t = one_at_a_time(&w, 0, 0, 10, 64 * KIB, 1 * MS, false);
	REQUIRE_EQ(w.min_rtt_ns, 1 * MS);
	t = one_at_a_time(&w, t, 100, 1000, 64 * KIB, 5 * MS, false); /* ~5 s */
	REQUIRE_EQ(w.min_rtt_ns, 1 * MS);
	REQUIRE(w.srtt_ns > 4 * MS);
	one_at_a_time(&w, t, 2000, 1200, 64 * KIB, 5 * MS, false); /* past 10 s */
	REQUIRE_EQ(w.min_rtt_ns, 5 * MS);
}
END_TEST

START_TEST(test_rtt_smoothing)
{
	struct san_window w;

	mk(&w, 64 * KIB, 1, 64, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, 100, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, 800, 1), 0);
	/* First sample: srtt = R, rttvar = R/2 (RFC 6298 2.2). */
	REQUIRE_EQ(w.srtt_ns, 800);
	REQUIRE_EQ(w.rttvar_ns, 400);
	REQUIRE_EQ(san_window_rto_ns(&w), 800 + 4 * 400);
	REQUIRE_EQ(san_window_on_sent(&w, 1000, 100, 2), 0);
	REQUIRE_EQ(san_window_on_done(&w, 2600, 2), 0);
	/* R = 1600: rttvar = 3/4 * 400 + 1/4 * |800 - 1600| = 500; srtt = 7/8 800 + 1/8 1600. */
	REQUIRE_EQ(w.rttvar_ns, 500);
	REQUIRE_EQ(w.srtt_ns, 900);
	REQUIRE_EQ(w.min_rtt_ns, 800);
	REQUIRE_EQ(san_window_on_sent(&w, 3000, 100, 3), 0);
	REQUIRE_EQ(san_window_on_done(&w, 3100, 3), 0);
	/* R = 100: rttvar = 3/4 500 + 1/4 800 = 575; srtt = 900 - 800/8 = 800. */
	REQUIRE_EQ(w.rttvar_ns, 575);
	REQUIRE_EQ(w.srtt_ns, 800);
	REQUIRE_EQ(w.min_rtt_ns, 100);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------ */

START_TEST(test_unknown_and_reused_ids)
{
	struct san_window w;

	mk(&w, 64 * KIB, 1, 8, 8);
	REQUIRE_EQ(san_window_on_done(&w, 10, 5), -ENOENT);
	REQUIRE_EQ(w.n_unknown, 1);
	REQUIRE_EQ(san_window_on_sent(&w, 100, 64 * KIB, 5), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 110, 64 * KIB, 5), -EEXIST); /* still outstanding */
	REQUIRE_EQ(w.n_dup, 1);
	REQUIRE_EQ(w.outstanding, 1);
	REQUIRE_EQ(san_window_on_done(&w, 1100, 5), 0);
	REQUIRE_EQ(san_window_on_done(&w, 1200, 5), -ENOENT); /* a second READ_DONE */
	REQUIRE_EQ(w.n_unknown, 2);
	REQUIRE_EQ(w.outstanding, 0);
	REQUIRE_EQ(w.srtt_ns, 1000); /* the duplicate gave no sample */
	/* The id is free again after its completion. */
	REQUIRE_EQ(san_window_on_sent(&w, 2000, 64 * KIB, 5), 0);
	REQUIRE_EQ(san_window_on_done(&w, 3000, 5), 0);
	/* forget: the slot is freed without a sample. */
	REQUIRE_EQ(san_window_on_sent(&w, 4000, 64 * KIB, 6), 0);
	REQUIRE_EQ(san_window_forget(&w, 6), 0);
	REQUIRE_EQ(w.outstanding, 0);
	REQUIRE_EQ(san_window_forget(&w, 6), -ENOENT);
	REQUIRE_EQ(san_window_on_done(&w, 9000000, 6), -ENOENT);
	REQUIRE_EQ(w.srtt_ns, 1000);
	REQUIRE_EQ(w.n_unknown, 4);
	/* The whole id space, including 0 and UINT32_MAX. */
	REQUIRE_EQ(san_window_on_sent(&w, 10000, 1, 0), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 10000, 1, UINT32_MAX), 0);
	REQUIRE_EQ(san_window_on_done(&w, 11000, UINT32_MAX), 0);
	REQUIRE_EQ(san_window_on_done(&w, 11000, 0), 0);
	REQUIRE_EQ(w.outstanding, 0);
}
END_TEST

START_TEST(test_time_backwards)
{
	struct san_window w;
	uint64_t rate;

	mk(&w, 64 * KIB, 1, 8, 4);
	/* Completed "before" it was sent: slot freed, no RTT, no rate. */
	REQUIRE_EQ(san_window_on_sent(&w, 1000000, 64 * KIB, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, 999999, 1), 0);
	REQUIRE_EQ(w.n_bad_time, 1);
	REQUIRE(!w.have_rtt);
	REQUIRE_EQ(w.btl_rate, 0);
	REQUIRE_EQ(w.outstanding, 0);
	REQUIRE_EQ(san_window_size(&w), 4);

	/* A good sample, then the clock steps back between two sends. */
	REQUIRE_EQ(san_window_on_sent(&w, 2000000, 64 * KIB, 2), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 2000000, 64 * KIB, 3), 0);
	REQUIRE_EQ(san_window_on_done(&w, 2100000, 2), 0);
	rate = w.btl_rate;
	REQUIRE(rate > 0);
	/* Sent "before" the last completion. */
	REQUIRE_EQ(san_window_on_sent(&w, 1500000, 64 * KIB, 4), 0);
	REQUIRE_EQ(san_window_on_done(&w, 1600000, 4), 0);
	/* Its RTT is self-consistent (100 us) but its rate interval is not: no rate sample. */
	REQUIRE_EQ(w.n_bad_time, 2);
	REQUIRE_EQ(w.btl_rate, rate);
	/* Transfer 3 completes "before" it was sent. */
	REQUIRE_EQ(san_window_on_done(&w, 1700000, 3), 0);
	REQUIRE_EQ(w.n_bad_time, 3);
	REQUIRE_EQ(w.btl_rate, rate);
	REQUIRE_EQ(w.outstanding, 0);
}
END_TEST

START_TEST(test_zero_bytes)
{
	struct san_window w;

	mk(&w, 64 * KIB, 1, 8, 4);
	for (uint32_t k = 0; k < 50; k++) {
		REQUIRE_EQ(san_window_on_sent(&w, k * 10000, 0, k), 0);
		REQUIRE_EQ(san_window_on_done(&w, k * 10000 + 5000, k), 0);
	}
	/* RTT samples, but no rate: the window stays where it started. */
	REQUIRE(w.have_rtt);
	REQUIRE_EQ(w.min_rtt_ns, 5000);
	REQUIRE_EQ(w.btl_rate, 0);
	REQUIRE_EQ(san_window_size(&w), 4);
	/* A zero-byte completion among real ones: no division by zero, rate from the rest. */
	REQUIRE_EQ(san_window_on_sent(&w, 1000000, 64 * KIB, 100), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 1000000, 0, 101), 0);
	REQUIRE_EQ(san_window_on_done(&w, 1000000, 101), 0); /* RTT 0: the interval floor */
	REQUIRE_EQ(san_window_on_done(&w, 1000000, 100), 0);
	REQUIRE_EQ(w.min_rtt_ns, 0);
	REQUIRE_EQ(w.btl_rate, 64 * KIB * 1000000000ull / SAN_WINDOW_MIN_INTERVAL_NS);
	REQUIRE(san_window_size(&w) >= 1 && san_window_size(&w) <= 8);
}
END_TEST

/* The set-up sizing of the sender's area: rate x 2 RTT + one region, in MiB, clamped. */
START_TEST(test_area_units)
{
	const uint64_t mib = 1u << 20, region = 256u << 10;

	/* unknown rate or RTT: the least */
	REQUIRE_EQ(san_window_area_units(0, 10000, region, mib, 16), 1);
	REQUIRE_EQ(san_window_area_units(10000000000ull, 0, region, mib, 16), 1);
	/* a short link: 10 Gbit/s x 2 x 50 us = 125 000 B, + 256 KiB: under 1 MiB */
	REQUIRE_EQ(san_window_area_units(10000000000ull, 50, region, mib, 16), 1);
	/* exactly 1 MiB is one unit, one byte more is two */
	REQUIRE_EQ(san_window_area_units(8 * mib, 500000, 0, mib, 16), 1);
	REQUIRE_EQ(san_window_area_units(8 * mib, 500000, 1, mib, 16), 2);
	/* 2.5 Gbit/s (rxe's claim) x 2 x 10 ms = 6 250 000 B + 262 144 = 6.21 MiB: 7 */
	REQUIRE_EQ(san_window_area_units(2500000000ull, 10000, region, mib, 16), 7);
	/* 100 Gbit/s x 2 x 1 ms = 25 000 000 B + region = 24.09 MiB: clamped to 16 */
	REQUIRE_EQ(san_window_area_units(100000000000ull, 1000, region, mib, 16), 16);
	/* products past 64 bits saturate to max, never wrap to a small area */
	REQUIRE_EQ(san_window_area_units(UINT64_MAX, UINT64_MAX, UINT64_MAX, mib, 16), 16);
	REQUIRE_EQ(san_window_area_units(UINT64_MAX, 1, 0, 1, UINT32_MAX), UINT32_MAX);
	/* nonsense parameters: the least */
	REQUIRE_EQ(san_window_area_units(8 * mib, 1000, 0, 0, 16), 1);
	REQUIRE_EQ(san_window_area_units(8 * mib, 1000, 0, mib, 0), 1);
}
END_TEST

START_TEST(test_muldiv)
{
	REQUIRE(san_window_muldiv(6, 7, 3) == 14);
	REQUIRE(san_window_muldiv(UINT64_MAX, 1, 1) == UINT64_MAX);
	REQUIRE(san_window_muldiv(UINT64_MAX, UINT64_MAX, 1) == UINT64_MAX);
	REQUIRE(san_window_muldiv(UINT64_MAX, UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	REQUIRE(san_window_muldiv(UINT64_MAX, 1000000000ull, 1000000000ull) == UINT64_MAX);
	REQUIRE(san_window_muldiv(UINT64_MAX, 999999999ull, 1000000000ull) ==
		UINT64_MAX - UINT64_MAX / 1000000000ull - 1);
	REQUIRE(san_window_muldiv(1ull << 40, 1ull << 40, 1ull << 30) == 1ull << 50);
	REQUIRE(san_window_muldiv(1ull << 63, 4, 2) == UINT64_MAX); /* 2^64: one too many */
	REQUIRE(san_window_muldiv(1ull << 63, 4, 4) == 1ull << 63);
	REQUIRE(san_window_muldiv(5, 5, 0) == UINT64_MAX);
	REQUIRE(san_window_muldiv(0, UINT64_MAX, 7) == 0);
#ifdef __SIZEOF_INT128__
	/* Against the compiler's 128-bit arithmetic, on products that do not fit 64 bits. */
	uint64_t s = 12345;
	for (int i = 0; i < 200000; i++) {
		uint64_t a = xorshift(&s), b = xorshift(&s) >> (xorshift(&s) % 64);
		uint64_t c = xorshift(&s) >> (xorshift(&s) % 64);
		unsigned __int128 q;

		if (c == 0)
			c = 1;
		q = (unsigned __int128)a * b / c;
		REQUIRE(san_window_muldiv(a, b, c) == (q > UINT64_MAX ? UINT64_MAX : (uint64_t)q));
	}
#endif
}
END_TEST

START_TEST(test_overflow_saturates)
{
	struct san_window w;

	/* A transfer of 2^64 - 1 bytes answered in 1 ns: the rate saturates, the window is max. */
	mk(&w, 64 * KIB, 1, 64, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, UINT64_MAX, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, 1, 1), 0);
	REQUIRE(w.btl_rate == UINT64_MAX);
	REQUIRE_EQ(san_window_size(&w), 64);

	/* An RTT of 2^64 - 1 ns: rate * rtt saturates, srtt and rto do not wrap. */
	mk(&w, 64 * KIB, 1, 64, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, UINT64_MAX, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, UINT64_MAX, 1), 0);
	REQUIRE(w.btl_rate == 1000000000ull);
	REQUIRE(w.srtt_ns == UINT64_MAX);
	REQUIRE(san_window_rto_ns(&w) == UINT64_MAX);
	REQUIRE_EQ(san_window_size(&w), 64);

	/* A huge sample after small ones, and back: srtt moves by 1/8 of the difference. */
	mk(&w, 1, 1, 64, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, 1, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, 8, 1), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 8, 1, 2), 0);
	REQUIRE_EQ(san_window_on_done(&w, UINT64_MAX, 2), 0);
	REQUIRE(w.srtt_ns == 8 + (UINT64_MAX - 8 - 8) / 8);
	REQUIRE(san_window_rto_ns(&w) == UINT64_MAX);

	/* The byte counter wraps: the rate of transfers after the wrap is still right. */
	mk(&w, 64 * KIB, 1, 64, 2);
	REQUIRE_EQ(san_window_on_sent(&w, 0, UINT64_MAX - 10, 1), 0);
	REQUIRE_EQ(san_window_on_done(&w, 1 * S_, 1), 0);
	REQUIRE_EQ(san_window_on_sent(&w, 2 * S_, 1000, 2), 0);
	REQUIRE_EQ(san_window_on_done(&w, 2 * S_ + 1 * MS, 2), 0);
	REQUIRE(w.delivered < 1000); /* wrapped */
	REQUIRE_EQ(w.round, 2);
	REQUIRE(w.rate_hist[2 % SAN_WINDOW_RATE_ROUNDS].rate == 1000000ull); /* 1000 B in 1 ms */
}
END_TEST

/* ---- simulation: the rule keeps long links full ------------------------------------------- */

/*
 * 10 GB/s bottleneck, RTT 10 us .. 10 ms, region sized so that the BDP fits max = 64 (the
 * "when max allows" of the claim) and one region's transfer time is well below the RTT (so
 * that one transfer at a time cannot fill the link: the control below).
 */
static const struct sim_cfg sim_cases[] = {
	{ 10 * US, 10000000000ull, 16 * KIB, 1, 64, 2, 4000, 0 },
	{ 100 * US, 10000000000ull, 128 * KIB, 1, 64, 2, 4000, 0 },
	{ 1 * MS, 10000000000ull, 1 * MIB, 1, 64, 2, 4000, 0 },
	{ 10 * MS, 10000000000ull, 4 * MIB, 1, 64, 2, 4000, 0 },
	{ 1 * MS, 1000000000ull, 64 * KIB, 1, 64, 2, 4000, 0 },
	/* READ_DONE delayed by up to 20% of the RTT, at random. */
	{ 1 * MS, 10000000000ull, 1 * MIB, 1, 64, 2, 4000, 200 * US },
};

START_TEST(test_sim_full)
{
	const struct sim_cfg *c = &sim_cases[_i];
	struct sim_cfg one = *c;
	struct sim_out o, o1;
	uint64_t serial = c->region * 1000000000ull / c->rate;

	sim_run(c, &o);
	sim_print("rule", c, &o);
	REQUIRE(o.eff >= 0.90);
	REQUIRE(o.left_startup);
	if (!c->jitter_ns)
		REQUIRE_EQ(o.final_window,
			   expect_window(c->rate, c->rtt_ns + serial, c->region, c->min, c->max));

	/* The control: the same link, one transfer at a time, does not come close. */
	one.min = one.max = one.initial = 1;
	sim_run(&one, &o1);
	sim_print("window=1", &one, &o1);
	REQUIRE(o1.eff < 0.5);
	/* ... and gets what one region per round trip predicts. */
	double pred = (double)serial / (double)(c->rtt_ns + serial + c->jitter_ns / 2);
	REQUIRE(o1.eff > pred * 0.9 && o1.eff < pred * 1.1);
}
END_TEST

/* When the BDP is beyond max, the window sits at max and the link gets max regions per RTT. */
START_TEST(test_sim_max_bound)
{
	const struct sim_cfg c = { 10 * MS, 10000000000ull, 256 * KIB, 1, 64, 2, 4000, 0 };
	struct sim_out o;
	uint64_t serial = c.region * 1000000000ull / c.rate;
	double bound = 64.0 * (double)c.region * 1e9 / (double)(c.rtt_ns + serial) / (double)c.rate;

	sim_run(&c, &o);
	sim_print("max-bound", &c, &o);
	REQUIRE_EQ(o.final_window, 64);
	REQUIRE_EQ(o.max_outstanding, 64);
	REQUIRE(o.eff <= bound * 1.01 && o.eff >= bound * 0.9);
}
END_TEST

Suite *make_window_suite(void)
{
	Suite *s = suite_create("window");
	TCase *tc;

	tc = tcase_create("rule");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_init_params);
	tcase_add_test(tc, test_initial_before_samples);
	tcase_add_test(tc, test_one_at_a_time_small);
	tcase_add_test(tc, test_bdp_window);
	tcase_add_test(tc, test_bdp_grows);
	tcase_add_test(tc, test_clamps);
	tcase_add_test(tc, test_queueing_no_inflation);
	tcase_add_test(tc, test_app_limited);
	tcase_add_test(tc, test_min_rtt_expires);
	tcase_add_test(tc, test_rtt_smoothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad input");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_unknown_and_reused_ids);
	tcase_add_test(tc, test_time_backwards);
	tcase_add_test(tc, test_zero_bytes);
	tcase_add_test(tc, test_muldiv);
	tcase_add_test(tc, test_area_units);
	tcase_add_test(tc, test_overflow_saturates);
	suite_add_tcase(s, tc);

	tc = tcase_create("simulation");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_sim_full, 0, sizeof(sim_cases) / sizeof(sim_cases[0]));
	tcase_add_test(tc, test_sim_max_bound);
	suite_add_tcase(s, tc);
	return s;
}
