/* tests/unit: core/san_epoll_early — registrations made before connect(), kept until it. */
#include <sys/epoll.h>

#include "core/san_epoll_early.h"
#include "core/san_sock.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static struct epoll_event ev_of(uint32_t events, uint64_t data)
{
	struct epoll_event e = { .events = events, .data.u64 = data };

	return e;
}

/* An ADD is taken once, with its events and data; MOD replaces them; DEL removes them. */
START_TEST(test_add_mod_del)
{
	struct san_sock_epreg out[SAN_SOCK_EPOLL_MAX];
	struct epoll_event e = ev_of(EPOLLIN | EPOLLOUT | EPOLLET, 7);

	san_ep_early_note(3, EPOLL_CTL_ADD, 12, &e);
	REQUIRE(san_ep_early_take(12, out, SAN_SOCK_EPOLL_MAX) == 1);
	REQUIRE(out[0].epfd == 3 && out[0].fd == 12);
	REQUIRE(out[0].ev.events == (EPOLLIN | EPOLLOUT | EPOLLET) && out[0].ev.data.u64 == 7);
	REQUIRE(san_ep_early_take(12, out, SAN_SOCK_EPOLL_MAX) == 0); /* taken: gone */

	san_ep_early_note(3, EPOLL_CTL_ADD, 12, &e);
	e = ev_of(EPOLLIN, 9);
	san_ep_early_note(3, EPOLL_CTL_MOD, 12, &e);
	REQUIRE(san_ep_early_take(12, out, SAN_SOCK_EPOLL_MAX) == 1);
	REQUIRE(out[0].ev.events == EPOLLIN && out[0].ev.data.u64 == 9);

	san_ep_early_note(3, EPOLL_CTL_ADD, 12, &e);
	san_ep_early_note(3, EPOLL_CTL_DEL, 12, NULL);
	REQUIRE(san_ep_early_take(12, out, SAN_SOCK_EPOLL_MAX) == 0);
}
END_TEST

/* Each number has its own; two epoll sets on one number are two; forget drops only that number. */
START_TEST(test_numbers_and_sets)
{
	struct san_sock_epreg out[SAN_SOCK_EPOLL_MAX];
	struct epoll_event e = ev_of(EPOLLIN, 1);

	san_ep_early_note(3, EPOLL_CTL_ADD, 12, &e);
	san_ep_early_note(4, EPOLL_CTL_ADD, 12, &e);
	san_ep_early_note(3, EPOLL_CTL_ADD, 13, &e);
	san_ep_early_note(3, EPOLL_CTL_ADD, 14, &e);
	san_ep_early_forget(14);
	REQUIRE(san_ep_early_take(14, out, SAN_SOCK_EPOLL_MAX) == 0);
	REQUIRE(san_ep_early_take(12, out, SAN_SOCK_EPOLL_MAX) == 2);
	REQUIRE(out[0].fd == 12 && out[1].fd == 12 && out[0].epfd + out[1].epfd == 7);
	REQUIRE(san_ep_early_take(13, out, SAN_SOCK_EPOLL_MAX) == 1 && out[0].epfd == 3);
}
END_TEST

/* More than the caller keeps: all are counted (the caller falls back), none stay behind. */
START_TEST(test_more_than_kept)
{
	struct san_sock_epreg out[2];
	struct epoll_event e = ev_of(EPOLLIN, 1);

	for (int epfd = 100; epfd < 140; epfd++)
		san_ep_early_note(epfd, EPOLL_CTL_ADD, 20, &e);
	REQUIRE(san_ep_early_take(20, out, 2) == 40);
	REQUIRE(out[0].fd == 20 && out[1].fd == 20);
	REQUIRE(san_ep_early_take(20, out, 2) == 0);
}
END_TEST

Suite *make_epoll_early_suite(void)
{
	Suite *s = suite_create("epoll_early");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_add_mod_del);
	tcase_add_test(tc, test_numbers_and_sets);
	tcase_add_test(tc, test_more_than_kept);
	suite_add_tcase(s, tc);
	return s;
}
