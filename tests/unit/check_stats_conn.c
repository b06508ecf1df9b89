/* tests/unit: core/san_stats_conn — connection slots: claim, update, release, read back. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"
#include "core/san_owner.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "tests/unit/suites.h"

static char dir[64];
static int saved_level;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_stconn.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	saved_level = san_log_level;
	san_log_level = SAN_LOG_ERROR;
	san_cfg = san_config_defaults;
	san_stats_reset(dir);
	ck_assert_int_eq(san_fdtable_alloc(4096), 0);
}

static void teardown(void)
{
	char cmd[128];

	san_stats_reset(NULL);
	san_cfg = san_config_defaults;
	san_log_level = saved_level;
	if (san_fdt.size)
		san_fdtable_free();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* What the reader finds in this process's file now. */
static struct san_stats_file *read_back(unsigned int *skipped)
{
	static struct san_stats_file r;

	ck_assert_ptr_nonnull(san_stats_path());
	ck_assert_int_eq(san_stats_file_read(san_stats_path(), &r, skipped), 0);
	return &r;
}

/* The slots in use in @f whose fd is @fd. */
static int in_use_with_fd(const struct san_stats_file *f, int fd, const struct san_stats_conn **c)
{
	int n = 0;

	for (unsigned int i = 0; i < SAN_STATS_CONNS; i++)
		if (f->conns[i].state != SAN_CS_FREE && f->conns[i].fd == fd) {
			n++;
			if (c)
				*c = &f->conns[i];
		}
	return n;
}

static int in_use(const struct san_stats_file *f)
{
	int n = 0;

	for (unsigned int i = 0; i < SAN_STATS_CONNS; i++)
		n += f->conns[i].state != SAN_CS_FREE;
	return n;
}

START_TEST(test_claim_update_release)
{
	const struct san_stats_conn *c = NULL;
	struct san_stats_conn *live;
	struct san_stats_file *r;
	struct san_tuple t;
	unsigned int skipped;
	uint32_t gen;

	ck_assert_int_eq(san_fd_track(42, SAN_FD_ACTIVE, 0), 0);
	live = san_stats_conn_claim(42, SAN_ROLE_CLIENT);
	ck_assert_ptr_nonnull(live);
	ck_assert_ptr_eq(san_stats_conn_of(42), live);
	ck_assert(san_fd_flags(san_fd_get(42)) & SAN_FDF_STATSLOT);
	gen = live->gen;

	r = read_back(&skipped);
	ck_assert_uint_eq(skipped, 0);
	ck_assert_int_eq(in_use_with_fd(r, 42, &c), 1);
	ck_assert_uint_eq(c->state, SAN_CS_CANDIDATE);
	ck_assert_uint_eq(c->role, SAN_ROLE_CLIENT);
	ck_assert_uint_eq(c->prov, SAN_CP_TCP);
	ck_assert_uint_eq(c->addr_known, 0);
	ck_assert_uint_eq(c->seq % 2, 0);

	/* counts, addresses, state: what the reader sees */
	san_stats_conn_add(&live->tcp_tx, 100);
	san_stats_conn_add(&live->tcp_rx, 7);
	memset(&t, 0, sizeof(t));
	t.local.addr[10] = t.local.addr[11] = 0xff;
	t.local.addr[12] = 127;
	t.local.addr[15] = 1;
	t.local.port = 40000;
	t.peer = t.local;
	t.peer.port = 5201;
	san_stats_conn_set_addrs(live, &t, SAN_CA_PEER);
	san_stats_conn_set(live, SAN_CS_UPGRADING, SAN_CP_SHM, 0);
	r = read_back(NULL);
	ck_assert_int_eq(in_use_with_fd(r, 42, &c), 1);
	ck_assert_uint_eq(c->state, SAN_CS_UPGRADING);
	ck_assert_uint_eq(c->prov, SAN_CP_SHM);
	ck_assert_uint_eq(c->addr_known, SAN_CA_PEER);
	ck_assert_uint_eq(c->peer_port, 5201);
	ck_assert_uint_eq(c->local_port, 0); /* not said yet */
	ck_assert_uint_eq(c->peer_addr[12], 127);
	ck_assert_uint_eq(c->tcp_tx, 100);
	ck_assert_uint_eq(c->tcp_rx, 7);
	san_stats_conn_set_addrs(live, &t, SAN_CA_LOCAL | SAN_CA_PEER);
	san_stats_conn_set(live, SAN_CS_SWITCHED, SAN_CONN_KEEP, 0);
	san_stats_conn_add(&live->san_tx, 1 << 20);
	san_stats_conn_add(&live->san_rx, 3);
	r = read_back(NULL);
	ck_assert_int_eq(in_use_with_fd(r, 42, &c), 1);
	ck_assert_uint_eq(c->state, SAN_CS_SWITCHED);
	ck_assert_uint_eq(c->prov, SAN_CP_SHM); /* kept */
	ck_assert_uint_eq(c->local_port, 40000);
	ck_assert_uint_eq(c->san_tx, 1 << 20);
	ck_assert_uint_eq(c->san_rx, 3);

	/* release: gone from the reader's view; the next claim starts from zero */
	san_stats_conn_release(42);
	ck_assert_ptr_null(san_stats_conn_of(42));
	r = read_back(NULL);
	ck_assert_int_eq(in_use(r), 0);
	live = san_stats_conn_claim(42, SAN_ROLE_SERVER);
	ck_assert_ptr_nonnull(live);
	ck_assert_uint_ne(live->gen, gen);
	r = read_back(NULL);
	ck_assert_int_eq(in_use_with_fd(r, 42, &c), 1);
	ck_assert_uint_eq(c->role, SAN_ROLE_SERVER);
	ck_assert_uint_eq(c->tcp_tx, 0);
	ck_assert_uint_eq(c->san_tx, 0);
	ck_assert_uint_eq(c->addr_known, 0);
}
END_TEST

/* A fallback keeps its reason; 0 leaves the reason as it was. */
START_TEST(test_fallback_reason)
{
	struct san_stats_conn *live;
	const struct san_stats_conn *c = NULL;

	ck_assert_int_eq(san_fd_track(5, SAN_FD_PASSIVE, 0), 0);
	live = san_stats_conn_claim(5, SAN_ROLE_SERVER);
	san_stats_conn_set(live, SAN_CS_FALLBACK, SAN_CP_TCP, SAN_FB_NO_PEER);
	san_stats_conn_set(live, SAN_CS_FALLBACK, SAN_CONN_KEEP, 0);
	ck_assert_int_eq(in_use_with_fd(read_back(NULL), 5, &c), 1);
	ck_assert_uint_eq(c->state, SAN_CS_FALLBACK);
	ck_assert_uint_eq(c->reason, SAN_FB_NO_PEER);
	ck_assert_str_eq(san_fb_name(c->reason), "no_peer");
	ck_assert_str_eq(san_conn_state_name(c->state), "fallback");
	ck_assert_str_eq(san_conn_prov_name(c->prov), "tcp");
	ck_assert_str_eq(san_conn_role_name(c->role), "server");
	ck_assert_str_eq(san_conn_state_name(SAN_CS_NR), "?");
}
END_TEST

/* More connections than slots: the rest are counted, none fails, every slot is one fd. */
START_TEST(test_overflow)
{
	struct san_stats_file *r;
	int fd;

	for (fd = 100; fd < 100 + SAN_STATS_CONNS + 10; fd++) {
		ck_assert_int_eq(san_fd_track(fd, SAN_FD_ACTIVE, 0), 0);
		if (fd < 100 + SAN_STATS_CONNS)
			ck_assert_ptr_nonnull(san_stats_conn_claim(fd, SAN_ROLE_CLIENT));
		else
			ck_assert_ptr_null(san_stats_conn_claim(fd, SAN_ROLE_CLIENT));
	}
	r = read_back(NULL);
	ck_assert_int_eq(in_use(r), SAN_STATS_CONNS);
	ck_assert_uint_eq(r->hdr.conn_overflow, 10);
	for (fd = 100; fd < 100 + SAN_STATS_CONNS; fd++)
		ck_assert_int_eq(in_use_with_fd(r, fd, NULL), 1);
	ck_assert_ptr_null(san_stats_conn_of(100 + SAN_STATS_CONNS));
	/* one freed: the next connection finds it */
	san_stats_conn_release(150);
	ck_assert_int_eq(san_fd_track(2000, SAN_FD_ACTIVE, 0), 0);
	ck_assert_ptr_nonnull(san_stats_conn_claim(2000, SAN_ROLE_CLIENT));
	r = read_back(NULL);
	ck_assert_int_eq(in_use_with_fd(r, 150, NULL), 0);
	ck_assert_int_eq(in_use_with_fd(r, 2000, NULL), 1);
}
END_TEST

/* A dup's close moves the slot to the number left; the last close frees it. */
START_TEST(test_close_follows_dup)
{
	int sv[2], d;
	const struct san_stats_conn *c = NULL;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	d = dup(sv[0]);
	ck_assert_int_eq(san_fd_track(sv[0], SAN_FD_SWITCHED, 0), 0);
	ck_assert_ptr_nonnull(san_stats_conn_claim(sv[0], SAN_ROLE_CLIENT));
	/* what preload/san_track.c does for a dup */
	ck_assert_int_eq(san_fd_set_flags(sv[0], SAN_FDF_DUP, 0), 0);
	ck_assert_int_eq(san_fd_copy(sv[0], d), SAN_FD_SWITCHED);
	san_stats_fd_close(sv[0]);
	close(sv[0]);
	ck_assert_int_eq(in_use_with_fd(read_back(NULL), sv[0], NULL), 0);
	ck_assert_int_eq(in_use_with_fd(read_back(NULL), d, &c), 1);
	ck_assert_uint_eq(c->role, SAN_ROLE_CLIENT);
	san_stats_fd_close(d);
	close(d);
	close(sv[1]);
	ck_assert_int_eq(in_use(read_back(NULL)), 0);
}
END_TEST

/* SANSWITCH_STATS=0: no slot, no file. */
START_TEST(test_off_claims_nothing)
{
	san_cfg.stats = SAN_CFG_STATS_OFF;
	ck_assert_int_eq(san_fd_track(9, SAN_FD_ACTIVE, 0), 0);
	ck_assert_ptr_null(san_stats_conn_claim(9, SAN_ROLE_CLIENT));
	ck_assert_ptr_null(san_stats_path());
}
END_TEST

/* A fork child's file starts empty: the parent's connections are not shown twice. */
START_TEST(test_fork_child_no_slots)
{
	int status;
	pid_t pid;

	ck_assert_int_eq(san_fd_track(11, SAN_FD_ACTIVE, 0), 0);
	ck_assert_ptr_nonnull(san_stats_conn_claim(11, SAN_ROLE_CLIENT));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		static struct san_stats_file r;
		int bad = 0;

		san_stats_atfork_child();
		if (san_stats_conn_of(11))
			bad |= 1;
		ck_assert_int_eq(san_fd_track(12, SAN_FD_ACTIVE, 0), 0);
		if (!san_stats_conn_claim(12, SAN_ROLE_CLIENT) || !san_stats_path() ||
		    san_stats_file_read(san_stats_path(), &r, NULL))
			bad |= 2;
		else if (in_use(&r) != 1 || in_use_with_fd(&r, 12, NULL) != 1)
			bad |= 4;
		san_stats_reset(NULL); /* removes the child's file */
		_exit(bad);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	/* the parent's slot is as it was */
	ck_assert_int_eq(in_use_with_fd(read_back(NULL), 11, NULL), 1);
	ck_assert_int_eq(in_use(read_back(NULL)), 1);
}
END_TEST

/* Claims and updates from many threads at once: every slot the reader shows is whole. */
static void *churn(void *arg)
{
	int base = (int)(intptr_t)arg;

	for (int i = 0; i < 2000; i++) {
		int fd = base + i % 16;
		struct san_stats_conn *c = san_stats_conn_claim(fd, SAN_ROLE_CLIENT);

		san_stats_conn_set(c, SAN_CS_SWITCHED, SAN_CP_SHM, 0);
		if (c)
			san_stats_conn_add(&c->san_tx, 1);
		san_stats_conn_release(fd);
	}
	return NULL;
}

START_TEST(test_concurrent_reader)
{
	pthread_t th[4];
	int i;

	for (i = 0; i < 4 * 16; i++)
		ck_assert_int_eq(san_fd_track(1000 + i, SAN_FD_ACTIVE, 0), 0);
	san_stats_track();
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, churn, (void *)(intptr_t)(1000 + 16 * i)), 0);
	for (i = 0; i < 50; i++) {
		struct san_stats_file *r = read_back(NULL);

		for (unsigned int k = 0; k < SAN_STATS_CONNS; k++) {
			const struct san_stats_conn *c = &r->conns[k];

			if (c->state == SAN_CS_FREE)
				continue;
			ck_assert_int_ge(c->fd, 1000);
			ck_assert_int_lt(c->fd, 1000 + 64);
			ck_assert_uint_eq(c->role, SAN_ROLE_CLIENT);
			ck_assert(c->state == SAN_CS_CANDIDATE || c->state == SAN_CS_SWITCHED);
			ck_assert(c->prov ==
				  (c->state == SAN_CS_SWITCHED ? SAN_CP_SHM : SAN_CP_TCP));
		}
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(in_use(read_back(NULL)), 0);
}
END_TEST

Suite *make_stats_conn_suite(void)
{
	Suite *s = suite_create("stats_conn");
	TCase *tc = tcase_create("stats_conn");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_claim_update_release);
	tcase_add_test(tc, test_fallback_reason);
	tcase_add_test(tc, test_overflow);
	tcase_add_test(tc, test_close_follows_dup);
	tcase_add_test(tc, test_off_claims_nothing);
	tcase_add_test(tc, test_fork_child_no_slots);
	tcase_add_test(tc, test_concurrent_reader);
	suite_add_tcase(s, tc);
	return s;
}
