/* tests/unit: core/san_lite — a lite candidate's gate: calls in, closing, draining, generations. */
#include <stdint.h>

#include "core/san_lite.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static void setup(void)
{
	REQUIRE(san_lite_init(64) == 0);
}

/* Calls enter and leave; the gate closes only with none inside, and then lets none in. */
START_TEST(test_close_needs_no_call_inside)
{
	struct san_lite *l, *l2;
	uint32_t gen, gen2, cgen;

	REQUIRE(san_lite_of(5) == NULL);
	REQUIRE(san_lite_open(5, NULL));
	REQUIRE((l = san_lite_of(5)) != NULL);
	REQUIRE(san_lite_enter(5, &gen) == l);
	REQUIRE(san_lite_enter(5, &gen2) == l && gen2 == gen);
	REQUIRE(!san_lite_close_gate(5, &cgen)); /* two calls inside */
	san_lite_leave(l, gen);
	REQUIRE(!san_lite_close_gate(5, &cgen)); /* one */
	san_lite_leave(l, gen2);
	REQUIRE(san_lite_close_gate(5, &cgen) && cgen == gen);
	REQUIRE(san_lite_enter(5, &gen) == NULL); /* closed: the sock's path */
	REQUIRE(san_lite_of(5) == l);		  /* still its, until it is ended */
	REQUIRE(!san_lite_close_gate(5, &cgen));  /* one closer */
	san_lite_end(l, cgen);
	REQUIRE(san_lite_of(5) == NULL);
	REQUIRE(san_lite_enter(5, &gen) == NULL);
	l2 = san_lite_shut(5, &gen);
	REQUIRE(l2 == NULL); /* no lite candidate to close any more */
}
END_TEST

/*
 * A client's record says so, with the time it connected, and starts with no exchange and no
 * sock wanted; a server's opened on the same number afterwards is a server's again.
 */
START_TEST(test_client_record)
{
	struct san_addr peer = { .port = 7 };
	struct san_lite_a a = { .end_ns = 0, .peer = &peer, .nep = 1 };
	struct san_lite *l;
	uint32_t gen;

	a.ep[0].epfd = 42;
	a.ep[0].ev.events = EPOLLIN;
	REQUIRE(!san_lite_open_a(8, NULL, &a)); /* (a client's needs its window) */
	REQUIRE(san_lite_of(8) == NULL);
	a.end_ns = 12345;
	REQUIRE(san_lite_open_a(8, NULL, &a));
	REQUIRE((l = san_lite_of(8)) != NULL && san_lite_is_a(8));
	REQUIRE(l->a_end_ns == 12345 && !l->a_want && !l->a_ex_done && !l->a_ex_rx0);
	/* what it was given is in the record before its gate opened */
	REQUIRE(l->a_peer_known && l->a_peer.port == 7);
	REQUIRE(l->nep == 1 && l->ep[0].epfd == 42 && l->ep[0].ev.events == EPOLLIN);
	l->a_want = 1;
	l->a_ex_done = 2;
	l->a_ex_rx0 = 99;
	REQUIRE(san_lite_shut(8, &gen) == l);
	REQUIRE(san_lite_open(8, NULL));
	REQUIRE(san_lite_of(8) == l);
	REQUIRE(!l->a_end_ns && !san_lite_is_a(8) && !l->a_want && !l->a_ex_done && !l->a_ex_rx0);
	REQUIRE(!l->a_peer_known && l->nep == 0);
	REQUIRE(san_lite_shut(8, &gen) == l);
}
END_TEST

/* The engine drains: no call enters meanwhile; the gate closes once the last has left. */
START_TEST(test_drain)
{
	struct san_lite *l;
	uint32_t gen, dgen;

	REQUIRE(san_lite_open(6, NULL));
	l = san_lite_of(6);
	REQUIRE(san_lite_enter(6, &gen) == l);
	REQUIRE(san_lite_drain(6, &dgen) == 0);
	REQUIRE(san_lite_drain(6, &dgen) == 0);	  /* still inside */
	REQUIRE(san_lite_enter(6, &dgen) == NULL); /* none may enter while it drains */
	REQUIRE(!san_lite_close_gate(6, &dgen));   /* nor may an application thread close it */
	REQUIRE(!l->b_outside);
	san_lite_refused_busy(6);		   /* the engine gave up (BUSY) ... */
	REQUIRE(l->b_outside == gen);		   /* ... its receives wait outside from now */
	san_lite_undrain(6);
	REQUIRE(san_lite_enter(6, &dgen) == l);	   /* open again */
	san_lite_leave(l, dgen);
	REQUIRE(san_lite_drain(6, &dgen) == 0);
	san_lite_leave(l, gen);
	REQUIRE(san_lite_drain(6, &dgen) == 1 && dgen == gen); /* closed, by the engine */
	REQUIRE(san_lite_drain(6, &dgen) == -1);
	REQUIRE(san_lite_enter(6, &dgen) == NULL);
	san_lite_undrain(6); /* (closed: no effect) */
	REQUIRE(san_lite_enter(6, &dgen) == NULL);
	san_lite_end(l, gen);
	REQUIRE(san_lite_drain(6, &dgen) == -1);
	REQUIRE(san_lite_open(6, NULL) && !l->b_outside && !l->b_ex); /* a new connection's */
	san_lite_refused_busy(6); /* not draining: a late word for an earlier one, left alone */
	REQUIRE(!l->b_outside);
	l->b_outside = gen; /* (a mark that landed late, as if after the number was taken again) */
	REQUIRE(san_lite_enter(6, &dgen) == l && dgen != gen); /* the new one's is not that */
	san_lite_leave(l, dgen);
	REQUIRE(san_lite_shut(6, &gen) == l);
	san_lite_end(l, gen);
}
END_TEST

/*
 * close() shuts the gate with calls still inside; the number's next connection has a gate of
 * its own, which the earlier calls' leaving does not count down.
 */
START_TEST(test_generations)
{
	struct san_lite *l;
	uint32_t old, cur, g;

	REQUIRE(san_lite_open(7, NULL));
	l = san_lite_of(7);
	REQUIRE(san_lite_enter(7, &old) == l);
	REQUIRE(san_lite_shut(7, &g) == l && g == old);
	REQUIRE(san_lite_of(7) == NULL);
	REQUIRE(san_lite_enter(7, &g) == NULL);
	/* the earlier call is still inside: the number's next connection gets no lite (a sock) */
	REQUIRE(!san_lite_open(7, NULL));
	san_lite_leave(l, old); /* the earlier call returns */
	REQUIRE(san_lite_open(7, NULL));
	REQUIRE(san_lite_enter(7, &cur) == l && cur != old);
	san_lite_leave(l, old);			/* a stale leave again: no effect */
	REQUIRE(!san_lite_close_gate(7, &g)); /* the later one is still inside */
	san_lite_leave(l, cur);
	REQUIRE(san_lite_close_gate(7, &g) && g == cur);
	san_lite_end(l, g);
	REQUIRE(san_lite_end_of_numbers() >= 8);
	/* out of the table: never a lite candidate */
	REQUIRE(san_lite_of(-1) == NULL && san_lite_of(64) == NULL);
	REQUIRE(!san_lite_open(64, NULL));
}
END_TEST

/* close() shuts a gate the engine drains without waiting for the engine; the drain ends. */
START_TEST(test_shut_over_drain)
{
	struct san_lite *l;
	uint32_t gen, dgen, g;

	REQUIRE(san_lite_open(8, NULL));
	l = san_lite_of(8);
	REQUIRE(san_lite_enter(8, &gen) == l);
	REQUIRE(san_lite_drain(8, &dgen) == 0);
	REQUIRE(san_lite_shut(8, &g) == l && g == gen); /* (did not wait) */
	REQUIRE(san_lite_of(8) == NULL);
	REQUIRE(san_lite_drain(8, &dgen) == -1);
	san_lite_undrain(8);
	REQUIRE(san_lite_of(8) == NULL);
	san_lite_leave(l, gen);
	REQUIRE(san_lite_open(8, NULL));
	REQUIRE(san_lite_close_gate(8, &g));
	san_lite_end(l, g);
}
END_TEST

/* A fork child forgets a gate closed or drained by a thread of the parent's, without waiting. */
START_TEST(test_forget)
{
	uint32_t g;

	REQUIRE(san_lite_open(9, NULL));
	REQUIRE(san_lite_close_gate(9, &g)); /* a parent's thread making the sock as the fork came */
	REQUIRE(san_lite_forget(9));
	REQUIRE(san_lite_of(9) == NULL);
	REQUIRE(!san_lite_forget(9));
	REQUIRE(san_lite_shut(9, &g) == NULL);
}
END_TEST

/* A close we never saw: the gate goes at once, but a call still inside keeps the number's next
 * connection from being a lite one until it has left (its bytes are not that connection's). */
START_TEST(test_forget_stale)
{
	struct san_lite *l;
	uint32_t gen, g;

	REQUIRE(san_lite_open(10, NULL));
	l = san_lite_of(10);
	REQUIRE(san_lite_enter(10, &gen) == l);
	REQUIRE(san_lite_forget_stale(10));
	REQUIRE(san_lite_of(10) == NULL);
	REQUIRE(!san_lite_open(10, NULL));
	san_lite_leave(l, gen);
	REQUIRE(san_lite_open(10, NULL));
	REQUIRE(san_lite_close_gate(10, &g) && g != gen);
	san_lite_end(l, g);
}
END_TEST

Suite *make_lite_suite(void)
{
	Suite *s = suite_create("lite");
	TCase *tc = tcase_create("gate");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_close_needs_no_call_inside);
	tcase_add_test(tc, test_drain);
	tcase_add_test(tc, test_client_record);
	tcase_add_test(tc, test_generations);
	tcase_add_test(tc, test_shut_over_drain);
	tcase_add_test(tc, test_forget);
	tcase_add_test(tc, test_forget_stale);
	suite_add_tcase(s, tc);
	return s;
}
