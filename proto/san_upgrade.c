/* proto: upgrade state machine — every transition and every abort path of the switch-over. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "proto/san_upgrade.h"
#include "proto/san_wire.h"

/*
 * The two rules everything below follows (docs/protocol.md §Upgrade argues them):
 *
 *  1. Before a side has committed, any failure leaves the connection on TCP (FALLBACK): no
 *     MARK has been written towards a reader that is not paused, so TCP is intact.
 *  2. Once a side may have a MARK in flight towards it, or has written its own, there is no
 *     way back: any failure RESETs the connection. Garbage is never delivered.
 *
 * B, once it has sent ACCEPT, is in neither position: A may commit at any moment, so B waits
 * for A's decision (SWITCH, ABORT or the side channel closing) and defers its own wishes.
 */

static void san_act(struct san_up_actions *out, enum san_up_act act, uint16_t reason, uint64_t arg)
{
	/* SAN_UP_MAX_ACTIONS is sized for the longest list below; the test suite checks it. */
	if (out->n < SAN_UP_MAX_ACTIONS)
		out->a[out->n++] = (struct san_up_action){ act, reason, arg };
}

static int san_up_fallback(struct san_upgrade *up, struct san_up_actions *out, uint16_t reason)
{
	san_act(out, SAN_UP_ACT_CLOSE_SIDE, 0, 0);
	san_act(out, SAN_UP_ACT_FALLBACK, reason, 0);
	up->state = SAN_UP_FALLBACK;
	up->reason = reason;
	return 0;
}

static int san_up_reset(struct san_upgrade *up, struct san_up_actions *out, uint16_t reason)
{
	san_act(out, SAN_UP_ACT_CLOSE_SIDE, 0, 0);
	san_act(out, SAN_UP_ACT_RESET, reason, 0);
	up->state = SAN_UP_RESET;
	up->reason = reason;
	return 0;
}

/* A abandons before committing: tell B (which may be paused), then stay TCP. */
static int san_up_a_abort(struct san_upgrade *up, struct san_up_actions *out, uint16_t reason)
{
	san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
	san_act(out, SAN_UP_ACT_SEND_ABORT, reason, 0);
	return san_up_fallback(up, out, reason);
}

static uint16_t san_up_reason_or(uint16_t reason, uint16_t dflt)
{
	return reason ? reason : dflt;
}

/* The peer's offset can never be below what we had already read from it when we paused. */
static bool san_up_offset_ok(const struct san_upgrade *up, const struct san_up_event *ev)
{
	return ev->offset >= up->rx_paused && ev->offset < SAN_OFFSET_MAX;
}

/* The peer's SWITCH, after our own direction is committed: drain TCP up to its offset. */
static int san_up_peer_switch(struct san_upgrade *up, const struct san_up_event *ev,
			      struct san_up_actions *out)
{
	if (!san_up_offset_ok(up, ev))
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	up->rx_mark = ev->offset;
	san_act(out, SAN_UP_ACT_DRAIN_TO, 0, ev->offset);
	up->state = SAN_UP_DRAINING;
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Side A.                                                                                    */

static int san_up_a_idle(struct san_upgrade *up, const struct san_up_event *ev,
			 struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_START:
		san_act(out, SAN_UP_ACT_SEND_PROPOSE, 0, 0);
		san_act(out, SAN_UP_ACT_ARM_TIMER, 0, 0);
		up->state = SAN_UP_PROPOSED;
		return 0;
	case SAN_UP_EV_ABANDON:
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_LOCAL));
	case SAN_UP_EV_TCP_CLOSED:
		return san_up_fallback(up, out, SAN_R_TCP);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	default:
		return -EINVAL;
	}
}

static int san_up_a_proposed(struct san_upgrade *up, const struct san_up_event *ev,
			     struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_ACCEPT:
		if (ev->reason)
			return san_up_a_abort(up, out, ev->reason);
		/*
		 * Commit. The order is the protocol: stop reading (so B's MARK, which B writes
		 * only after our SWITCH, is never read as data), freeze our TCP offset, announce
		 * it. The MARK waits for the hand-off (SENT): if SWITCH never reaches B, B must be
		 * able to resume TCP without meeting a MARK.
		 */
		up->rx_paused = ev->tcp_rx;
		up->tx_mark = ev->tcp_tx;
		san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
		san_act(out, SAN_UP_ACT_PAUSE_RX, 0, 0);
		san_act(out, SAN_UP_ACT_HOLD_TX, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_SEND_SWITCH, 0, up->tx_mark);
		up->state = SAN_UP_SWITCHING;
		return 0;
	case SAN_UP_EV_REJECT:
	case SAN_UP_EV_ABORT:
		/* B refused, or gave up before pausing: nothing to undo on either side. */
		san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_PROTOCOL));
	case SAN_UP_EV_TIMEOUT:
		return san_up_a_abort(up, out, SAN_R_TIMEOUT);
	case SAN_UP_EV_SIDE_CLOSED:
		san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
		return san_up_fallback(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_BAD_MSG:
		return san_up_a_abort(up, out, SAN_R_MALFORMED);
	case SAN_UP_EV_ABANDON:
		return san_up_a_abort(up, out, san_up_reason_or(ev->reason, SAN_R_LOCAL));
	case SAN_UP_EV_TCP_CLOSED:
		return san_up_a_abort(up, out, SAN_R_TCP);
	case SAN_UP_EV_SAN_ERROR:
		return san_up_a_abort(up, out, SAN_R_PROVIDER);
	case SAN_UP_EV_SWITCH:
		/* B claims to have committed before we did: its MARK may be in our stream. */
		san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_LOCAL_RESET:
		san_act(out, SAN_UP_ACT_CANCEL_TIMER, 0, 0);
		return san_up_reset(up, out, SAN_R_APP_RESET);
	default:
		return -EINVAL;
	}
}

static int san_up_a_switching(struct san_upgrade *up, const struct san_up_event *ev,
			      struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_SENT:
		san_act(out, SAN_UP_ACT_WRITE_MARK, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_START_SAN_TX, 0, 0);
		up->state = SAN_UP_COMMITTED;
		return 0;
	case SAN_UP_EV_SWITCH:
		/*
		 * B answered before our send completion was seen (verbs polls send and receive
		 * completions separately): B has our SWITCH, so it was handed off.
		 */
		if (!san_up_offset_ok(up, ev))
			return san_up_reset(up, out, SAN_R_PROTOCOL);
		san_act(out, SAN_UP_ACT_WRITE_MARK, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_START_SAN_TX, 0, 0);
		return san_up_peer_switch(up, ev, out);
	case SAN_UP_EV_NOT_SENT:
		/* B will see the side channel close without a SWITCH and resume TCP; so do we. */
		san_act(out, SAN_UP_ACT_RESUME_RX, 0, 0);
		san_act(out, SAN_UP_ACT_RELEASE_TX, 0, 0);
		return san_up_fallback(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_SEND_UNKNOWN:
	case SAN_UP_EV_SIDE_CLOSED:
	case SAN_UP_EV_SAN_ERROR:
		/* B may or may not have our SWITCH: neither TCP nor the SAN can be trusted. */
		return san_up_reset(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_ABORT:
	case SAN_UP_EV_BAD_MSG:
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_TCP_CLOSED:
		return san_up_reset(up, out, SAN_R_TCP);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	case SAN_UP_EV_ABANDON:
		san_act(out, SAN_UP_ACT_DEFER, ev->reason, 0);
		return 0;
	case SAN_UP_EV_TIMEOUT:
		return 0; /* cancelled at commit; a stale expiry changes nothing */
	default:
		return -EINVAL;
	}
}

static int san_up_a_committed(struct san_upgrade *up, const struct san_up_event *ev,
			      struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_SWITCH:
		return san_up_peer_switch(up, ev, out);
	case SAN_UP_EV_SIDE_CLOSED:
	case SAN_UP_EV_SAN_ERROR:
		return san_up_reset(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_ABORT:
	case SAN_UP_EV_BAD_MSG:
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_TCP_CLOSED:
		return san_up_reset(up, out, SAN_R_TCP);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	case SAN_UP_EV_ABANDON:
		san_act(out, SAN_UP_ACT_DEFER, ev->reason, 0);
		return 0;
	case SAN_UP_EV_TIMEOUT:
	case SAN_UP_EV_SENT:
		return 0;
	default:
		return -EINVAL;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Side B.                                                                                    */

static int san_up_b_idle(struct san_upgrade *up, const struct san_up_event *ev,
			 struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_PROPOSE_OK:
		/* Pause first: from the moment ACCEPT exists, A may commit and write its MARK. */
		up->rx_paused = ev->tcp_rx;
		san_act(out, SAN_UP_ACT_PAUSE_RX, 0, 0);
		san_act(out, SAN_UP_ACT_SEND_ACCEPT, 0, 0);
		up->state = SAN_UP_PAUSED;
		return 0;
	case SAN_UP_EV_PROPOSE_BAD:
		san_act(out, SAN_UP_ACT_SEND_REJECT, san_up_reason_or(ev->reason, SAN_R_MALFORMED),
			0);
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_MALFORMED));
	case SAN_UP_EV_BAD_MSG:
		san_act(out, SAN_UP_ACT_SEND_REJECT, SAN_R_MALFORMED, 0);
		return san_up_fallback(up, out, SAN_R_MALFORMED);
	case SAN_UP_EV_SWITCH:
		/* A claims a commit we never allowed: its MARK may already be in our stream. */
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_SIDE_CLOSED:
		return san_up_fallback(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_ABORT:
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_PROTOCOL));
	case SAN_UP_EV_ABANDON:
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_LOCAL));
	case SAN_UP_EV_TCP_CLOSED:
		return san_up_fallback(up, out, SAN_R_TCP);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	default:
		return -EINVAL;
	}
}

static int san_up_b_paused(struct san_upgrade *up, const struct san_up_event *ev,
			   struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_SWITCH:
		if (!san_up_offset_ok(up, ev))
			return san_up_reset(up, out, SAN_R_PROTOCOL);
		/*
		 * Commit our direction. A's reader paused before it sent SWITCH, so our MARK can
		 * go straight after our SWITCH: unlike A, B has no fallback left that a MARK
		 * could spoil, so it need not wait for the hand-off.
		 */
		up->tx_mark = ev->tcp_tx;
		san_act(out, SAN_UP_ACT_HOLD_TX, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_SEND_SWITCH, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_WRITE_MARK, 0, up->tx_mark);
		san_act(out, SAN_UP_ACT_START_SAN_TX, 0, 0);
		return san_up_peer_switch(up, ev, out);
	case SAN_UP_EV_ABORT:
		/* A had not written its MARK (it aborts only before committing): TCP is intact. */
		san_act(out, SAN_UP_ACT_RESUME_RX, 0, 0);
		return san_up_fallback(up, out, san_up_reason_or(ev->reason, SAN_R_PROTOCOL));
	case SAN_UP_EV_SIDE_CLOSED:
		/*
		 * No SWITCH before EOF means A never handed one off, and A writes its MARK only
		 * after the hand-off: there is no MARK in our TCP stream.
		 */
		san_act(out, SAN_UP_ACT_RESUME_RX, 0, 0);
		return san_up_fallback(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_BAD_MSG:
		/* A is not following the protocol; whether it committed is unknowable. */
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	case SAN_UP_EV_ABANDON:
	case SAN_UP_EV_TCP_CLOSED:
	case SAN_UP_EV_SAN_ERROR:
		/*
		 * Not ours to decide: A may be committing right now. A decides on ACCEPT without
		 * waiting, so the answer is one side-channel round trip away. A TCP error waits
		 * too: resuming now could hand A's MARK, queued before the error, to the app. A
		 * SAN failure will reset the connection if A commits, and not matter if it aborts.
		 */
		san_act(out, SAN_UP_ACT_DEFER, ev->reason, 0);
		return 0;
	default:
		return -EINVAL;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Both sides.                                                                                */

static int san_up_draining(struct san_upgrade *up, const struct san_up_event *ev,
			   struct san_up_actions *out)
{
	switch (ev->type) {
	case SAN_UP_EV_MARK_OK:
		san_act(out, SAN_UP_ACT_START_SAN_RX, 0, 0);
		san_act(out, SAN_UP_ACT_SWITCHED, 0, 0);
		up->state = SAN_UP_SWITCHED;
		return 0;
	case SAN_UP_EV_MARK_BAD:
		return san_up_reset(up, out, SAN_R_MARK);
	case SAN_UP_EV_TCP_CLOSED:
		/* A conforming peer writes its MARK before any FIN: EOF first is a failure. */
		return san_up_reset(up, out, SAN_R_TCP);
	case SAN_UP_EV_SAN_ERROR:
		return san_up_reset(up, out, SAN_R_CHANNEL);
	case SAN_UP_EV_ABORT:
		return san_up_reset(up, out, san_up_reason_or(ev->reason, SAN_R_PROTOCOL));
	case SAN_UP_EV_SWITCH:
	case SAN_UP_EV_BAD_MSG:
		return san_up_reset(up, out, SAN_R_PROTOCOL);
	case SAN_UP_EV_LOCAL_RESET:
		return san_up_reset(up, out, SAN_R_APP_RESET);
	case SAN_UP_EV_ABANDON:
		san_act(out, SAN_UP_ACT_DEFER, ev->reason, 0);
		return 0;
	case SAN_UP_EV_NOT_SENT:
	case SAN_UP_EV_SEND_UNKNOWN:
		/*
		 * B's SWITCH (B does not wait for the hand-off) failed: A may never learn where
		 * our MARK is. A's own SWITCH cannot fail here: B's answer proved it arrived.
		 */
		if (up->role == SAN_UP_ROLE_B)
			return san_up_reset(up, out, SAN_R_CHANNEL);
		return 0;
	case SAN_UP_EV_SIDE_CLOSED: /* both SWITCHes are in: the side channel has done its job */
	case SAN_UP_EV_SENT:
	case SAN_UP_EV_TIMEOUT:
		return 0;
	default:
		return -EINVAL;
	}
}

/* ------------------------------------------------------------------------------------------ */

void san_upgrade_init(struct san_upgrade *up, enum san_up_role role)
{
	*up = (struct san_upgrade){ .role = role, .state = SAN_UP_IDLE };
}

int san_upgrade_done(const struct san_upgrade *up)
{
	return up->state == SAN_UP_SWITCHED || up->state == SAN_UP_FALLBACK ||
	       up->state == SAN_UP_RESET;
}

/* Messages a peer can send us, in this role, whatever state we are in. */
static bool san_up_peer_msg(enum san_up_role role, enum san_up_ev e)
{
	switch (e) {
	case SAN_UP_EV_ACCEPT:
	case SAN_UP_EV_REJECT:
	case SAN_UP_EV_SWITCH:
	case SAN_UP_EV_ABORT:
		return true;
	case SAN_UP_EV_PROPOSE_OK:
	case SAN_UP_EV_PROPOSE_BAD:
		return role == SAN_UP_ROLE_B; /* only B listens for proposals */
	default:
		return false;
	}
}

static int san_up_dispatch(struct san_upgrade *up, const struct san_up_event *ev,
			   struct san_up_actions *out)
{
	bool a = up->role == SAN_UP_ROLE_A;

	switch (up->state) {
	case SAN_UP_IDLE:
		return a ? san_up_a_idle(up, ev, out) : san_up_b_idle(up, ev, out);
	case SAN_UP_PROPOSED:
		return a ? san_up_a_proposed(up, ev, out) : -EINVAL;
	case SAN_UP_SWITCHING:
		return a ? san_up_a_switching(up, ev, out) : -EINVAL;
	case SAN_UP_COMMITTED:
		return a ? san_up_a_committed(up, ev, out) : -EINVAL;
	case SAN_UP_PAUSED:
		return a ? -EINVAL : san_up_b_paused(up, ev, out);
	case SAN_UP_DRAINING:
		return san_up_draining(up, ev, out);
	default:
		return -EINVAL;
	}
}

int san_upgrade_step(struct san_upgrade *up, const struct san_up_event *ev,
		     struct san_up_actions *out)
{
	struct san_upgrade next = *up;
	int err;

	out->n = 0;
	if (ev->type < SAN_UP_EV_START || ev->type >= SAN_UP_NEVENTS)
		return -EINVAL;
	if (up->role != SAN_UP_ROLE_A && up->role != SAN_UP_ROLE_B)
		return -EINVAL;
	if (san_upgrade_done(up))
		return 0; /* terminal: late messages (an ACCEPT after our timeout) are ignored */

	err = san_up_dispatch(&next, ev, out);
	if (err == -EINVAL && san_up_peer_msg(up->role, ev->type)) {
		/*
		 * A message the peer may send but not now (a second ACCEPT, a SWITCH before
		 * ours): the peer is broken, which each state handles as BAD_MSG. Only events
		 * the engine itself produces can be -EINVAL.
		 */
		struct san_up_event bad = *ev;

		bad.type = SAN_UP_EV_BAD_MSG;
		next = *up;
		out->n = 0;
		err = san_up_dispatch(&next, &bad, out);
	}
	if (err) {
		out->n = 0;
		return err;
	}
	*up = next;
	return 0;
}

enum san_conn_state san_upgrade_conn_state(const struct san_upgrade *up)
{
	switch (up->state) {
	case SAN_UP_IDLE:
		return SAN_CONN_CANDIDATE;
	case SAN_UP_SWITCHED:
		return SAN_CONN_SWITCHED;
	case SAN_UP_FALLBACK:
		return SAN_CONN_FALLBACK;
	case SAN_UP_RESET:
		return SAN_CONN_CLOSED;
	default:
		return SAN_CONN_UPGRADING;
	}
}

static const char *const san_up_state_names[SAN_UP_NSTATES] = {
	[SAN_UP_IDLE] = "idle",		  [SAN_UP_PROPOSED] = "proposed",
	[SAN_UP_PAUSED] = "paused",	  [SAN_UP_SWITCHING] = "switching",
	[SAN_UP_COMMITTED] = "committed", [SAN_UP_DRAINING] = "draining",
	[SAN_UP_SWITCHED] = "switched",	  [SAN_UP_FALLBACK] = "fallback",
	[SAN_UP_RESET] = "reset",
};

static const char *const san_up_ev_names[SAN_UP_NEVENTS] = {
	[SAN_UP_EV_START] = "start",
	[SAN_UP_EV_PROPOSE_OK] = "propose_ok",
	[SAN_UP_EV_PROPOSE_BAD] = "propose_bad",
	[SAN_UP_EV_ACCEPT] = "accept",
	[SAN_UP_EV_REJECT] = "reject",
	[SAN_UP_EV_SWITCH] = "switch",
	[SAN_UP_EV_ABORT] = "abort",
	[SAN_UP_EV_BAD_MSG] = "bad_msg",
	[SAN_UP_EV_TIMEOUT] = "timeout",
	[SAN_UP_EV_SENT] = "sent",
	[SAN_UP_EV_NOT_SENT] = "not_sent",
	[SAN_UP_EV_SEND_UNKNOWN] = "send_unknown",
	[SAN_UP_EV_SIDE_CLOSED] = "side_closed",
	[SAN_UP_EV_SAN_ERROR] = "san_error",
	[SAN_UP_EV_TCP_CLOSED] = "tcp_closed",
	[SAN_UP_EV_MARK_OK] = "mark_ok",
	[SAN_UP_EV_MARK_BAD] = "mark_bad",
	[SAN_UP_EV_ABANDON] = "abandon",
	[SAN_UP_EV_LOCAL_RESET] = "local_reset",
};

static const char *const san_up_act_names[SAN_UP_NACTS] = {
	[SAN_UP_ACT_SEND_PROPOSE] = "send_propose",
	[SAN_UP_ACT_SEND_ACCEPT] = "send_accept",
	[SAN_UP_ACT_SEND_REJECT] = "send_reject",
	[SAN_UP_ACT_SEND_SWITCH] = "send_switch",
	[SAN_UP_ACT_SEND_ABORT] = "send_abort",
	[SAN_UP_ACT_ARM_TIMER] = "arm_timer",
	[SAN_UP_ACT_CANCEL_TIMER] = "cancel_timer",
	[SAN_UP_ACT_PAUSE_RX] = "pause_rx",
	[SAN_UP_ACT_RESUME_RX] = "resume_rx",
	[SAN_UP_ACT_HOLD_TX] = "hold_tx",
	[SAN_UP_ACT_RELEASE_TX] = "release_tx",
	[SAN_UP_ACT_WRITE_MARK] = "write_mark",
	[SAN_UP_ACT_START_SAN_TX] = "start_san_tx",
	[SAN_UP_ACT_DRAIN_TO] = "drain_to",
	[SAN_UP_ACT_START_SAN_RX] = "start_san_rx",
	[SAN_UP_ACT_CLOSE_SIDE] = "close_side",
	[SAN_UP_ACT_DEFER] = "defer",
	[SAN_UP_ACT_FALLBACK] = "fallback",
	[SAN_UP_ACT_RESET] = "reset",
	[SAN_UP_ACT_SWITCHED] = "switched",
};

const char *san_up_state_name(enum san_up_state s)
{
	return (unsigned int)s < SAN_UP_NSTATES ? san_up_state_names[s] : "?";
}

const char *san_up_ev_name(enum san_up_ev e)
{
	return (unsigned int)e < SAN_UP_NEVENTS && san_up_ev_names[e] ? san_up_ev_names[e] : "?";
}

const char *san_up_act_name(enum san_up_act a)
{
	return (unsigned int)a < SAN_UP_NACTS && san_up_act_names[a] ? san_up_act_names[a] : "?";
}
