/* tests/unit: core/san_fdtable — the per-process fd table, its entries and their life. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_fdtable.h"
#include "tests/unit/suites.h"

#define NR_SLOTS 1024

/* Every case starts with a fresh table of NR_SLOTS slots. */
static void fdt_setup(void)
{
	ck_assert_int_eq(san_fdtable_alloc(NR_SLOTS), 0);
}

static void fdt_teardown(void)
{
	san_fdtable_free();
}

/* ---- sizing ---------------------------------------------------------- */

static const struct {
	unsigned long long rlim;
	unsigned int slots;
} size_cases[] = {
	{ 0, SAN_FDTABLE_MIN },
	{ 1024, SAN_FDTABLE_MIN },
	{ SAN_FDTABLE_MIN, SAN_FDTABLE_MIN },
	{ 524288, 524288 },
	{ SAN_FDTABLE_MAX, SAN_FDTABLE_MAX },
	{ SAN_FDTABLE_MAX + 1ull, SAN_FDTABLE_MAX },
	{ ~0ull, SAN_FDTABLE_MAX },
};

START_TEST(test_size_for)
{
	ck_assert_uint_eq(san_fdtable_size_for(size_cases[_i].rlim), size_cases[_i].slots);
}
END_TEST

START_TEST(test_alloc_errors)
{
	ck_assert_int_eq(san_fdtable_alloc(0), -EINVAL);
	ck_assert_int_eq(san_fdtable_alloc(SAN_FDTABLE_MAX + 1), -EINVAL);
	ck_assert_int_eq(san_fdtable_alloc(16), 0);
	ck_assert_int_eq(san_fdtable_alloc(16), -EBUSY);
	san_fdtable_free();
	ck_assert_int_eq(san_fdtable_alloc(16), 0);
	san_fdtable_free();
}
END_TEST

/*
 * init sizes the table from the hard RLIMIT_NOFILE, never below the minimum.
 * In a child of its own: a lowered hard limit cannot be raised again without
 * privileges, and the runner may be running without CK_FORK.
 */
static int init_from_rlimit_child(void)
{
	struct rlimit rl = { 256, 512 };

	/* valgrind refuses to change the hard limit: nothing to test then. */
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (san_fdtable_init())
		return 1;
	if (san_fdt.size != SAN_FDTABLE_MIN || san_fd_get(SAN_FDTABLE_MIN - 1))
		return 2;
	if (san_fd_track(SAN_FDTABLE_MIN - 1, SAN_FD_TCP, 0) != 0)
		return 3;
	if (san_fd_track(SAN_FDTABLE_MIN, SAN_FD_TCP, 0) != -ERANGE)
		return 4;
	return 0;
}

START_TEST(test_init_from_rlimit)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(init_from_rlimit_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* Before allocation every fd is untracked and nothing can be recorded. */
START_TEST(test_no_table)
{
	ck_assert_ptr_null(san_fd_slot(0));
	ck_assert_ptr_null(san_fd_get(3));
	ck_assert_int_eq(san_fd_track(3, SAN_FD_TCP, 0), -ERANGE);
	ck_assert_int_eq(san_fd_clear(3), SAN_FD_UNTRACKED);
	ck_assert_int_eq(san_fd_copy(3, 4), -ERANGE);
	ck_assert(!san_fd_any_switched());
	san_fd_clear_range(0, UINT_MAX);
}
END_TEST

/* ---- which sockets get an entry ------------------------------------- */

static const struct {
	int domain, type, protocol;
	bool tracked;
} cand_cases[] = {
	{ AF_INET, SOCK_STREAM, 0, true },
	{ AF_INET, SOCK_STREAM, IPPROTO_TCP, true },
	{ AF_INET6, SOCK_STREAM, 0, true },
	{ AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP, true },
	{ AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0, true },
	{ AF_INET, SOCK_DGRAM, 0, false },
	{ AF_INET, SOCK_DGRAM, IPPROTO_UDP, false },
	{ AF_INET, SOCK_RAW, IPPROTO_TCP, false },
	{ AF_INET, SOCK_SEQPACKET, 0, false },
	{ AF_INET, SOCK_STREAM, IPPROTO_SCTP, false },
	{ AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */, false },
	{ AF_UNIX, SOCK_STREAM, 0, false },
	{ AF_NETLINK, SOCK_RAW, 0, false },
	{ AF_PACKET, SOCK_RAW, 0, false },
	{ AF_INET, SOCK_STREAM | 0x10000, 0, false },
};

START_TEST(test_tcp_candidate)
{
	ck_assert_msg(san_fd_tcp_candidate(cand_cases[_i].domain, cand_cases[_i].type,
					   cand_cases[_i].protocol) == cand_cases[_i].tracked,
		      "case %d: domain %d type %#x protocol %d", _i, cand_cases[_i].domain,
		      cand_cases[_i].type, cand_cases[_i].protocol);
}
END_TEST

/* ---- entries ---------------------------------------------------------- */

START_TEST(test_untracked_by_default)
{
	int fd;

	for (fd = 0; fd < NR_SLOTS; fd++) {
		ck_assert_ptr_nonnull(san_fd_slot(fd));
		ck_assert_ptr_null(san_fd_get(fd));
	}
	ck_assert_ptr_null(san_fd_slot(-1));
	ck_assert_ptr_null(san_fd_slot(NR_SLOTS));
	ck_assert_ptr_null(san_fd_slot(INT_MAX));
}
END_TEST

START_TEST(test_track_and_get)
{
	struct san_fd *f;

	ck_assert_int_eq(san_fd_track(7, SAN_FD_TCP, SAN_FDF_NONBLOCK | SAN_FDF_INET6), 0);
	f = san_fd_get(7);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_eq(f, san_fd_slot(7));
	ck_assert_int_eq(san_fd_state(f), SAN_FD_TCP);
	ck_assert_uint_eq(san_fd_flags(f), SAN_FDF_NONBLOCK | SAN_FDF_INET6);
	ck_assert_ptr_null(san_fd_get(6));
	ck_assert_ptr_null(san_fd_get(8));
	/* A stale entry is simply replaced. */
	ck_assert_int_eq(san_fd_track(7, SAN_FD_PASSIVE, 0), 0);
	ck_assert_int_eq(san_fd_state(san_fd_get(7)), SAN_FD_PASSIVE);
	ck_assert_uint_eq(san_fd_flags(san_fd_get(7)), 0);
	/* Tracking as UNTRACKED is a clear. */
	ck_assert_int_eq(san_fd_track(7, SAN_FD_UNTRACKED, SAN_FDF_NONBLOCK), 0);
	ck_assert_ptr_null(san_fd_get(7));
}
END_TEST

START_TEST(test_track_out_of_range)
{
	ck_assert_int_eq(san_fd_track(-1, SAN_FD_TCP, 0), -EBADF);
	ck_assert_int_eq(san_fd_track(NR_SLOTS, SAN_FD_TCP, 0), -ERANGE);
	ck_assert_int_eq(san_fd_set_state(-5, SAN_FD_LISTENER), -EBADF);
	ck_assert_int_eq(san_fd_set_state(NR_SLOTS, SAN_FD_LISTENER), -ERANGE);
	ck_assert_int_eq(san_fd_set_flags(NR_SLOTS, SAN_FDF_NONBLOCK, 0), -ENOENT);
	ck_assert_int_eq(san_fd_clear(-1), SAN_FD_UNTRACKED);
	ck_assert_int_eq(san_fd_clear(NR_SLOTS + 5), SAN_FD_UNTRACKED);
	ck_assert_int_eq(san_fd_track(NR_SLOTS - 1, SAN_FD_TCP, 0), 0);
	ck_assert_ptr_nonnull(san_fd_get(NR_SLOTS - 1));
}
END_TEST

/* listen()/connect() move tracked entries only: they never create one. */
START_TEST(test_set_state)
{
	ck_assert_int_eq(san_fd_set_state(3, SAN_FD_LISTENER), -ENOENT);
	ck_assert_ptr_null(san_fd_get(3));
	san_fd_track(3, SAN_FD_TCP, SAN_FDF_INET6);
	ck_assert_int_eq(san_fd_set_state(3, SAN_FD_LISTENER), SAN_FD_TCP);
	ck_assert_int_eq(san_fd_state(san_fd_get(3)), SAN_FD_LISTENER);
	ck_assert_uint_eq(san_fd_flags(san_fd_get(3)), SAN_FDF_INET6);
	ck_assert_int_eq(san_fd_set_state(3, SAN_FD_ACTIVE), SAN_FD_LISTENER);
}
END_TEST

START_TEST(test_set_flags)
{
	ck_assert_int_eq(san_fd_set_flags(4, SAN_FDF_NONBLOCK, 0), -ENOENT);
	ck_assert_ptr_null(san_fd_get(4));
	san_fd_track(4, SAN_FD_ACTIVE, SAN_FDF_INET6);
	ck_assert_int_eq(san_fd_set_flags(4, SAN_FDF_NONBLOCK, 0), 0);
	ck_assert_uint_eq(san_fd_flags(san_fd_get(4)), SAN_FDF_NONBLOCK | SAN_FDF_INET6);
	ck_assert_int_eq(san_fd_set_flags(4, 0, SAN_FDF_NONBLOCK), 0);
	ck_assert_uint_eq(san_fd_flags(san_fd_get(4)), SAN_FDF_INET6);
}
END_TEST

START_TEST(test_clear)
{
	san_fd_track(9, SAN_FD_LISTENER, SAN_FDF_NONBLOCK);
	ck_assert_int_eq(san_fd_clear(9), SAN_FD_LISTENER);
	ck_assert_ptr_null(san_fd_get(9));
	ck_assert_uint_eq(san_fd_slot(9)->flags, 0);
	ck_assert_int_eq(san_fd_clear(9), SAN_FD_UNTRACKED);
}
END_TEST

/* dup: the new number gets a copy; copying an untracked fd wipes the target. */
START_TEST(test_copy)
{
	san_fd_track(5, SAN_FD_PASSIVE, SAN_FDF_NONBLOCK);
	ck_assert_int_eq(san_fd_copy(5, 6), SAN_FD_PASSIVE);
	ck_assert_int_eq(san_fd_state(san_fd_get(6)), SAN_FD_PASSIVE);
	ck_assert_uint_eq(san_fd_flags(san_fd_get(6)), SAN_FDF_NONBLOCK);
	/* Independent entries: closing one leaves the other. */
	san_fd_clear(5);
	ck_assert_ptr_nonnull(san_fd_get(6));
	ck_assert_int_eq(san_fd_copy(5, 6), SAN_FD_UNTRACKED);
	ck_assert_ptr_null(san_fd_get(6));
	san_fd_track(5, SAN_FD_ACTIVE, 0);
	ck_assert_int_eq(san_fd_copy(5, NR_SLOTS), -ERANGE);
	ck_assert_int_eq(san_fd_copy(5, -1), -EBADF);
	/* A source beyond the table is untracked. */
	san_fd_track(6, SAN_FD_ACTIVE, 0);
	ck_assert_int_eq(san_fd_copy(NR_SLOTS + 1, 6), SAN_FD_UNTRACKED);
	ck_assert_ptr_null(san_fd_get(6));
}
END_TEST

/* close_range()/closefrom(): bounded by the highest fd ever tracked. */
START_TEST(test_clear_range)
{
	san_fd_track(2, SAN_FD_TCP, 0);
	san_fd_track(10, SAN_FD_TCP, 0);
	san_fd_track(500, SAN_FD_LISTENER, 0);
	ck_assert_uint_eq(san_fdt.hiwater, 501);
	san_fd_clear_range(3, UINT_MAX);
	ck_assert_ptr_nonnull(san_fd_get(2));
	ck_assert_ptr_null(san_fd_get(10));
	ck_assert_ptr_null(san_fd_get(500));
	san_fd_track(11, SAN_FD_TCP, 0);
	san_fd_clear_range(12, 20);
	ck_assert_ptr_nonnull(san_fd_get(11));
	san_fd_clear_range(0, 11);
	ck_assert_ptr_null(san_fd_get(2));
	ck_assert_ptr_null(san_fd_get(11));
	san_fd_clear_range(600, 700);
	san_fd_clear_range(UINT_MAX, UINT_MAX);
}
END_TEST

/* The count lets waits skip their scan; it must follow every way in and out. */
START_TEST(test_switched_count)
{
	ck_assert(!san_fd_any_switched());
	san_fd_track(3, SAN_FD_ACTIVE, 0);
	ck_assert_int_eq(san_fd_set_state(3, SAN_FD_SWITCHED), SAN_FD_ACTIVE);
	ck_assert_int_eq(san_fdt.nswitched, 1);
	ck_assert(san_fd_any_switched());
	ck_assert_int_eq(san_fd_copy(3, 4), SAN_FD_SWITCHED);
	ck_assert_int_eq(san_fdt.nswitched, 2);
	ck_assert_int_eq(san_fd_set_state(3, SAN_FD_SWITCHED), SAN_FD_SWITCHED);
	ck_assert_int_eq(san_fdt.nswitched, 2);
	san_fd_track(4, SAN_FD_SWITCHED, 0);
	ck_assert_int_eq(san_fdt.nswitched, 2);
	ck_assert_int_eq(san_fd_clear(3), SAN_FD_SWITCHED);
	ck_assert_int_eq(san_fdt.nswitched, 1);
	san_fd_copy(5, 4);
	ck_assert_int_eq(san_fdt.nswitched, 0);
	ck_assert(!san_fd_any_switched());
	san_fd_track(6, SAN_FD_SWITCHED, 0);
	san_fd_track(6, SAN_FD_TCP, 0);
	ck_assert_int_eq(san_fdt.nswitched, 0);
	san_fd_track(7, SAN_FD_SWITCHED, 0);
	san_fd_clear_range(0, UINT_MAX);
	ck_assert_int_eq(san_fdt.nswitched, 0);
}
END_TEST

START_TEST(test_state_names)
{
	ck_assert_str_eq(san_fd_state_name(SAN_FD_UNTRACKED), "untracked");
	ck_assert_str_eq(san_fd_state_name(SAN_FD_LISTENER), "listener");
	ck_assert_str_eq(san_fd_state_name(SAN_FD_SWITCHED), "switched");
	ck_assert_str_eq(san_fd_state_name(SAN_FD_NR_STATES), "?");
	ck_assert_str_eq(san_fd_state_name((enum san_fd_state)99), "?");
}
END_TEST

START_TEST(test_guard)
{
	ck_assert(!san_fd_guarded());
	san_fd_guard_enter();
	san_fd_guard_enter();
	ck_assert(san_fd_guarded());
	san_fd_guard_leave();
	ck_assert(san_fd_guarded());
	san_fd_guard_leave();
	ck_assert(!san_fd_guarded());
}
END_TEST

/* ---- lock-free readers against writers -------------------------------- */

#define RACE_FDS 64
#define RACE_ROUNDS 20000

static volatile int race_stop;

/* A reader must only ever see a whole state, and the flags that go with it. */
static void *race_reader(void *arg)
{
	long bad = 0;

	(void)arg;
	while (!race_stop) {
		int fd;

		for (fd = 0; fd < RACE_FDS; fd++) {
			struct san_fd *f = san_fd_get(fd);
			enum san_fd_state s;

			if (!f)
				continue;
			s = san_fd_state(f);
			if (s >= SAN_FD_NR_STATES)
				bad++;
		}
	}
	return (void *)bad;
}

static void *race_guard(void *arg)
{
	(void)arg;
	san_fd_guard_enter();
	return (void *)(long)san_fd_guarded();
}

START_TEST(test_concurrent_readers)
{
	pthread_t r[2], g;
	void *ret;
	int i;

	race_stop = 0;
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&r[i], NULL, race_reader, NULL), 0);
	for (i = 0; i < RACE_ROUNDS; i++) {
		int fd = i % RACE_FDS;

		san_fd_track(fd, SAN_FD_TCP, SAN_FDF_NONBLOCK);
		san_fd_set_state(fd, i & 1 ? SAN_FD_ACTIVE : SAN_FD_SWITCHED);
		san_fd_copy(fd, (fd + 1) % RACE_FDS);
		san_fd_clear(fd);
	}
	race_stop = 1;
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(r[i], &ret), 0);
		ck_assert_ptr_null(ret);
	}
	san_fd_clear_range(0, UINT_MAX);
	ck_assert_int_eq(san_fdt.nswitched, 0);
	/* The guard is per thread. */
	ck_assert_int_eq(pthread_create(&g, NULL, race_guard, NULL), 0);
	ck_assert_int_eq(pthread_join(g, &ret), 0);
	ck_assert_ptr_nonnull(ret);
	ck_assert(!san_fd_guarded());
}
END_TEST

Suite *make_fdtable_suite(void)
{
	Suite *s = suite_create("fdtable");
	TCase *tc;

	tc = tcase_create("sizing");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_size_for, 0, sizeof(size_cases) / sizeof(size_cases[0]));
	tcase_add_test(tc, test_alloc_errors);
	tcase_add_test(tc, test_init_from_rlimit);
	tcase_add_test(tc, test_no_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("candidate");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_tcp_candidate, 0, sizeof(cand_cases) / sizeof(cand_cases[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("entries");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_checked_fixture(tc, fdt_setup, fdt_teardown);
	tcase_add_test(tc, test_untracked_by_default);
	tcase_add_test(tc, test_track_and_get);
	tcase_add_test(tc, test_track_out_of_range);
	tcase_add_test(tc, test_set_state);
	tcase_add_test(tc, test_set_flags);
	tcase_add_test(tc, test_clear);
	tcase_add_test(tc, test_copy);
	tcase_add_test(tc, test_clear_range);
	tcase_add_test(tc, test_switched_count);
	tcase_add_test(tc, test_state_names);
	tcase_add_test(tc, test_guard);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_checked_fixture(tc, fdt_setup, fdt_teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_concurrent_readers);
	suite_add_tcase(s, tc);

	return s;
}
