/* proto: the bulk-transfer window — RTT and delivery-rate samples, and the BDP rule over them. */
#include <errno.h>
#include <stddef.h>

#include "proto/san_window.h"

uint64_t san_window_muldiv(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t p, a0, a1, b0, b1, p00, p01, p10, p11, mid, lo, hi, q;

	if (c == 0)
		return UINT64_MAX;
	/* The common case: the product fits. */
	if (!__builtin_mul_overflow(a, b, &p))
		return p / c;

	/* 128-bit product hi:lo from 32-bit halves (portable: no __int128 needed). */
	a0 = a & 0xffffffffu;
	a1 = a >> 32;
	b0 = b & 0xffffffffu;
	b1 = b >> 32;
	p00 = a0 * b0;
	p01 = a0 * b1;
	p10 = a1 * b0;
	p11 = a1 * b1;
	mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
	lo = (mid << 32) | (p00 & 0xffffffffu);
	hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
	if (hi >= c)
		return UINT64_MAX; /* the quotient needs more than 64 bits */

	/*
	 * Restoring long division of hi:lo by c, one quotient bit per step. The remainder (hi)
	 * stays below c; shifted left it is below 2c, so one conditional subtraction suffices,
	 * and when the shift carries out of bit 63 the true value is >= 2^64 > c and the
	 * wrapping subtraction gives the right remainder.
	 */
	q = 0;
	for (int i = 0; i < 64; i++) {
		uint64_t carry = hi >> 63;

		hi = (hi << 1) | (lo >> 63);
		lo <<= 1;
		q <<= 1;
		if (carry || hi >= c) {
			hi -= c;
			q |= 1;
		}
	}
	return q;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t s;

	return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

int san_window_init(struct san_window *w, const struct san_window_params *p)
{
	if (p->region_bytes == 0 || p->min_window < 1 || p->max_window < p->min_window ||
	    p->max_window > SAN_WINDOW_CAP || p->initial_window < p->min_window ||
	    p->initial_window > p->max_window)
		return -EINVAL;
	*w = (struct san_window){
		.p = *p,
		.cur = p->initial_window,
		.startup = true,
	};
	return 0;
}

uint32_t san_window_size(const struct san_window *w)
{
	return w->cur;
}

bool san_window_may_send(const struct san_window *w)
{
	return w->outstanding < w->cur;
}

static struct san_window_xfer *find(struct san_window *w, uint32_t id)
{
	for (uint32_t i = 0; i < SAN_WINDOW_CAP; i++)
		if (w->xfer[i].used && w->xfer[i].id == id)
			return &w->xfer[i];
	return NULL;
}

int san_window_on_sent(struct san_window *w, uint64_t now_ns, uint64_t bytes, uint32_t id)
{
	struct san_window_xfer *x = NULL;

	/* cur <= max <= SAN_WINDOW_CAP, so passing this leaves a free entry. */
	if (!san_window_may_send(w))
		return -EAGAIN;
	if (find(w, id)) {
		w->n_dup++;
		return -EEXIST;
	}
	for (uint32_t i = 0; i < SAN_WINDOW_CAP && !x; i++)
		if (!w->xfer[i].used)
			x = &w->xfer[i];
	if (!x)
		return -EAGAIN; /* unreachable while outstanding is kept right; be safe anyway */

	/*
	 * Nothing in flight: the next rate interval starts now, not at the last completion, or an
	 * idle pause would count as time the link spent delivering (BBR does the same).
	 */
	if (w->outstanding == 0) {
		w->first_sent_ns = now_ns;
		w->delivered_ns = now_ns;
	}
	*x = (struct san_window_xfer){
		.id = id,
		.used = true,
		.app_limited = w->app_limited,
		.bytes = bytes,
		.sent_ns = now_ns,
		.first_sent_ns = w->first_sent_ns,
		.delivered_ns = w->delivered_ns,
		.delivered = w->delivered,
		.completed = w->completed,
	};
	w->outstanding++;
	return 0;
}

/* RFC 6298 §2, in nanoseconds, written so that no intermediate can overflow. */
static void rtt_sample(struct san_window *w, uint64_t now_ns, uint64_t rtt)
{
	uint64_t err;

	/*
	 * min_rtt: the smallest sample, but not forever: a route can get longer, and a min that
	 * never expires would then size the window for a path that no longer exists. After
	 * SAN_WINDOW_MIN_RTT_EXPIRE_NS any sample replaces it (a stamp in the future means the
	 * caller's clock jumped: treat it as expired too).
	 */
	if (!w->have_rtt || rtt <= w->min_rtt_ns || now_ns < w->min_rtt_stamp_ns ||
	    now_ns - w->min_rtt_stamp_ns > SAN_WINDOW_MIN_RTT_EXPIRE_NS) {
		w->min_rtt_ns = rtt;
		w->min_rtt_stamp_ns = now_ns;
	}
	if (!w->have_rtt) {
		w->srtt_ns = rtt;
		w->rttvar_ns = rtt / 2;
		w->have_rtt = true;
		return;
	}
	/* rttvar = 3/4 rttvar + 1/4 |srtt - R|, then srtt = 7/8 srtt + 1/8 R. */
	err = w->srtt_ns > rtt ? w->srtt_ns - rtt : rtt - w->srtt_ns;
	if (err >= w->rttvar_ns)
		w->rttvar_ns += (err - w->rttvar_ns) / 4;
	else
		w->rttvar_ns -= (w->rttvar_ns - err) / 4;
	if (rtt >= w->srtt_ns)
		w->srtt_ns += (rtt - w->srtt_ns) / 8;
	else
		w->srtt_ns -= (w->srtt_ns - rtt) / 8;
}

/* Windowed max: one maximum per round, the estimate is the max of the last ROUNDS rounds. */
static void rate_sample(struct san_window *w, uint64_t rate)
{
	struct san_window_rate_slot *s = &w->rate_hist[w->round % SAN_WINDOW_RATE_ROUNDS];
	uint64_t best = 0;

	if (s->round != w->round || s->rate == 0)
		*s = (struct san_window_rate_slot){ .round = w->round, .rate = rate };
	else if (rate > s->rate)
		s->rate = rate;
	for (uint32_t i = 0; i < SAN_WINDOW_RATE_ROUNDS; i++) {
		const struct san_window_rate_slot *t = &w->rate_hist[i];

		if (t->rate != 0 && w->round - t->round < SAN_WINDOW_RATE_ROUNDS && t->rate > best)
			best = t->rate;
	}
	w->btl_rate = best;
}

static uint32_t compute_window(const struct san_window *w)
{
	uint64_t bdp, regions, win;

	if (w->btl_rate == 0 || !w->have_rtt)
		return w->p.initial_window; /* no sample yet */
	/* Bytes the bottleneck moves in one no-queue round trip; saturates rather than wraps. */
	bdp = san_window_muldiv(w->btl_rate, w->min_rtt_ns, SAN_WINDOW_NS_PER_S);
	if (w->startup)
		bdp = bdp > UINT64_MAX / SAN_WINDOW_STARTUP_GAIN ? UINT64_MAX
								 : bdp * SAN_WINDOW_STARTUP_GAIN;
	regions = bdp / w->p.region_bytes + (bdp % w->p.region_bytes != 0);
	win = sat_add(regions, 1); /* headroom */
	if (w->startup && win < w->p.initial_window)
		win = w->p.initial_window;
	if (win > w->p.max_window)
		win = w->p.max_window;
	if (win < w->p.min_window)
		win = w->p.min_window;
	return (uint32_t)win;
}

int san_window_on_done(struct san_window *w, uint64_t now_ns, uint32_t id)
{
	struct san_window_xfer *xp = find(w, id);
	struct san_window_xfer x;
	bool round_start = false;

	if (!xp) {
		w->n_unknown++; /* a duplicate or stray READ_DONE: nothing of ours to free */
		return -ENOENT;
	}
	x = *xp;
	xp->used = false;
	w->outstanding--;

	w->delivered += x.bytes; /* wraps; intervals take differences */
	w->completed++;
	if (x.completed >= w->next_round_completed) {
		/* x was sent after the previous round ended: a round trip has passed. */
		w->round++;
		w->next_round_completed = w->completed;
		round_start = true;
	}
	if (w->app_limited && w->completed > w->app_limited_until)
		w->app_limited = false;

	if (now_ns < x.sent_ns) {
		/* Time went backwards: no sample can be trusted; the slot is free all the same. */
		w->n_bad_time++;
	} else {
		rtt_sample(w, now_ns, now_ns - x.sent_ns);
		/*
		 * Delivery rate (BBR's rate sample): the bytes completed between x's send and
		 * now, over the longer of the send interval (how fast they were sent) and the
		 * completion interval (how fast they came back), which cannot be shorter than x's
		 * own RTT. The floor only matters when that RTT is ~0 (a burst in one tick).
		 */
		if (now_ns >= x.delivered_ns && x.sent_ns >= x.first_sent_ns) {
			uint64_t send_el = x.sent_ns - x.first_sent_ns;
			uint64_t ack_el = now_ns - x.delivered_ns;
			uint64_t interval = send_el > ack_el ? send_el : ack_el;
			uint64_t bytes = w->delivered - x.delivered;
			uint64_t rate;

			if (interval < SAN_WINDOW_MIN_INTERVAL_NS)
				interval = SAN_WINDOW_MIN_INTERVAL_NS;
			rate = san_window_muldiv(bytes, SAN_WINDOW_NS_PER_S, interval);
			/* Zero bytes say nothing about the link; app-limited samples only raise. */
			if (rate > 0 && (!x.app_limited || rate > w->btl_rate))
				rate_sample(w, rate);
		} else {
			w->n_bad_time++;
		}
	}
	w->delivered_ns = now_ns;
	w->first_sent_ns = x.sent_ns;

	/*
	 * End of start-up (BBR's full-bandwidth test): once a round, unless the application held
	 * the rate back, see whether the estimate grew by 25% since the last step.
	 */
	if (w->startup && round_start && !x.app_limited && w->btl_rate > 0) {
		if (w->btl_rate >= sat_add(w->full_rate, w->full_rate / 4)) {
			w->full_rate = w->btl_rate;
			w->full_rounds = 0;
		} else if (++w->full_rounds >= SAN_WINDOW_FULL_ROUNDS) {
			w->startup = false;
		}
	}
	w->cur = compute_window(w);
	return 0;
}

int san_window_forget(struct san_window *w, uint32_t id)
{
	struct san_window_xfer *x = find(w, id);

	if (!x) {
		w->n_unknown++;
		return -ENOENT;
	}
	x->used = false;
	w->outstanding--;
	return 0;
}

void san_window_app_limited(struct san_window *w)
{
	if (!san_window_may_send(w))
		return;
	/* Until every transfer in flight, and the next one, has completed. */
	w->app_limited = true;
	w->app_limited_until = w->completed + w->outstanding;
}

uint64_t san_window_rto_ns(const struct san_window *w)
{
	if (!w->have_rtt)
		return 0;
	return sat_add(w->srtt_ns, w->rttvar_ns > UINT64_MAX / 4 ? UINT64_MAX : 4 * w->rttvar_ns);
}

uint32_t san_window_area_units(uint64_t rate_bps, uint64_t rtt_us, uint64_t extra, uint64_t unit,
			       uint32_t max)
{
	uint64_t need, units;

	if (!rate_bps || !rtt_us || !unit || !max)
		return 1;
	need = san_window_muldiv(rate_bps / 8, rtt_us, 1000000ull / 2); /* x 2 RTT, in bytes */
	need = sat_add(need, extra);
	units = need / unit + (need % unit != 0);
	return units < 1 ? 1 : units > max ? max : (uint32_t)units;
}
