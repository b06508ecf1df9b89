/*
 * tests/unit: core/san_epoll_off — registrations the swap holds off the kernel, answered as the
 * kernel answers for a disabled EPOLLONESHOT one; core/san_epinfo — reading what the kernel holds.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/san_epinfo.h"
#include "core/san_epoll_off.h"
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

/* Held off: MOD adds it (armed, fires once), DEL answers 0, ADD finds it there; then not ours. */
START_TEST(test_held_off)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), sv[2], out;
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 7 }, got;

	REQUIRE(ep >= 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	REQUIRE(write(sv[1], "x", 1) == 1);
	REQUIRE(!san_ep_off_any());
	san_ep_off_keep(ep, sv[0], &e);
	REQUIRE(san_ep_off_any());
	REQUIRE(!san_ep_off_ctl(ep, EPOLL_CTL_MOD, sv[1], &e, &out)); /* another number */
	REQUIRE(!san_ep_off_ctl(ep + 1, EPOLL_CTL_MOD, sv[0], &e, &out)); /* another set */
	REQUIRE(san_ep_off_ctl(ep, EPOLL_CTL_ADD, sv[0], &e, &out) && out == -EEXIST);
	REQUIRE(epoll_wait(ep, &got, 1, 0) == 0); /* disabled: nothing in the kernel */
	REQUIRE(san_ep_off_ctl(ep, EPOLL_CTL_MOD, sv[0], &e, &out) && out == 0);
	REQUIRE(!san_ep_off_any());
	REQUIRE(epoll_wait(ep, &got, 1, 1000) == 1 && got.data.u64 == 7);
	REQUIRE(epoll_wait(ep, &got, 1, 0) == 0); /* once */

	san_ep_off_keep(ep, sv[1], &e);
	REQUIRE(san_ep_off_ctl(ep, EPOLL_CTL_DEL, sv[1], NULL, &out) && out == 0);
	REQUIRE(!san_ep_off_ctl(ep, EPOLL_CTL_DEL, sv[1], NULL, &out));
	close(sv[0]);
	close(sv[1]);
	close(ep);
}
END_TEST

/* A closed number goes, as a set and as a registered number; others stay. */
START_TEST(test_forget)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT };
	int out;

	san_ep_off_keep(50, 60, &e);
	san_ep_off_keep(51, 60, &e);
	san_ep_off_keep(52, 61, &e);
	san_ep_off_keep(53, 70, &e);
	san_ep_off_forget(50); /* the set 50 */
	san_ep_off_forget(61); /* the number 61, in set 52 */
	REQUIRE(!san_ep_off_ctl(50, EPOLL_CTL_DEL, 60, NULL, &out));
	REQUIRE(!san_ep_off_ctl(52, EPOLL_CTL_DEL, 61, NULL, &out));
	san_ep_off_forget_range(65, 75);
	REQUIRE(!san_ep_off_ctl(53, EPOLL_CTL_DEL, 70, NULL, &out));
	REQUIRE(san_ep_off_ctl(51, EPOLL_CTL_DEL, 60, NULL, &out) && out == 0);
	REQUIRE(!san_ep_off_any());
}
END_TEST

Suite *make_epoll_off_suite(void)
{
	Suite *s = suite_create("epoll_off");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_kernel_oneshot);
	tcase_add_test(tc, test_held_off);
	tcase_add_test(tc, test_forget);
	suite_add_tcase(s, tc);
	return s;
}
