/* proto: how many bulk READ transfers a connection keeps outstanding (the bandwidth-delay rule). */
#ifndef SAN_WINDOW_H
#define SAN_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

/*
 * On verbs a READ transfer holds one region of the sender's registered bulk area from the
 * SRC_AVAIL that advertises it until the READ_DONE that answers it (docs/verbs.md §4). A sender
 * that waits for each READ_DONE before staging the next region moves region / RTT bytes per
 * second; on a long link that is a small fraction of the link rate (the pseudo-response
 * patent's observation: a sender that waits for each answer cannot keep a long link full). By
 * Little's law the number of transfers that must be outstanding to keep the bottleneck busy is
 *
 *     rate [bytes/s] * RTT [s] / region [bytes]       (the bandwidth-delay product in regions)
 *
 * This module measures both factors from the transfers themselves and turns them into a window:
 *
 *     window = ceil(gain * btl_rate * min_rtt / region) + 1,   clamped to [min, max]
 *
 *   btl_rate  the largest delivery-rate sample over the last SAN_WINDOW_RATE_ROUNDS round trips
 *             (BBR's windowed max filter): a rate sample is bytes completed over the interval
 *             they took, at least SAN_WINDOW_MIN_INTERVAL_NS, so a burst of completions cannot
 *             claim an infinite rate; the max, because samples only ever under-estimate the
 *             bottleneck (the window or the application limited them), never over-estimate it.
 *   min_rtt   the smallest SRC_AVAIL-to-READ_DONE time seen in the last
 *             SAN_WINDOW_MIN_RTT_EXPIRE_NS, NOT the smoothed RTT. Transfers beyond the BDP
 *             do not go faster, they wait in a queue somewhere (the NIC, a switch, the peer's
 *             engine), and that wait shows up in every RTT sample. Sizing by srtt would turn
 *             queueing into more window, more window into more queue: the window would climb to
 *             max and stay there, holding regions and adding latency for nothing. min_rtt is
 *             the round trip with no queue (propagation + one region's transfer time), which is
 *             exactly the time a region must be covered for; the queue this rule itself builds is
 *             at most the headroom. srtt/rttvar (RFC 6298) are still kept, for timers and stats.
 *   + 1       headroom: the slot freed by a READ_DONE is restaged while that READ_DONE's
 *             successor is already on its way, so the pipe does not drain during the turnaround;
 *             it is also how the rule probes: one transfer more than the measured BDP measures a
 *             higher rate if the link has one, and the window follows (one region per round trip).
 *   gain      2 in start-up, 1 after. A rate sample can only show what the window let through,
 *             so with gain 1 the window would grow by one transfer per round trip: from 2 to 40
 *             on a 10 ms link, 40 round trips. Gain 2 doubles it each round trip instead (TCP slow
 *             start, BBR STARTUP); start-up ends when the estimated rate has not grown by 25% in
 *             SAN_WINDOW_FULL_ROUNDS rounds (the bottleneck, or max, is reached). During start-up
 *             the window is also never below the initial window.
 *   before any sample: the initial window.
 *
 * Samples from transfers sent while the application had nothing more to send
 * (san_window_app_limited()) lower nothing: they are used only if they raise the estimate, so a
 * quiet period does not shrink the window the next burst needs.
 *
 * Pure: no system calls, no clock. Times are the caller's uint64_t nanoseconds (CLOCK_MONOTONIC);
 * bad input (unknown ids, time going backwards, zero-byte transfers, products beyond 64 bits) is
 * ignored, counted or saturated, never trusted. Outstanding transfers are tracked in a fixed array
 * of SAN_WINDOW_CAP entries; max is bounded by it.
 */

#define SAN_WINDOW_CAP 64u		 /* largest max window (outstanding transfers) */
#define SAN_WINDOW_RATE_ROUNDS 8u	 /* rounds the max rate filter remembers */
#define SAN_WINDOW_FULL_ROUNDS 3u	 /* rounds without 25% rate growth: start-up is over */
#define SAN_WINDOW_STARTUP_GAIN 2u	 /* BDP multiplier during start-up */
#define SAN_WINDOW_MIN_INTERVAL_NS 1000u /* floor of a rate sample's interval */
#define SAN_WINDOW_MIN_RTT_EXPIRE_NS 10000000000ull /* min_rtt older than this is replaced */
#define SAN_WINDOW_NS_PER_S 1000000000ull

struct san_window_params {
	uint64_t region_bytes;	 /* size of one bulk region (> 0) */
	uint32_t min_window;	 /* >= 1 */
	uint32_t max_window;	 /* min(max_qp_rd_atom, area / region), min..SAN_WINDOW_CAP */
	uint32_t initial_window; /* used until the first sample; min..max */
};

/* One outstanding transfer, with what was known when it was sent (for its rate sample). */
struct san_window_xfer {
	uint32_t id;
	bool used;
	bool app_limited; /* sent while the application had nothing more to send */
	uint64_t bytes;
	uint64_t sent_ns;
	uint64_t first_sent_ns; /* send time of the last completion before this send */
	uint64_t delivered_ns;	/* time of that completion */
	uint64_t delivered;	/* bytes completed before this one was sent (wrapping counter) */
	uint64_t completed;	/* transfers completed before this one was sent */
};

struct san_window_rate_slot {
	uint64_t round; /* the round this maximum belongs to */
	uint64_t rate;	/* bytes/s; 0: empty */
};

struct san_window {
	struct san_window_params p;
	uint32_t cur; /* the window, recomputed at every completion */
	uint32_t outstanding;
	struct san_window_xfer xfer[SAN_WINDOW_CAP];

	/* Delivery state (BBR's C.delivered, C.delivered_time, C.first_sent_time). */
	uint64_t delivered; /* bytes completed, wrapping: only differences are used */
	uint64_t completed; /* transfers completed */
	uint64_t delivered_ns;
	uint64_t first_sent_ns;

	/* Rounds: one ends when a transfer sent after the previous one ended completes. */
	uint64_t round;
	uint64_t next_round_completed;

	/* Bottleneck rate: per-round maxima over the last SAN_WINDOW_RATE_ROUNDS rounds. */
	struct san_window_rate_slot rate_hist[SAN_WINDOW_RATE_ROUNDS];
	uint64_t btl_rate; /* bytes/s, the max of rate_hist; 0 before a sample */

	/* RTT. */
	bool have_rtt;
	uint64_t min_rtt_ns;
	uint64_t min_rtt_stamp_ns; /* when min_rtt_ns was taken */
	uint64_t srtt_ns;
	uint64_t rttvar_ns;

	/* Start-up. */
	bool startup;
	uint64_t full_rate;   /* the estimate at the last 25% step */
	uint32_t full_rounds; /* rounds since */
	bool app_limited;     /* the application ran out of data; cleared as its transfers finish */
	uint64_t app_limited_until; /* completion count that ends the app-limited period */

	/* Bad input, ignored and counted. */
	uint64_t n_unknown;  /* completion (or forget) of an id not outstanding */
	uint64_t n_dup;	     /* on_sent of an id already outstanding */
	uint64_t n_bad_time; /* completion with a time before its send: no sample */
};

/* Returns 0, or -EINVAL for region 0, min 0, max < min, max > SAN_WINDOW_CAP, initial outside. */
int san_window_init(struct san_window *w, const struct san_window_params *p);

/* Transfers that may be outstanding now (min..max). */
uint32_t san_window_size(const struct san_window *w);

/* May one more transfer be staged now: outstanding < window. */
bool san_window_may_send(const struct san_window *w);

/*
 * A transfer of `bytes` (0 is accepted: it occupies a slot and gives an RTT sample, no rate)
 * was sent (SRC_AVAIL) at now_ns with this id. Returns 0, -EAGAIN when !san_window_may_send()
 * (nothing recorded), or -EEXIST when the id is already outstanding (counted in n_dup).
 */
int san_window_on_sent(struct san_window *w, uint64_t now_ns, uint64_t bytes, uint32_t id);

/*
 * The transfer's READ_DONE arrived at now_ns: its slot is free; take an RTT and a rate sample
 * and recompute the window. Returns 0 (also when the time was inconsistent: the slot is freed,
 * the sample dropped, n_bad_time counted), or -ENOENT for an id not outstanding (n_unknown).
 */
int san_window_on_done(struct san_window *w, uint64_t now_ns, uint32_t id);

/* Free a transfer's slot without a sample (READ_DONE FAILED, fallback to copy). 0 or -ENOENT. */
int san_window_forget(struct san_window *w, uint32_t id);

/*
 * The application has nothing more to send although the window has room: transfers sent from
 * now until the ones in flight have completed are app-limited, and their rate samples may raise
 * the estimate but not lower it. Ignored while the window is full (then we are not app-limited).
 */
void san_window_app_limited(struct san_window *w);

/* RFC 6298 retransmission-style timeout srtt + 4 * rttvar (saturating); 0 before an RTT sample. */
uint64_t san_window_rto_ns(const struct san_window *w);

/* floor(a * b / c) exactly, saturating to UINT64_MAX when it does not fit (or c == 0). */
uint64_t san_window_muldiv(uint64_t a, uint64_t b, uint64_t c);

/*
 * The sender's area a link asks for at set-up, in units of unit bytes (verbs: MiB each way;
 * docs/verbs.md §4, "Window"): a region is held from its SRC_AVAIL to its READ_DONE, two round
 * trips, so the area must cover rate x 2 RTT, plus one region (extra) for the turnaround:
 *
 *     ceil((rate_bps / 8 * 2 * rtt_us / 10^6 + extra) / unit),   clamped to [1, max]
 *
 * 1 when the rate or the RTT is unknown (0); saturating, never wrapping. unit and max > 0.
 */
uint32_t san_window_area_units(uint64_t rate_bps, uint64_t rtt_us, uint64_t extra, uint64_t unit,
			       uint32_t max);

#endif /* SAN_WINDOW_H */
