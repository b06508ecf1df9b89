/*
 * tests/unit: core/san_epshadow — the copy of managed connections' epoll registrations that the
 * wait wrappers read readiness from (level-triggered input, and edge-triggered input that is its
 * fd's only registration), and the spin budget's rule
 * for a spin that ran out just before the data came (san_sock_spin_late).
 */
#include <sys/epoll.h>

#include "core/san_config.h"
#include "core/san_epshadow.h"
#include "core/san_sock.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static struct epoll_event ev_of(uint32_t events, uint64_t data)
{
	return (struct epoll_event){ .events = events, .data.u64 = data };
}

/* Each case starts from no copies at all. */
static void forget_all(void)
{
	san_epshadow_forget_range(0, 1023);
	REQUIRE(!san_epshadow_any());
}

/* ADD is copied with its events and data, MOD replaces them, DEL removes them. */
START_TEST(test_add_mod_del)
{
	struct san_epshadow_ent out[4];
	struct epoll_event e = ev_of(EPOLLIN, 7);

	forget_all();
	REQUIRE(san_epshadow_level_in(5, out, 4) == -1); /* no copy of set 5 */
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 12, &e);
	REQUIRE(san_epshadow_any());
	REQUIRE(san_epshadow_level_in(5, out, 4) == 1);
	REQUIRE(out[0].fd == 12 && out[0].ev.events == EPOLLIN && out[0].ev.data.u64 == 7);
	e = ev_of(EPOLLIN | EPOLLOUT | EPOLLRDHUP, 9);
	san_epshadow_ctl(5, EPOLL_CTL_MOD, 12, &e);
	REQUIRE(san_epshadow_level_in(5, out, 4) == 1);
	REQUIRE(out[0].ev.events == (EPOLLIN | EPOLLOUT | EPOLLRDHUP) && out[0].ev.data.u64 == 9);
	san_epshadow_ctl(5, EPOLL_CTL_DEL, 12, NULL);
	REQUIRE(san_epshadow_level_in(5, out, 4) == 0); /* the set is known, and empty */
	/* a MOD or DEL of a number never added, or of an unknown set, changes nothing */
	san_epshadow_ctl(5, EPOLL_CTL_MOD, 13, &e);
	san_epshadow_ctl(6, EPOLL_CTL_DEL, 13, NULL);
	REQUIRE(san_epshadow_level_in(5, out, 4) == 0);
	REQUIRE(san_epshadow_level_in(6, out, 4) == -1);
	forget_all();
}
END_TEST

/*
 * Only level-triggered input is read from the rings: EPOLLET, EPOLLONESHOT and EPOLLEXCLUSIVE
 * registrations, and ones without EPOLLIN, keep the kernel's path (they are left out).
 */
START_TEST(test_level_in_only)
{
	struct san_epshadow_ent out[8];
	static const uint32_t kept[] = { EPOLLIN, EPOLLIN | EPOLLOUT, EPOLLRDNORM };
	static const uint32_t left[] = { EPOLLIN | EPOLLET, EPOLLIN | EPOLLONESHOT,
					 EPOLLIN | EPOLLEXCLUSIVE, EPOLLOUT, EPOLLRDHUP };
	int fd = 20, n, seen = 0;

	forget_all();
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		struct epoll_event e = ev_of(kept[i], (uint64_t)fd);

		san_epshadow_ctl(4, EPOLL_CTL_ADD, fd++, &e);
	}
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		struct epoll_event e = ev_of(left[i], (uint64_t)fd);

		san_epshadow_ctl(4, EPOLL_CTL_ADD, fd++, &e);
	}
	n = san_epshadow_level_in(4, out, 8);
	REQUIRE(n == 3);
	for (int i = 0; i < n; i++) {
		REQUIRE(out[i].fd >= 20 && out[i].fd < 23 && out[i].ev.data.u64 == (uint64_t)out[i].fd);
		seen |= 1 << (out[i].fd - 20);
	}
	REQUIRE(seen == 7);
	/* MOD to edge-triggered takes one out; back to level-triggered puts it back */
	{
		struct epoll_event e = ev_of(EPOLLIN | EPOLLET, 20);

		san_epshadow_ctl(4, EPOLL_CTL_MOD, 20, &e);
		REQUIRE(san_epshadow_level_in(4, out, 8) == 2);
		e.events = EPOLLIN;
		san_epshadow_ctl(4, EPOLL_CTL_MOD, 20, &e);
		REQUIRE(san_epshadow_level_in(4, out, 8) == 3);
	}
	/* more than the caller takes: max + 1 (it keeps the kernel's path) */
	REQUIRE(san_epshadow_level_in(4, out, 2) == 3);
	forget_all();
}
END_TEST

/*
 * A number closed leaves every set; a set closed is forgotten whole; close_range does both for
 * its range. A number one set holds twice over two sets is two registrations.
 */
START_TEST(test_forget)
{
	struct san_epshadow_ent out[8];
	struct epoll_event e = ev_of(EPOLLIN, 1);

	forget_all();
	san_epshadow_ctl(3, EPOLL_CTL_ADD, 12, &e);
	san_epshadow_ctl(4, EPOLL_CTL_ADD, 12, &e);
	san_epshadow_ctl(4, EPOLL_CTL_ADD, 13, &e);
	san_epshadow_ctl(40, EPOLL_CTL_ADD, 41, &e);
	san_epshadow_forget(12);
	REQUIRE(san_epshadow_level_in(3, out, 8) == 0);
	REQUIRE(san_epshadow_level_in(4, out, 8) == 1 && out[0].fd == 13);
	san_epshadow_forget(4);
	REQUIRE(san_epshadow_level_in(4, out, 8) == -1);
	REQUIRE(san_epshadow_level_in(40, out, 8) == 1);
	san_epshadow_ctl(3, EPOLL_CTL_ADD, 50, &e);
	san_epshadow_ctl(3, EPOLL_CTL_ADD, 51, &e);
	san_epshadow_forget_range(40, 50); /* set 40 goes, and 50 leaves set 3 */
	REQUIRE(san_epshadow_level_in(40, out, 8) == -1);
	REQUIRE(san_epshadow_level_in(3, out, 8) == 1 && out[0].fd == 51);
	forget_all();
}
END_TEST

/*
 * A fork child shares its parent's kernel sets, which the parent may change behind it: the
 * copies it inherited are not used (-1), while sets it makes itself are.
 */
START_TEST(test_fork_child)
{
	struct san_epshadow_ent out[4];
	struct epoll_event e = ev_of(EPOLLIN, 1);

	forget_all();
	san_epshadow_ctl(7, EPOLL_CTL_ADD, 12, &e);
	san_epshadow_atfork_child();
	REQUIRE(san_epshadow_level_in(7, out, 4) == -1);
	san_epshadow_ctl(7, EPOLL_CTL_ADD, 13, &e); /* still not followed */
	REQUIRE(san_epshadow_level_in(7, out, 4) == -1);
	san_epshadow_forget(7); /* its number closed, then a new set on it */
	san_epshadow_ctl(7, EPOLL_CTL_ADD, 13, &e);
	REQUIRE(san_epshadow_level_in(7, out, 4) == 1 && out[0].fd == 13);
	forget_all();
}
END_TEST

/*
 * A set with a second number (dup, dup2, F_DUPFD): a change through either would leave the
 * other's copy wrong, so neither is used (-1), even a copy begun only after the dup; a dup of a
 * number that is no epoll set changes nothing. A set's number closed ends it.
 */
START_TEST(test_dup)
{
	struct san_epshadow_ent out[4];
	struct epoll_event e = ev_of(EPOLLIN, 1);

	forget_all();
	san_epshadow_created(60);
	san_epshadow_ctl(60, EPOLL_CTL_ADD, 12, &e);
	REQUIRE(san_epshadow_level_in(60, out, 4) == 1);
	san_epshadow_dup(60, 61);
	REQUIRE(san_epshadow_level_in(60, out, 4) == -1);
	san_epshadow_ctl(61, EPOLL_CTL_ADD, 13, &e); /* through the second number: no copy */
	REQUIRE(san_epshadow_level_in(61, out, 4) == -1);
	san_epshadow_ctl(60, EPOLL_CTL_ADD, 14, &e);
	REQUIRE(san_epshadow_level_in(60, out, 4) == -1);

	/* a set with no copy yet when it is duplicated: none is begun later */
	san_epshadow_created(62);
	san_epshadow_dup(62, 63);
	san_epshadow_ctl(62, EPOLL_CTL_ADD, 12, &e);
	REQUIRE(san_epshadow_level_in(62, out, 4) == -1);

	/* no epoll set: nothing */
	san_epshadow_dup(64, 65);
	san_epshadow_ctl(65, EPOLL_CTL_ADD, 12, &e); /* (as if 65 were reused for a set) */
	REQUIRE(san_epshadow_level_in(65, out, 4) == 1);

	/* closed: a new set on the number is followed again */
	san_epshadow_forget(60);
	san_epshadow_ctl(60, EPOLL_CTL_ADD, 12, &e);
	REQUIRE(san_epshadow_level_in(60, out, 4) == 1);
	forget_all();
}
END_TEST

/* The entry of fd among the n in out, or NULL. */
static const struct san_epshadow_ent *ent_of(const struct san_epshadow_ent *out, int n, int fd)
{
	for (int i = 0; i < n; i++)
		if (out[i].fd == fd)
			return &out[i];
	return NULL;
}

/*
 * What a wait may watch: level-triggered input as before, and an EPOLLET registration only while
 * it is its fd's only one in this process (another set, whose waiter may sleep in the kernel,
 * needs the peer's doorbell per arrival) and no copy here is untrusted.
 */
START_TEST(test_watch_in_edges)
{
	struct san_epshadow_ent out[8];
	const struct san_epshadow_ent *x;
	struct epoll_event lt = ev_of(EPOLLIN, 1), et = ev_of(EPOLLIN | EPOLLOUT | EPOLLET, 2);
	struct epoll_event et1 = ev_of(EPOLLIN | EPOLLET | EPOLLONESHOT, 3);
	int n;

	forget_all();
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 12, &lt);
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 13, &et);
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 14, &et1);
	REQUIRE(san_epshadow_level_in(5, out, 8) == 1 && out[0].fd == 12 && !out[0].edge);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 2 && ent_of(out, n, 12) && !ent_of(out, n, 12)->edge && !ent_of(out, n, 14));
	x = ent_of(out, n, 13);
	REQUIRE(x && x->edge);

	/* in a second set too (level-triggered there): not watched edge-triggered, anywhere */
	san_epshadow_ctl(6, EPOLL_CTL_ADD, 13, &lt);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 1 && !ent_of(out, n, 13));
	REQUIRE(san_epshadow_level_in(6, out, 8) == 1 && out[0].fd == 13);
	san_epshadow_ctl(6, EPOLL_CTL_DEL, 13, NULL);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 2 && (x = ent_of(out, n, 13)) && x->edge);
	san_epshadow_ctl(6, EPOLL_CTL_ADD, 13, &et);
	san_epshadow_forget(6); /* the second set closed */
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 2 && (x = ent_of(out, n, 13)) && x->edge);

	/* an untrusted copy anywhere (a dup'd set): no edge is watched until it is closed */
	san_epshadow_created(40);
	san_epshadow_ctl(40, EPOLL_CTL_ADD, 20, &lt);
	san_epshadow_dup(40, 41);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 1 && !ent_of(out, n, 13));
	san_epshadow_forget(40);
	san_epshadow_forget(41);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 2 && (x = ent_of(out, n, 13)) && x->edge);

	/* the fd closed: it leaves the set; registered again, it is counted once */
	san_epshadow_forget(13);
	REQUIRE(san_epshadow_watch_in(5, out, 8) == 1 && !ent_of(out, 1, 13));
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 13, &et);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE((x = ent_of(out, n, 13)) && x->edge);

	/* a fork child's copies are inherited: no edge there */
	san_epshadow_atfork_child();
	REQUIRE(san_epshadow_watch_in(5, out, 8) == -1);
	forget_all();
	san_epshadow_ctl(5, EPOLL_CTL_ADD, 13, &et);
	n = san_epshadow_watch_in(5, out, 8);
	REQUIRE(n == 1 && out[0].edge); /* (all inherited copies closed: followed again) */
	forget_all();
}
END_TEST

/*
 * The spin budget: a spin that ran out before data that came within SANSWITCH_SPIN_US makes the
 * next spins about that long (1.5x); one the peer answered from this CPU, or later than
 * SPIN_US, does not; failures halve it, down to a sixteenth.
 */
START_TEST(test_spin_late)
{
	struct san_config saved = san_cfg;

	san_cfg.spin_us = 64;
	for (int i = 0; i < 8; i++)
		san_sock_spin_result(false);
	REQUIRE(san_sock_spin_us() == 4); /* the floor */
	san_sock_spin_late(10000, true);  /* our sleep let the peer run: no lesson */
	REQUIRE(san_sock_spin_us() == 4);
	san_sock_spin_late(100000, false); /* beyond SPIN_US: no spin would have paid */
	REQUIRE(san_sock_spin_us() == 4);
	san_sock_spin_late(10000, false);  /* 10 us: a 16 us spin would have caught it */
	REQUIRE(san_sock_spin_us() == 16);
	san_sock_spin_late(5000, false); /* never shrinks it */
	REQUIRE(san_sock_spin_us() == 16);
	san_sock_spin_late(60000, false); /* capped at SPIN_US */
	REQUIRE(san_sock_spin_us() == 64);
	san_sock_spin_result(false);
	REQUIRE(san_sock_spin_us() == 32);
	san_sock_spin_result(true);
	REQUIRE(san_sock_spin_us() == 64);
	san_cfg = saved;
}
END_TEST

Suite *make_epshadow_suite(void)
{
	Suite *s = suite_create("epshadow");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_add_mod_del);
	tcase_add_test(tc, test_level_in_only);
	tcase_add_test(tc, test_forget);
	tcase_add_test(tc, test_fork_child);
	tcase_add_test(tc, test_dup);
	tcase_add_test(tc, test_watch_in_edges);
	tcase_add_test(tc, test_spin_late);
	suite_add_tcase(s, tc);
	return s;
}
