/* tests/unit: the upgrade state machine — its full table, and a model check of two sides. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/san_upgrade.h"
#include "proto/san_wire.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_stateset.h"

#define ROLE_A SAN_UP_ROLE_A
#define ROLE_B SAN_UP_ROLE_B

/* ------------------------------------------------------------------------------------------ */
/*
 * The transition table: every (role, non-terminal state, event). This is the reviewed spec
 * (docs/protocol.md §Upgrade reproduces it); a change of behaviour must change a row here.
 * The expected state -1 means -EINVAL: an event the engine cannot produce in that state.
 */

struct up_row {
	enum san_up_role role;
	enum san_up_state from;
	enum san_up_ev ev;
	int to;
	const char *acts; /* action names, space separated, in order */
};

/* clang-format off */
#define A ROLE_A
#define B ROLE_B
#define S(x) SAN_UP_##x
#define E(x) SAN_UP_EV_##x
#define EINVAL_ROW (-1)
static const struct up_row up_table[] = {
	{ A, S(IDLE), E(START), S(PROPOSED), "send_propose arm_timer" },
	{ A, S(IDLE), E(PROPOSE_OK), EINVAL_ROW, "" },
	{ A, S(IDLE), E(PROPOSE_BAD), EINVAL_ROW, "" },
	{ A, S(IDLE), E(ACCEPT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(REJECT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(SWITCH), EINVAL_ROW, "" },
	{ A, S(IDLE), E(ABORT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(BAD_MSG), EINVAL_ROW, "" },
	{ A, S(IDLE), E(TIMEOUT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(SENT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(NOT_SENT), EINVAL_ROW, "" },
	{ A, S(IDLE), E(SEND_UNKNOWN), EINVAL_ROW, "" },
	{ A, S(IDLE), E(SIDE_CLOSED), EINVAL_ROW, "" },
	{ A, S(IDLE), E(SAN_ERROR), EINVAL_ROW, "" },
	{ A, S(IDLE), E(TCP_CLOSED), S(FALLBACK), "close_side fallback" },
	{ A, S(IDLE), E(MARK_OK), EINVAL_ROW, "" },
	{ A, S(IDLE), E(MARK_BAD), EINVAL_ROW, "" },
	{ A, S(IDLE), E(ABANDON), S(FALLBACK), "close_side fallback" },
	{ A, S(IDLE), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ A, S(PROPOSED), E(START), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(PROPOSE_OK), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(PROPOSE_BAD), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(ACCEPT), S(SWITCHING), "cancel_timer pause_rx hold_tx send_switch" },
	{ A, S(PROPOSED), E(REJECT), S(FALLBACK), "cancel_timer close_side fallback" },
	{ A, S(PROPOSED), E(SWITCH), S(RESET), "cancel_timer close_side reset" },
	{ A, S(PROPOSED), E(ABORT), S(FALLBACK), "cancel_timer close_side fallback" },
	{ A, S(PROPOSED), E(BAD_MSG), S(FALLBACK), "cancel_timer send_abort close_side fallback" },
	{ A, S(PROPOSED), E(TIMEOUT), S(FALLBACK), "cancel_timer send_abort close_side fallback" },
	{ A, S(PROPOSED), E(SENT), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(NOT_SENT), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(SEND_UNKNOWN), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(SIDE_CLOSED), S(FALLBACK), "cancel_timer close_side fallback" },
	{ A, S(PROPOSED), E(SAN_ERROR), S(FALLBACK), "cancel_timer send_abort close_side fallback" },
	{ A, S(PROPOSED), E(TCP_CLOSED), S(FALLBACK), "cancel_timer send_abort close_side fallback" },
	{ A, S(PROPOSED), E(MARK_OK), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(MARK_BAD), EINVAL_ROW, "" },
	{ A, S(PROPOSED), E(ABANDON), S(FALLBACK), "cancel_timer send_abort close_side fallback" },
	{ A, S(PROPOSED), E(LOCAL_RESET), S(RESET), "cancel_timer close_side reset" },
	{ A, S(SWITCHING), E(START), EINVAL_ROW, "" },
	{ A, S(SWITCHING), E(PROPOSE_OK), EINVAL_ROW, "" },
	{ A, S(SWITCHING), E(PROPOSE_BAD), EINVAL_ROW, "" },
	{ A, S(SWITCHING), E(ACCEPT), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(REJECT), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(SWITCH), S(DRAINING), "write_mark start_san_tx drain_to" },
	{ A, S(SWITCHING), E(ABORT), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(BAD_MSG), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(TIMEOUT), S(SWITCHING), "" },
	{ A, S(SWITCHING), E(SENT), S(COMMITTED), "write_mark start_san_tx" },
	{ A, S(SWITCHING), E(NOT_SENT), S(FALLBACK), "resume_rx release_tx close_side fallback" },
	{ A, S(SWITCHING), E(SEND_UNKNOWN), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(SIDE_CLOSED), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(SAN_ERROR), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(TCP_CLOSED), S(RESET), "close_side reset" },
	{ A, S(SWITCHING), E(MARK_OK), EINVAL_ROW, "" },
	{ A, S(SWITCHING), E(MARK_BAD), EINVAL_ROW, "" },
	{ A, S(SWITCHING), E(ABANDON), S(SWITCHING), "defer" },
	{ A, S(SWITCHING), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(START), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(PROPOSE_OK), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(PROPOSE_BAD), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(ACCEPT), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(REJECT), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(SWITCH), S(DRAINING), "drain_to" },
	{ A, S(COMMITTED), E(ABORT), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(BAD_MSG), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(TIMEOUT), S(COMMITTED), "" },
	{ A, S(COMMITTED), E(SENT), S(COMMITTED), "" },
	{ A, S(COMMITTED), E(NOT_SENT), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(SEND_UNKNOWN), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(SIDE_CLOSED), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(SAN_ERROR), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(TCP_CLOSED), S(RESET), "close_side reset" },
	{ A, S(COMMITTED), E(MARK_OK), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(MARK_BAD), EINVAL_ROW, "" },
	{ A, S(COMMITTED), E(ABANDON), S(COMMITTED), "defer" },
	{ A, S(COMMITTED), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(START), EINVAL_ROW, "" },
	{ A, S(DRAINING), E(PROPOSE_OK), EINVAL_ROW, "" },
	{ A, S(DRAINING), E(PROPOSE_BAD), EINVAL_ROW, "" },
	{ A, S(DRAINING), E(ACCEPT), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(REJECT), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(SWITCH), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(ABORT), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(BAD_MSG), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(TIMEOUT), S(DRAINING), "" },
	{ A, S(DRAINING), E(SENT), S(DRAINING), "" },
	{ A, S(DRAINING), E(NOT_SENT), S(DRAINING), "" },
	{ A, S(DRAINING), E(SEND_UNKNOWN), S(DRAINING), "" },
	{ A, S(DRAINING), E(SIDE_CLOSED), S(DRAINING), "" },
	{ A, S(DRAINING), E(SAN_ERROR), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(TCP_CLOSED), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(MARK_OK), S(SWITCHED), "start_san_rx switched" },
	{ A, S(DRAINING), E(MARK_BAD), S(RESET), "close_side reset" },
	{ A, S(DRAINING), E(ABANDON), S(DRAINING), "defer" },
	{ A, S(DRAINING), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ B, S(IDLE), E(START), EINVAL_ROW, "" },
	{ B, S(IDLE), E(PROPOSE_OK), S(PAUSED), "pause_rx send_accept" },
	{ B, S(IDLE), E(PROPOSE_BAD), S(FALLBACK), "send_reject close_side fallback" },
	{ B, S(IDLE), E(ACCEPT), S(FALLBACK), "send_reject close_side fallback" },
	{ B, S(IDLE), E(REJECT), S(FALLBACK), "send_reject close_side fallback" },
	{ B, S(IDLE), E(SWITCH), S(RESET), "close_side reset" },
	{ B, S(IDLE), E(ABORT), S(FALLBACK), "close_side fallback" },
	{ B, S(IDLE), E(BAD_MSG), S(FALLBACK), "send_reject close_side fallback" },
	{ B, S(IDLE), E(TIMEOUT), EINVAL_ROW, "" },
	{ B, S(IDLE), E(SENT), EINVAL_ROW, "" },
	{ B, S(IDLE), E(NOT_SENT), EINVAL_ROW, "" },
	{ B, S(IDLE), E(SEND_UNKNOWN), EINVAL_ROW, "" },
	{ B, S(IDLE), E(SIDE_CLOSED), S(FALLBACK), "close_side fallback" },
	{ B, S(IDLE), E(SAN_ERROR), EINVAL_ROW, "" },
	{ B, S(IDLE), E(TCP_CLOSED), S(FALLBACK), "close_side fallback" },
	{ B, S(IDLE), E(MARK_OK), EINVAL_ROW, "" },
	{ B, S(IDLE), E(MARK_BAD), EINVAL_ROW, "" },
	{ B, S(IDLE), E(ABANDON), S(FALLBACK), "close_side fallback" },
	{ B, S(IDLE), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(START), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(PROPOSE_OK), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(PROPOSE_BAD), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(ACCEPT), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(REJECT), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(SWITCH), S(DRAINING), "hold_tx send_switch write_mark start_san_tx drain_to" },
	{ B, S(PAUSED), E(ABORT), S(FALLBACK), "resume_rx close_side fallback" },
	{ B, S(PAUSED), E(BAD_MSG), S(RESET), "close_side reset" },
	{ B, S(PAUSED), E(TIMEOUT), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(SENT), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(NOT_SENT), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(SEND_UNKNOWN), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(SIDE_CLOSED), S(FALLBACK), "resume_rx close_side fallback" },
	{ B, S(PAUSED), E(SAN_ERROR), S(PAUSED), "defer" },
	{ B, S(PAUSED), E(TCP_CLOSED), S(PAUSED), "defer" },
	{ B, S(PAUSED), E(MARK_OK), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(MARK_BAD), EINVAL_ROW, "" },
	{ B, S(PAUSED), E(ABANDON), S(PAUSED), "defer" },
	{ B, S(PAUSED), E(LOCAL_RESET), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(START), EINVAL_ROW, "" },
	{ B, S(DRAINING), E(PROPOSE_OK), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(PROPOSE_BAD), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(ACCEPT), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(REJECT), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(SWITCH), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(ABORT), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(BAD_MSG), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(TIMEOUT), S(DRAINING), "" },
	{ B, S(DRAINING), E(SENT), S(DRAINING), "" },
	{ B, S(DRAINING), E(NOT_SENT), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(SEND_UNKNOWN), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(SIDE_CLOSED), S(DRAINING), "" },
	{ B, S(DRAINING), E(SAN_ERROR), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(TCP_CLOSED), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(MARK_OK), S(SWITCHED), "start_san_rx switched" },
	{ B, S(DRAINING), E(MARK_BAD), S(RESET), "close_side reset" },
	{ B, S(DRAINING), E(ABANDON), S(DRAINING), "defer" },
	{ B, S(DRAINING), E(LOCAL_RESET), S(RESET), "close_side reset" },
};
#undef A
#undef B
#undef S
#undef E
/* clang-format on */

/* Offsets used to reach a state: A wrote 100 and read 50; B wrote 70 and read 40. */
static void drive(struct san_upgrade *u, enum san_up_role role, enum san_up_state st)
{
	struct san_up_actions a;
	struct san_up_event e;

	san_upgrade_init(u, role);
	if (st == SAN_UP_IDLE)
		return;
	if (role == ROLE_A) {
		e = (struct san_up_event){ .type = SAN_UP_EV_START };
		ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
		if (st == SAN_UP_PROPOSED)
			return;
		e = (struct san_up_event){ .type = SAN_UP_EV_ACCEPT, .tcp_tx = 100, .tcp_rx = 50 };
		ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
		if (st == SAN_UP_SWITCHING)
			return;
		e = (struct san_up_event){ .type = SAN_UP_EV_SENT };
		ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
		if (st == SAN_UP_COMMITTED)
			return;
		e = (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 60 };
	} else {
		e = (struct san_up_event){ .type = SAN_UP_EV_PROPOSE_OK,
					   .tcp_tx = 70,
					   .tcp_rx = 40 };
		ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
		if (st == SAN_UP_PAUSED)
			return;
		e = (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 100, .tcp_tx = 70 };
	}
	ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
}

static void acts_str(const struct san_up_actions *a, char *buf, size_t len)
{
	buf[0] = 0;
	for (unsigned int i = 0; i < a->n; i++) {
		size_t n = strlen(buf);

		snprintf(buf + n, len - n, "%s%s", i ? " " : "", san_up_act_name(a->a[i].act));
	}
}

START_TEST(test_table)
{
	const struct up_row *r = &up_table[_i];
	struct san_upgrade u, before;
	struct san_up_actions a;
	struct san_up_event e = {
		.type = r->ev,
		.reason = r->ev == SAN_UP_EV_ACCEPT ? 0 : SAN_R_POLICY,
		.offset = r->role == ROLE_A ? 60 : 100,
		.tcp_tx = r->role == ROLE_A ? 100 : 70,
		.tcp_rx = r->role == ROLE_A ? 50 : 40,
	};
	char got[256];
	int err;

	drive(&u, r->role, r->from);
	ck_assert_int_eq(u.state, r->from);
	before = u;
	err = san_upgrade_step(&u, &e, &a);
	acts_str(&a, got, sizeof(got));
	if (r->to < 0) {
		ck_assert_msg(err == -EINVAL, "%c %s + %s: expected -EINVAL, got %d -> %s [%s]",
			      r->role == ROLE_A ? 'A' : 'B', san_up_state_name(r->from),
			      san_up_ev_name(r->ev), err, san_up_state_name(u.state), got);
		ck_assert_uint_eq(a.n, 0);
		ck_assert_mem_eq(&u, &before, sizeof(u)); /* unchanged */
		return;
	}
	ck_assert_msg(err == 0 && (int)u.state == r->to && !strcmp(got, r->acts),
		      "%c %s + %s: got %d -> %s [%s], expected %s [%s]",
		      r->role == ROLE_A ? 'A' : 'B', san_up_state_name(r->from),
		      san_up_ev_name(r->ev), err, san_up_state_name(u.state), got,
		      san_up_state_name(r->to), r->acts);
}
END_TEST

/* The table covers every non-terminal (role, state) with every event exactly once. */
START_TEST(test_table_complete)
{
	static const enum san_up_state a_states[] = { SAN_UP_IDLE, SAN_UP_PROPOSED,
						      SAN_UP_SWITCHING, SAN_UP_COMMITTED,
						      SAN_UP_DRAINING };
	static const enum san_up_state b_states[] = { SAN_UP_IDLE, SAN_UP_PAUSED, SAN_UP_DRAINING };
	size_t n = sizeof(up_table) / sizeof(up_table[0]);

	ck_assert_uint_eq(n, (5 + 3) * (SAN_UP_NEVENTS - 1));
	for (int role = ROLE_A; role <= ROLE_B; role++) {
		const enum san_up_state *st = role == ROLE_A ? a_states : b_states;
		int nst = role == ROLE_A ? 5 : 3;

		for (int i = 0; i < nst; i++)
			for (int ev = SAN_UP_EV_START; ev < SAN_UP_NEVENTS; ev++) {
				int found = 0;

				for (size_t k = 0; k < n; k++)
					found += (int)up_table[k].role == role &&
						 up_table[k].from == st[i] &&
						 (int)up_table[k].ev == ev;
				ck_assert_msg(found == 1, "row %d/%s/%s found %d times", role,
					      san_up_state_name(st[i]), san_up_ev_name(ev), found);
			}
	}
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Details the table does not show: arguments, reasons, offsets, terminal states.             */

static struct san_up_actions step(struct san_upgrade *u, struct san_up_event e)
{
	struct san_up_actions a;

	ck_assert_int_eq(san_upgrade_step(u, &e, &a), 0);
	return a;
}

START_TEST(test_offsets_carried)
{
	struct san_upgrade a, b;
	struct san_up_actions x;

	san_upgrade_init(&a, ROLE_A);
	san_upgrade_init(&b, ROLE_B);
	step(&a, (struct san_up_event){ .type = SAN_UP_EV_START });
	x = step(&b,
		 (struct san_up_event){ .type = SAN_UP_EV_PROPOSE_OK, .tcp_tx = 7, .tcp_rx = 3 });
	ck_assert_int_eq(x.a[0].act, SAN_UP_ACT_PAUSE_RX); /* pause before ACCEPT exists */
	ck_assert_int_eq(x.a[1].act, SAN_UP_ACT_SEND_ACCEPT);
	x = step(&a, (struct san_up_event){ .type = SAN_UP_EV_ACCEPT, .tcp_tx = 3, .tcp_rx = 5 });
	ck_assert_int_eq(x.a[2].act, SAN_UP_ACT_HOLD_TX);
	ck_assert_uint_eq(x.a[2].arg, 3);
	ck_assert_int_eq(x.a[3].act, SAN_UP_ACT_SEND_SWITCH);
	ck_assert_uint_eq(x.a[3].arg, 3);
	x = step(&a, (struct san_up_event){ .type = SAN_UP_EV_SENT });
	ck_assert_int_eq(x.a[0].act, SAN_UP_ACT_WRITE_MARK);
	ck_assert_uint_eq(x.a[0].arg, 3);
	/* B learns X_A = 3 while it has read 3: nothing to drain, the MARK is next. */
	x = step(&b, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 3, .tcp_tx = 9 });
	ck_assert_int_eq(x.a[1].act, SAN_UP_ACT_SEND_SWITCH);
	ck_assert_uint_eq(x.a[1].arg, 9);
	ck_assert_int_eq(x.a[4].act, SAN_UP_ACT_DRAIN_TO);
	ck_assert_uint_eq(x.a[4].arg, 3);
	ck_assert_uint_eq(b.tx_mark, 9);
	ck_assert_uint_eq(b.rx_mark, 3);
	x = step(&a, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 9 });
	ck_assert_int_eq(x.a[0].act, SAN_UP_ACT_DRAIN_TO);
	ck_assert_uint_eq(x.a[0].arg, 9);
	step(&a, (struct san_up_event){ .type = SAN_UP_EV_MARK_OK });
	step(&b, (struct san_up_event){ .type = SAN_UP_EV_MARK_OK });
	ck_assert_int_eq(a.state, SAN_UP_SWITCHED);
	ck_assert_int_eq(b.state, SAN_UP_SWITCHED);
	ck_assert_int_eq(san_upgrade_conn_state(&a), SAN_CONN_SWITCHED);
}
END_TEST

START_TEST(test_bad_offsets_reset)
{
	struct san_upgrade u;

	/* B had already read 40 bytes when it paused: A cannot have sent fewer. */
	drive(&u, ROLE_B, SAN_UP_PAUSED);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 39 });
	ck_assert_int_eq(u.state, SAN_UP_RESET);
	ck_assert_uint_eq(u.reason, SAN_R_PROTOCOL);
	drive(&u, ROLE_B, SAN_UP_PAUSED);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = SAN_OFFSET_MAX });
	ck_assert_int_eq(u.state, SAN_UP_RESET);
	drive(&u, ROLE_A, SAN_UP_COMMITTED);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 49 });
	ck_assert_int_eq(u.state, SAN_UP_RESET);
	/* No MARK is written when the early SWITCH itself is bad. */
	drive(&u, ROLE_A, SAN_UP_SWITCHING);
	ck_assert_uint_eq(
		step(&u, (struct san_up_event){ .type = SAN_UP_EV_SWITCH, .offset = 1 }).a[0].act,
		SAN_UP_ACT_CLOSE_SIDE);
	ck_assert_int_eq(u.state, SAN_UP_RESET);
}
END_TEST

START_TEST(test_reasons)
{
	struct san_upgrade u;
	struct san_up_actions x;

	drive(&u, ROLE_A, SAN_UP_PROPOSED);
	x = step(&u, (struct san_up_event){ .type = SAN_UP_EV_ACCEPT, .reason = SAN_R_RESOURCES });
	ck_assert_int_eq(x.a[1].act, SAN_UP_ACT_SEND_ABORT);
	ck_assert_uint_eq(x.a[1].reason, SAN_R_RESOURCES);
	ck_assert_int_eq(u.state, SAN_UP_FALLBACK);
	ck_assert_uint_eq(u.reason, SAN_R_RESOURCES);
	ck_assert_int_eq(san_upgrade_conn_state(&u), SAN_CONN_FALLBACK);

	drive(&u, ROLE_A, SAN_UP_PROPOSED);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_REJECT, .reason = SAN_R_NOT_OWNER });
	ck_assert_uint_eq(u.reason, SAN_R_NOT_OWNER);

	drive(&u, ROLE_B, SAN_UP_IDLE);
	x = step(&u, (struct san_up_event){ .type = SAN_UP_EV_PROPOSE_BAD,
					    .reason = SAN_R_CREDENTIALS });
	ck_assert_int_eq(x.a[0].act, SAN_UP_ACT_SEND_REJECT);
	ck_assert_uint_eq(x.a[0].reason, SAN_R_CREDENTIALS);

	drive(&u, ROLE_A, SAN_UP_DRAINING);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_MARK_BAD });
	ck_assert_uint_eq(u.reason, SAN_R_MARK);
	ck_assert_int_eq(san_upgrade_conn_state(&u), SAN_CONN_CLOSED);
}
END_TEST

/* After our timeout, a late ACCEPT (and anything else) changes nothing. */
START_TEST(test_terminal_ignores)
{
	struct san_upgrade u, before;
	struct san_up_actions x;

	drive(&u, ROLE_A, SAN_UP_PROPOSED);
	step(&u, (struct san_up_event){ .type = SAN_UP_EV_TIMEOUT });
	ck_assert_int_eq(u.state, SAN_UP_FALLBACK);
	ck_assert_uint_eq(u.reason, SAN_R_TIMEOUT);
	before = u;
	for (int ev = SAN_UP_EV_START; ev < SAN_UP_NEVENTS; ev++) {
		x = step(&u, (struct san_up_event){ .type = ev });
		ck_assert_uint_eq(x.n, 0);
		ck_assert_mem_eq(&u, &before, sizeof(u));
	}
	ck_assert(san_upgrade_done(&u));
}
END_TEST

START_TEST(test_invalid_input)
{
	struct san_upgrade u;
	struct san_up_actions x;

	san_upgrade_init(&u, ROLE_A);
	ck_assert_int_eq(san_upgrade_step(&u, &(struct san_up_event){ .type = 0 }, &x), -EINVAL);
	ck_assert_int_eq(san_upgrade_step(&u, &(struct san_up_event){ .type = SAN_UP_NEVENTS }, &x),
			 -EINVAL);
	u.role = 0;
	ck_assert_int_eq(
		san_upgrade_step(&u, &(struct san_up_event){ .type = SAN_UP_EV_START }, &x),
		-EINVAL);
	ck_assert_str_eq(san_up_state_name(SAN_UP_PAUSED), "paused");
	ck_assert_str_eq(san_up_state_name(99), "?");
	ck_assert_str_eq(san_up_ev_name(SAN_UP_EV_MARK_BAD), "mark_bad");
	ck_assert_str_eq(san_up_act_name(SAN_UP_ACT_HOLD_TX), "hold_tx");
	ck_assert_str_eq(san_up_act_name(0), "?");
	san_upgrade_init(&u, ROLE_B);
	ck_assert_int_eq(san_upgrade_conn_state(&u), SAN_CONN_CANDIDATE);
	drive(&u, ROLE_B, SAN_UP_PAUSED);
	ck_assert_int_eq(san_upgrade_conn_state(&u), SAN_CONN_UPGRADING);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/*
 * Model check of the whole handshake: two san_upgrade machines, driven by a miniature engine
 * that carries out their actions on byte streams, explored over every interleaving of
 *   the applications: each sends K numbered units at any moment (to TCP, to the hold queue,
 *     or to the SAN, as the actions direct) and reads whatever its reader may read;
 *   the channels: TCP and SAN byte streams, the side channel (FIFO, EOF after queued
 *     messages), A's hand-off completion;
 *   B's verdict on PROPOSE and A's on ACCEPT (accept or refuse);
 *   A's ACCEPT timer; an application abandoning the upgrade (close, policy);
 *   faults, one per run: the side channel breaks (queued messages still arrive, later ones
 *     do not), or A's SWITCH send fails ambiguously (delivered or not, A cannot tell).
 * Checked on every path: each reader gets the peer's units exactly in order, never a MARK;
 * every MARK is found exactly at the announced offset; no timer outlives the decision; the
 * machines never see an event they reject. Checked where nothing more can happen: neither
 * side is stuck mid-upgrade; without a reset both sides agree (both switched or both on
 * TCP) and every unit arrived; a reset happens only after a fault.
 */

#define K 2 /* units each application sends */
#define Q 8 /* longest queue */
#define MARK 0xfe

enum { TX_TCP, TX_HOLD, TX_SAN };
enum { RX_NORMAL, RX_PAUSED, RX_DRAIN, RX_SAN, RX_DEAD };
enum { SM_PROPOSE = 1, SM_ACCEPT, SM_REJECT, SM_SWITCH, SM_ABORT };
enum { DEFER_TCP = 1, DEFER_ABANDON = 2, DEFER_SAN = 4 };

/* Only uint8_t fields: no padding, so a state is its own hash key. */
struct mside {
	uint8_t state, reason, tx_mark, rx_paused, rx_mark; /* struct san_upgrade, narrowed */
	uint8_t app_sent, tcp_tx, held, tx_mode;
	uint8_t rx_mode, drain_to, tcp_rx, delivered;
	uint8_t timer, sent_pending, not_sent_pending;
	uint8_t abandoned, rst_seen, eof_seen, reset;
	uint8_t deferred; /* DEFER_* events to feed again after the next state change */
};

struct mworld {
	struct mside s[2];	       /* 0 = A, 1 = B */
	uint8_t tcp[2][Q], tcp_len[2]; /* stream written by side i */
	uint8_t san[2][Q], san_len[2];
	uint8_t sq[2][Q], sarg[2][Q], sq_len[2], s_eof[2]; /* side channel written by side i */
	uint8_t broken, fault_used;
};

static const char *m_violation;

static void m_fail(const char *why)
{
	if (!m_violation)
		m_violation = why;
}

static void push(uint8_t *q, uint8_t *len, uint8_t v)
{
	if (*len >= Q) {
		m_fail("queue overflow");
		return;
	}
	q[(*len)++] = v;
}

static uint8_t pop(uint8_t *q, uint8_t *len)
{
	uint8_t v = q[0];

	memmove(q, q + 1, Q - 1);
	(*len)--;
	return v;
}

static void side_send(struct mworld *w, int x, uint8_t msg, uint8_t arg)
{
	if (w->broken || w->s_eof[x])
		return; /* lost: the peer will see EOF instead */
	push(w->sarg[x], &w->sq_len[x], arg);
	w->sq_len[x]--;
	push(w->sq[x], &w->sq_len[x], msg);
}

static void m_apply(struct mworld *w, int x, const struct san_up_action *a)
{
	struct mside *s = &w->s[x];

	switch (a->act) {
	case SAN_UP_ACT_SEND_PROPOSE:
		side_send(w, x, SM_PROPOSE, 0);
		break;
	case SAN_UP_ACT_SEND_ACCEPT:
		side_send(w, x, SM_ACCEPT, 0);
		break;
	case SAN_UP_ACT_SEND_REJECT:
		side_send(w, x, SM_REJECT, 0);
		break;
	case SAN_UP_ACT_SEND_ABORT:
		side_send(w, x, SM_ABORT, 0);
		break;
	case SAN_UP_ACT_SEND_SWITCH:
		if (a->arg != s->tcp_tx)
			m_fail("SWITCH offset is not the TCP bytes written");
		if (w->broken || w->s_eof[x]) {
			if (x == 0)
				s->not_sent_pending = 1;
			break;
		}
		side_send(w, x, SM_SWITCH, (uint8_t)a->arg);
		if (x == 0)
			s->sent_pending = 1;
		break;
	case SAN_UP_ACT_ARM_TIMER:
		s->timer = 1;
		break;
	case SAN_UP_ACT_CANCEL_TIMER:
		s->timer = 0;
		break;
	case SAN_UP_ACT_PAUSE_RX:
		if (s->rx_mode != RX_NORMAL)
			m_fail("pause of a reader that is not reading TCP");
		s->rx_mode = RX_PAUSED;
		break;
	case SAN_UP_ACT_RESUME_RX:
		if (s->rx_mode != RX_PAUSED)
			m_fail("resume of a reader that is not paused");
		s->rx_mode = RX_NORMAL;
		break;
	case SAN_UP_ACT_HOLD_TX:
		if (s->tx_mode != TX_TCP || a->arg != s->tcp_tx)
			m_fail("hold at the wrong offset");
		s->tx_mode = TX_HOLD;
		break;
	case SAN_UP_ACT_RELEASE_TX:
		if (s->tx_mode != TX_HOLD)
			m_fail("release without hold");
		for (int u = s->app_sent - s->held; u < s->app_sent; u++) {
			push(w->tcp[x], &w->tcp_len[x], (uint8_t)u);
			s->tcp_tx++;
		}
		s->held = 0;
		s->tx_mode = TX_TCP;
		break;
	case SAN_UP_ACT_WRITE_MARK:
		if (a->arg != s->tcp_tx || s->tx_mode != TX_HOLD)
			m_fail("MARK not right after the announced offset");
		push(w->tcp[x], &w->tcp_len[x], MARK);
		break;
	case SAN_UP_ACT_START_SAN_TX:
		for (int u = s->app_sent - s->held; u < s->app_sent; u++)
			push(w->san[x], &w->san_len[x], (uint8_t)u);
		s->held = 0;
		s->tx_mode = TX_SAN;
		break;
	case SAN_UP_ACT_DRAIN_TO:
		if (s->rx_mode != RX_PAUSED)
			m_fail("drain of a reader that was not paused");
		s->rx_mode = RX_DRAIN;
		s->drain_to = (uint8_t)a->arg;
		break;
	case SAN_UP_ACT_START_SAN_RX:
		if (s->rx_mode != RX_DRAIN)
			m_fail("SAN reads before the MARK");
		s->rx_mode = RX_SAN;
		break;
	case SAN_UP_ACT_CLOSE_SIDE:
		w->s_eof[x] = 1;
		break;
	case SAN_UP_ACT_RESET:
		s->reset = 1;
		s->rx_mode = RX_DEAD;
		s->timer = 0;
		break;
	default: /* DEFER, FALLBACK, SWITCHED: bookkeeping only */
		break;
	}
}

static void m_event(struct mworld *w, int x, enum san_up_ev type, uint16_t reason, uint8_t offset)
{
	struct mside *s = &w->s[x];
	struct san_upgrade u = {
		.role = x == 0 ? ROLE_A : ROLE_B,
		.state = s->state,
		.reason = s->reason,
		.tx_mark = s->tx_mark,
		.rx_paused = s->rx_paused,
		.rx_mark = s->rx_mark,
	};
	struct san_up_event e = {
		.type = type,
		.reason = reason,
		.offset = offset,
		.tcp_tx = s->tcp_tx,
		.tcp_rx = s->tcp_rx,
	};
	struct san_up_actions acts;
	enum san_up_state old_state = u.state;

	if (san_upgrade_step(&u, &e, &acts)) {
		m_fail("state machine rejected an event the engine produced");
		return;
	}
	s->state = (uint8_t)u.state;
	s->reason = (uint8_t)u.reason;
	s->tx_mark = (uint8_t)u.tx_mark;
	s->rx_paused = (uint8_t)u.rx_paused;
	s->rx_mark = (uint8_t)u.rx_mark;
	for (unsigned int i = 0; i < acts.n; i++) {
		if (acts.a[i].act == SAN_UP_ACT_DEFER) {
			if (type == SAN_UP_EV_TCP_CLOSED)
				s->deferred |= DEFER_TCP;
			else if (type == SAN_UP_EV_ABANDON)
				s->deferred |= DEFER_ABANDON;
			else if (type == SAN_UP_EV_SAN_ERROR)
				s->deferred |= DEFER_SAN;
			else
				m_fail("unexpected event deferred");
		}
		m_apply(w, x, &acts.a[i]);
	}
	if (san_upgrade_done(&u) && s->timer)
		m_fail("timer armed after the upgrade was decided");
	/* The engine's half of DEFER: feed the events again once the state has moved on. */
	if (s->deferred && u.state != old_state) {
		uint8_t again = s->deferred;

		s->deferred = 0;
		if (again & DEFER_TCP)
			m_event(w, x, SAN_UP_EV_TCP_CLOSED, 0, 0);
		if (again & DEFER_SAN)
			m_event(w, x, SAN_UP_EV_SAN_ERROR, 0, 0);
		if (again & DEFER_ABANDON)
			m_event(w, x, SAN_UP_EV_ABANDON, SAN_R_POLICY, 0);
	}
}

static void m_deliver(struct mside *s, uint8_t unit)
{
	if (unit == MARK)
		m_fail("MARK delivered to the application as data");
	else if (unit != s->delivered)
		m_fail("unit lost, duplicated or reordered");
	else
		s->delivered++;
}

static bool m_done(const struct mside *s)
{
	return s->state == SAN_UP_SWITCHED || s->state == SAN_UP_FALLBACK ||
	       s->state == SAN_UP_RESET;
}

#define NMOVES 15

/* Move mv of side x (0..NMOVES-1); false when not enabled. */
static bool m_move(const struct mworld *from, int x, int mv, struct mworld *w)
{
	int y = 1 - x;
	struct mside *s;

	*w = *from;
	s = &w->s[x];
	if (s->reset && mv != 2 && mv != 4)
		return false; /* a reset side only drains its side channel */
	switch (mv) {
	case 0: /* the application sends one unit */
		if (s->app_sent >= K)
			return false;
		if (s->tx_mode == TX_TCP) {
			push(w->tcp[x], &w->tcp_len[x], s->app_sent);
			s->tcp_tx++;
		} else if (s->tx_mode == TX_HOLD) {
			s->held++;
		} else {
			push(w->san[x], &w->san_len[x], s->app_sent);
		}
		s->app_sent++;
		return true;
	case 1: /* A's engine proposes */
		if (x != 0 || s->state != SAN_UP_IDLE)
			return false;
		m_event(w, x, SAN_UP_EV_START, 0, 0);
		return true;
	case 2: /* a side-channel message arrives: accepted as is */
	case 3: /* ... or refused by the local verdict (B: PROPOSE, A: ACCEPT) */
	{
		uint8_t msg, arg;

		if (!w->sq_len[y])
			return false;
		msg = w->sq[y][0];
		if (mv == 3 && msg != SM_PROPOSE && msg != SM_ACCEPT)
			return false;
		arg = w->sarg[y][0];
		pop(w->sq[y], &w->sq_len[y]);
		w->sq_len[y]++;
		pop(w->sarg[y], &w->sq_len[y]);
		switch (msg) {
		case SM_PROPOSE:
			m_event(w, x, mv == 2 ? SAN_UP_EV_PROPOSE_OK : SAN_UP_EV_PROPOSE_BAD,
				SAN_R_POLICY, 0);
			break;
		case SM_ACCEPT:
			m_event(w, x, SAN_UP_EV_ACCEPT, mv == 2 ? 0 : SAN_R_RESOURCES, 0);
			break;
		case SM_REJECT:
			m_event(w, x, SAN_UP_EV_REJECT, SAN_R_POLICY, 0);
			break;
		case SM_SWITCH:
			m_event(w, x, SAN_UP_EV_SWITCH, 0, arg);
			break;
		default:
			m_event(w, x, SAN_UP_EV_ABORT, SAN_R_TIMEOUT, 0);
			break;
		}
		return true;
	}
	case 4: /* EOF on the side channel, after every queued message */
		if (w->sq_len[y] || !w->s_eof[y] || s->eof_seen)
			return false;
		if (w->s[0].state == SAN_UP_IDLE && !w->s[0].abandoned)
			return false; /* no side channel exists before A proposes */
		s->eof_seen = 1;
		m_event(w, x, SAN_UP_EV_SIDE_CLOSED, 0, 0);
		return true;
	case 5: /* A's SWITCH is handed off */
		if (!s->sent_pending)
			return false;
		s->sent_pending = 0;
		m_event(w, x, SAN_UP_EV_SENT, 0, 0);
		return true;
	case 6: /* A's SWITCH could not be sent at all */
		if (!s->not_sent_pending)
			return false;
		s->not_sent_pending = 0;
		m_event(w, x, SAN_UP_EV_NOT_SENT, 0, 0);
		return true;
	case 7: /* A's ACCEPT timer fires */
		if (!s->timer)
			return false;
		s->timer = 0;
		m_event(w, x, SAN_UP_EV_TIMEOUT, 0, 0);
		return true;
	case 8: /* the reader takes one thing from TCP */
		if (!w->tcp_len[y])
			return false;
		if (s->rx_mode == RX_NORMAL) {
			s->tcp_rx++;
			m_deliver(s, pop(w->tcp[y], &w->tcp_len[y]));
		} else if (s->rx_mode == RX_DRAIN && s->tcp_rx < s->drain_to) {
			s->tcp_rx++;
			m_deliver(s, pop(w->tcp[y], &w->tcp_len[y]));
		} else if (s->rx_mode == RX_DRAIN) {
			bool mark = pop(w->tcp[y], &w->tcp_len[y]) == MARK;

			m_event(w, x, mark ? SAN_UP_EV_MARK_OK : SAN_UP_EV_MARK_BAD, 0, 0);
		} else {
			return false;
		}
		return true;
	case 9: /* the reader takes one unit from the SAN */
		if (s->rx_mode != RX_SAN || !w->san_len[y])
			return false;
		m_deliver(s, pop(w->san[y], &w->san_len[y]));
		return true;
	case 10: /* the peer's reset reaches us over TCP */
		if (!w->s[y].reset || s->rst_seen)
			return false;
		s->rst_seen = 1;
		m_event(w, x, SAN_UP_EV_TCP_CLOSED, 0, 0);
		return true;
	case 11: /* the application closes, or policy says no, before the upgrade is decided */
		if (s->abandoned || m_done(s))
			return false;
		s->abandoned = 1;
		m_event(w, x, SAN_UP_EV_ABANDON, SAN_R_POLICY, 0);
		return true;
	case 12: /* fault: A's SWITCH send fails ambiguously, and it was lost */
	case 13: /* ... or it was delivered after all */
		if (x != 0 || !s->sent_pending || w->fault_used)
			return false;
		if (mv == 12) {
			if (!w->sq_len[0] || w->sq[0][w->sq_len[0] - 1] != SM_SWITCH)
				return false; /* already delivered: only "delivered" is possible */
			w->sq_len[0]--;
		}
		w->fault_used = w->broken = 1;
		w->s_eof[0] = w->s_eof[1] = 1;
		s->sent_pending = 0;
		m_event(w, x, SAN_UP_EV_SEND_UNKNOWN, 0, 0);
		return true;
	case 14: /* fault: the side channel breaks */
		if (x != 0 || w->fault_used)
			return false;
		w->fault_used = w->broken = 1;
		w->s_eof[0] = w->s_eof[1] = 1;
		return true;
	default:
		return false;
	}
}

static const char *const m_move_names[NMOVES] = {
	"app sends",
	"A proposes",
	"side msg arrives",
	"side msg refused",
	"side EOF",
	"SWITCH handed",
	"SWITCH unsent",
	"timer fires",
	"TCP read",
	"SAN read",
	"peer RST",
	"abandon",
	"fault: SWITCH lost",
	"fault: SWITCH ambiguous",
	"fault: side channel breaks",
};

static void m_print_trace(const struct unit_stateset *set, const uint32_t *parent,
			  const uint8_t *how, long i)
{
	long path[256];
	int n = 0;

	while (i > 0 && n < 256) {
		path[n++] = i;
		i = parent[i];
	}
	fprintf(stderr, "counterexample (%d steps):\n", n);
	while (n--) {
		const struct mworld *w = unit_stateset_get(set, path[n]);

		fprintf(stderr, "  %c: %-26s -> A %-9s B %-9s\n", how[path[n]] / NMOVES ? 'B' : 'A',
			m_move_names[how[path[n]] % NMOVES], san_up_state_name(w->s[0].state),
			san_up_state_name(w->s[1].state));
	}
}

static void m_check_final(const struct mworld *w)
{
	const struct mside *a = &w->s[0], *b = &w->s[1];

	for (int x = 0; x < 2; x++) {
		const struct mside *s = &w->s[x];

		if (!m_done(s) && s->state != SAN_UP_IDLE)
			m_fail("stuck in the middle of an upgrade");
		if (s->reset && !w->fault_used)
			m_fail("reset without any fault");
		if (s->timer)
			m_fail("timer left armed");
	}
	if (a->reset || b->reset)
		return;
	if (a->delivered != K || b->delivered != K)
		m_fail("units missing at the end");
	if (a->state == SAN_UP_SWITCHED || b->state == SAN_UP_SWITCHED) {
		if (a->state != b->state)
			m_fail("one side switched, the other did not");
	} else if (a->state != SAN_UP_FALLBACK && !(a->state == SAN_UP_IDLE && a->abandoned)) {
		m_fail("A neither switched nor fell back");
	}
	for (int x = 0; x < 2; x++) {
		const struct mside *s = &w->s[x];

		if (s->state == SAN_UP_SWITCHED && (s->rx_mode != RX_SAN || s->tx_mode != TX_SAN))
			m_fail("switched but not on the SAN");
		if (s->state != SAN_UP_SWITCHED &&
		    (s->rx_mode != RX_NORMAL || s->tx_mode != TX_TCP))
			m_fail("on TCP but reader or writer not restored");
	}
}

START_TEST(test_handshake_model)
{
	struct unit_stateset set;
	const size_t max = 4u << 20;
	uint32_t *parent = malloc(max * sizeof(*parent));
	uint8_t *how = malloc(max);
	struct mworld w, t;
	size_t finals = 0, switched = 0, fellback = 0, resets = 0;
	bool added;

	ck_assert(parent && how);
	ck_assert_int_eq(unit_stateset_init(&set, sizeof(struct mworld), max), 0);
	memset(&w, 0, sizeof(w));
	w.s[0].state = w.s[1].state = SAN_UP_IDLE;
	unit_stateset_add(&set, &w, &added);
	parent[0] = 0;

	for (size_t i = 0; i < set.count; i++) {
		int moves = 0;

		memcpy(&w, unit_stateset_get(&set, i), sizeof(w));
		for (int mv = 0; mv < 2 * NMOVES; mv++) {
			long j;

			m_violation = NULL;
			if (!m_move(&w, mv / NMOVES, mv % NMOVES, &t))
				continue;
			moves++;
			j = unit_stateset_add(&set, &t, &added);
			ck_assert_msg(j >= 0, "state space larger than %zu", max);
			if (added) {
				parent[j] = (uint32_t)i;
				how[j] = (uint8_t)mv;
			}
			if (m_violation) {
				m_print_trace(&set, parent, how, j);
				ck_abort_msg("%s", m_violation);
			}
		}
		if (moves)
			continue;
		finals++;
		m_violation = NULL;
		m_check_final(&w);
		if (m_violation) {
			m_print_trace(&set, parent, how, (long)i);
			ck_abort_msg("%s", m_violation);
		}
		switched += w.s[0].state == SAN_UP_SWITCHED;
		fellback += w.s[0].state == SAN_UP_FALLBACK && !w.s[1].reset;
		resets += w.s[0].reset || w.s[1].reset;
	}
	/* The model must reach every kind of outcome, or it proves less than it seems. */
	ck_assert_uint_gt(switched, 0);
	ck_assert_uint_gt(fellback, 0);
	ck_assert_uint_gt(resets, 0);
	fprintf(stderr,
		"handshake model: %zu states, %zu final (%zu switched, %zu fallback, "
		"%zu reset)\n",
		set.count, finals, switched, fellback, resets);
	unit_stateset_free(&set);
	free(parent);
	free(how);
}
END_TEST

Suite *make_upgrade_suite(void)
{
	Suite *s = suite_create("upgrade");
	TCase *tc;

	tc = tcase_create("table");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_table, 0, sizeof(up_table) / sizeof(up_table[0]));
	tcase_add_test(tc, test_table_complete);
	tcase_add_test(tc, test_offsets_carried);
	tcase_add_test(tc, test_bad_offsets_reset);
	tcase_add_test(tc, test_reasons);
	tcase_add_test(tc, test_terminal_ignores);
	tcase_add_test(tc, test_invalid_input);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_test(tc, test_handshake_model);
	suite_add_tcase(s, tc);
	return s;
}
