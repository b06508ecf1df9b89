/*
 * tests/unit: core/san_epinfo — reading what the kernel holds of an epoll registration, and the
 * kernel's own answers for a disabled EPOLLONESHOT one that the swap relies on.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/san_epinfo.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static unsigned long ino_of(int fd)
{
	struct stat st;

	REQUIRE(fstat(fd, &st) == 0);
	return (unsigned long)st.st_ino;
}

/* One line per registration; the set's own lines (pos, flags, mnt_id, ino) are none. */
START_TEST(test_parse)
{
	int tfd;
	uint32_t ev;
	unsigned long ino;

	REQUIRE(san_epinfo_parse("tfd:        5 events:       19 data:                5  pos:0 ino:61d5 sdev:8",
				 &tfd, &ev, &ino));
	REQUIRE(tfd == 5 && ev == 0x19 && ino == 0x61d5);
	REQUIRE(san_epinfo_parse("tfd:       12 events: 40000000 data: ffffffffffffffff  pos:0 ino:1a sdev:9",
				 &tfd, &ev, &ino));
	REQUIRE(tfd == 12 && ev == EPOLLONESHOT && ino == 0x1a && san_epinfo_disarmed(ev));
	REQUIRE(!san_epinfo_parse("ino:\t1057", &tfd, &ev, &ino));
	REQUIRE(!san_epinfo_parse("pos:\t0", &tfd, &ev, &ino));
}
END_TEST

/* The kernel's own: armed as asked (EPOLLERR|EPOLLHUP added), disabled once fired, re-armed by MOD. */
START_TEST(test_kernel_oneshot)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), sv[2];
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 3 }, got;
	uint32_t ev;

	REQUIRE(ep >= 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == -ENOENT);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e) == 0);
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == 0 && !san_epinfo_disarmed(ev));
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[1]), &ev) == -ENOENT); /* another file */
	REQUIRE(write(sv[1], "x", 1) == 1);
	REQUIRE(epoll_wait(ep, &got, 1, 1000) == 1);
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == 0 && san_epinfo_disarmed(ev));
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_MOD, sv[0], &e) == 0);
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == 0 && !san_epinfo_disarmed(ev));
	REQUIRE(san_epinfo_events(-1, sv[0], ino_of(sv[0]), &ev) < 0);
	close(sv[0]);
	close(sv[1]);
	close(ep);
}
END_TEST

/*
 * What the swap relies on for a disabled one (san_sock.c, swap_ep_add): a registration added with
 * the flags alone stays disabled, data or not; the application's MOD re-arms it (it fires once),
 * its ADD finds it there, its DEL takes it: the kernel's own answers.
 */
START_TEST(test_added_disabled)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), sv[2];
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 7 }, got;
	struct epoll_event off = { .events = (EPOLLIN | EPOLLONESHOT) & SAN_EPINFO_FLAGS, .data.u64 = 7 };
	uint32_t ev;

	REQUIRE(ep >= 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	REQUIRE(write(sv[1], "x", 1) == 1);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &off) == 0);
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == 0);
	REQUIRE(epoll_wait(ep, &got, 1, 0) == 0); /* disabled, though readable */
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e) == -1 && errno == EEXIST);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_MOD, sv[0], &e) == 0);
	REQUIRE(epoll_wait(ep, &got, 1, 1000) == 1 && got.data.u64 == 7);
	REQUIRE(epoll_wait(ep, &got, 1, 0) == 0); /* once */
	REQUIRE(san_epinfo_events(ep, sv[0], ino_of(sv[0]), &ev) == 0 && san_epinfo_disarmed(ev));
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL) == 0);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL) == -1 && errno == ENOENT);
	close(sv[0]);
	close(sv[1]);
	close(ep);
}
END_TEST

Suite *make_epinfo_suite(void)
{
	Suite *s = suite_create("epinfo");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_kernel_oneshot);
	tcase_add_test(tc, test_added_disabled);
	suite_add_tcase(s, tc);
	return s;
}
