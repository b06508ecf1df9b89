/* tests/unit: core/san_stats — reasons, byte accounting, the shared file, the exit line. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"
#include "core/san_logfile.h"
#include "core/san_stats.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_stderr.h"

/* ---- fixture: a private directory for the stats files, fresh counters ------- */

static char dir[64];
static int saved_level;

static void stats_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_stats.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	saved_level = san_log_level;
	san_log_level = SAN_LOG_ERROR;
	san_cfg = san_config_defaults;
	san_stats_reset(dir);
}

static void stats_teardown(void)
{
	char cmd[128];

	san_stats_reset(NULL);
	san_cfg = san_config_defaults;
	san_log_level = saved_level;
	if (san_fdt.size)
		san_fdtable_free();
	/* Whatever a failed case left behind. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *path_of(pid_t pid)
{
	static char p[128];

	snprintf(p, sizeof(p), "%s/sanswitch.%d", dir, (int)pid);
	return p;
}

static bool exists(const char *p)
{
	return access(p, F_OK) == 0;
}

/* ---- reasons -------------------------------------------------------------- */

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
			return false;
	return true;
}

START_TEST(test_reason_table)
{
	static const unsigned int unknown[] = { SAN_R_MAX + 1, 31, 36, 46, 48, 1000, 65535 };
	const char *names[SAN_FB_SLOTS];
	unsigned int r, i, n = 0;

	/* Every wire reason has its own slot, same value, and a one-token name. */
	for (r = 0; r <= SAN_R_MAX; r++) {
		ck_assert_uint_eq(san_fb_slot(r), r);
		ck_assert_msg(is_token(san_fb_name(r)), "reason %u: '%s'", r, san_fb_name(r));
		ck_assert_str_ne(san_fb_name(r), "unknown");
		names[n++] = san_fb_name(r);
	}
	ck_assert_str_eq(san_fb_name(SAN_R_TIMEOUT), "timeout");
	ck_assert_str_eq(san_fb_name(SAN_R_NOT_OWNER), "not_owner");
	ck_assert_str_eq(san_fb_name(SAN_R_APP_RESET), "app_reset");
	/* The local ones. */
	ck_assert_str_eq(san_fb_name(SAN_FB_NOT_ATTEMPTED), "not_attempted");
	ck_assert_str_eq(san_fb_name(SAN_FB_NO_PEER), "no_peer");
	ck_assert_str_eq(san_fb_name(SAN_FB_NO_PROVIDER), "no_provider");
	ck_assert_str_eq(san_fb_name(SAN_FB_CONF), "conf");
	names[n++] = san_fb_name(SAN_FB_NOT_ATTEMPTED);
	names[n++] = san_fb_name(SAN_FB_NO_PEER);
	names[n++] = san_fb_name(SAN_FB_NO_PROVIDER);
	names[n++] = san_fb_name(SAN_FB_CONF);
	ck_assert_uint_eq(san_fb_slot(SAN_FB_NO_PEER), SAN_FB_NO_PEER);
	/* Values without a name all land in the one "unknown" slot. */
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		ck_assert_uint_eq(san_fb_slot(unknown[i]), SAN_FB_UNKNOWN);
		ck_assert_str_eq(san_fb_name(unknown[i]), "unknown");
	}
	ck_assert_uint_lt(SAN_FB_UNKNOWN, SAN_FB_SLOTS);
	/* Names are distinct: sanstat and the exit line key on them. */
	for (r = 0; r < n; r++)
		for (i = 0; i < r; i++)
			ck_assert_str_ne(names[r], names[i]);
}
END_TEST

START_TEST(test_stat_names)
{
	static const char *const first[] = { "switched",     "fallback",     "san_tx_bytes",
					     "san_rx_bytes", "tcp_tx_bytes", "tcp_rx_bytes" };
	unsigned int i, j;

	/* The exit line's required fields, in the required order, are the first counters. */
	for (i = 0; i < sizeof(first) / sizeof(first[0]); i++)
		ck_assert_str_eq(san_stat_name(i), first[i]);
	for (i = 0; i < SAN_STAT_NR; i++) {
		ck_assert(is_token(san_stat_name(i)));
		for (j = 0; j < i; j++)
			ck_assert_str_ne(san_stat_name(i), san_stat_name(j));
	}
	ck_assert_str_eq(san_stat_name(SAN_STAT_NR), "?");
}
END_TEST

/* ---- TCP payload from the kernel's counters ------------------------------ */

/* tcpi_state values (include/net/tcp_states.h). */
enum {
	EST = 1,
	SYN_SENT = 2,
	FIN_WAIT1 = 4,
	FIN_WAIT2 = 5,
	TIME_WAIT = 6,
	CLOSE = 7,
	CLOSE_WAIT = 8,
	LAST_ACK = 9,
	CLOSING = 11
};

static const struct {
	bool active;
	struct san_tcp_counts tc;
	bool counted;
	uint64_t tx, rx;
} pay[] = {
	/* With bytes_sent (>= 4.19): data only, retransmissions once, queued data included. */
	{ false, { EST, true, 0, 500, 1000, 0, 0 }, true, 1000, 500 },
	{ true, { EST, true, 801, 10, 1000, 200, 50 }, true, 850, 10 },
	{ true, { FIN_WAIT1, true, 1001, 0, 1000, 0, 24 }, true, 1024, 0 },
	{ false, { EST, true, 0, 0, 10, 20, 3 }, true, 3, 0 },
	/* Never established (active): refused, timed out, still connecting. */
	{ true, { SYN_SENT, true, 0, 0, 0, 0, 0 }, false, 0, 0 },
	{ true, { CLOSE, true, 0, 0, 0, 0, 0 }, false, 0, 0 },
	/* A passive one always was; one that moved nothing still counts. */
	{ false, { CLOSE, true, 0, 0, 0, 0, 0 }, true, 0, 0 },
	{ true, { EST, true, 1, 0, 0, 0, 0 }, true, 0, 0 },
	/* Without bytes_sent: bytes_acked minus our SYN and our FIN once acked. */
	{ true, { EST, false, 1001, 7, 0, 0, 0 }, true, 1000, 7 },
	{ true, { FIN_WAIT2, false, 1002, 7, 0, 0, 0 }, true, 1000, 7 },
	{ false, { FIN_WAIT2, false, 1001, 7, 0, 0, 0 }, true, 1000, 7 },
	{ false, { EST, false, 1000, 7, 0, 0, 0 }, true, 1000, 7 },
	/* The peer's FIN, where the state shows it arrived. */
	{ false, { CLOSE_WAIT, true, 0, 501, 0, 0, 0 }, true, 0, 500 },
	{ false, { LAST_ACK, true, 0, 501, 0, 0, 0 }, true, 0, 500 },
	{ false, { CLOSING, true, 0, 501, 0, 0, 0 }, true, 0, 500 },
	{ true, { TIME_WAIT, false, 1002, 501, 0, 0, 0 }, true, 1000, 500 },
	/* CLOSE: FIN or RST cannot be told apart; the count is an upper bound (one byte). */
	{ false, { CLOSE, true, 0, 501, 0, 0, 0 }, true, 0, 501 },
	/* Zero never goes negative. */
	{ false, { CLOSE_WAIT, false, 0, 0, 0, 0, 0 }, true, 0, 0 },
};

START_TEST(test_tcp_payload)
{
	uint64_t tx = 12345, rx = 12345;
	bool counted = san_stats_tcp_payload(&pay[_i].tc, pay[_i].active, &tx, &rx);

	ck_assert_int_eq(counted, pay[_i].counted);
	if (!counted)
		return;
	ck_assert_uint_eq(tx, pay[_i].tx);
	ck_assert_uint_eq(rx, pay[_i].rx);
}
END_TEST

/* ---- /proc/<pid>/stat ---------------------------------------------------- */

START_TEST(test_procstat)
{
	char comm[16];
	uint64_t st = 0;
	const char *tail = " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 19 20\n";
	char line[256];

	snprintf(line, sizeof(line), "123 (iperf3)%s", tail);
	ck_assert_int_eq(san_stats_parse_procstat(line, comm, &st), 0);
	ck_assert_str_eq(comm, "iperf3");
	ck_assert_uint_eq(st, 424242);

	/* comm may hold blanks and parentheses: it ends at the last ')'. */
	snprintf(line, sizeof(line), "123 (a (b) c)%s", tail);
	ck_assert_int_eq(san_stats_parse_procstat(line, comm, &st), 0);
	ck_assert_str_eq(comm, "a (b) c");

	snprintf(line, sizeof(line), "123 (0123456789abcdefXYZ)%s", tail);
	ck_assert_int_eq(san_stats_parse_procstat(line, comm, &st), 0);
	ck_assert_str_eq(comm, "0123456789abcde");

	ck_assert_int_eq(san_stats_parse_procstat("123 (x) S 1 2 3\n", comm, &st), -EINVAL);
	ck_assert_int_eq(san_stats_parse_procstat("no parens", comm, &st), -EINVAL);
	ck_assert_int_eq(san_stats_parse_procstat(")(", comm, &st), -EINVAL);
}
END_TEST

/* ---- the file -------------------------------------------------------------- */

START_TEST(test_file_round_trip)
{
	struct san_stats_file *f, r;
	struct stat st;
	unsigned int i;

	ck_assert_int_eq(san_stats_file_create(dir, getpid(), &f), 0);
	ck_assert_int_eq(stat(path_of(getpid()), &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_uint_eq(st.st_size, sizeof(struct san_stats_file));

	ck_assert_uint_eq(f->hdr.magic, SAN_STATS_MAGIC);
	ck_assert_uint_eq(f->hdr.version, SAN_STATS_VERSION);
	ck_assert_uint_eq(f->hdr.hdr_len, sizeof(struct san_stats_hdr));
	ck_assert_uint_eq(f->hdr.nr_counters, SAN_STATS_COUNTERS);
	ck_assert_uint_eq(f->hdr.nr_reasons, SAN_FB_SLOTS);
	ck_assert_int_eq(f->hdr.pid, getpid());
	ck_assert_uint_gt(f->hdr.start_ticks, 0);
	ck_assert_uint_gt(f->hdr.created_ns, 0);
	{
		char comm[32] = "";
		FILE *c = fopen("/proc/self/comm", "r");

		ck_assert_ptr_nonnull(c);
		ck_assert_ptr_nonnull(fgets(comm, sizeof(comm), c));
		fclose(c);
		comm[strcspn(comm, "\n")] = '\0';
		ck_assert_str_eq(f->hdr.comm, comm);
	}
	ck_assert_uint_eq(f->hdr.flags, 0);

	for (i = 0; i < SAN_STATS_COUNTERS; i++)
		f->counters[i] = i * 7 + 1;
	for (i = 0; i < SAN_FB_SLOTS; i++)
		f->fallback[i] = i * 3 + 2;
	ck_assert_int_eq(san_stats_file_read(path_of(getpid()), &r, NULL), 0);
	ck_assert_mem_eq(&r.hdr, &f->hdr, sizeof(r.hdr));
	ck_assert_mem_eq(r.counters, f->counters, sizeof(r.counters));
	ck_assert_mem_eq(r.fallback, f->fallback, sizeof(r.fallback));
	san_stats_file_unmap(f);
	unlink(path_of(getpid()));
}
END_TEST

static void write_file(const char *p, const void *buf, size_t len)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The header of a file as this build writes it. */
static void good_hdr(struct san_stats_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = SAN_STATS_MAGIC;
	h->version = SAN_STATS_VERSION;
	h->hdr_len = sizeof(*h);
	h->nr_counters = SAN_STATS_COUNTERS;
	h->nr_reasons = SAN_FB_SLOTS;
	h->nr_conns = SAN_STATS_CONNS;
	h->conn_len = sizeof(struct san_stats_conn);
	h->conn_off = offsetof(struct san_stats_file, conns);
}

START_TEST(test_file_read_rejects)
{
	static struct san_stats_file good, r;
	/* a later layout: longer header, more counters, reasons and slots, longer slots */
	enum { HL = 96, NC = 40, NR = 50, NS = SAN_STATS_CONNS + 20, CL = 136 };
	enum { CO = HL + 8 * (NC + NR), BIG = CO + NS * CL };
	static unsigned char big[BIG];
	struct san_stats_hdr *h = (void *)big;
	struct san_stats_conn *c;
	char p[128];
	unsigned int i;

	snprintf(p, sizeof(p), "%s/f", dir);
	memset(&good, 0, sizeof(good));
	good_hdr(&good.hdr);
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), 0);

	ck_assert_int_eq(san_stats_file_read("/nonexistent/x", &r, NULL), -ENOENT);
	ck_assert_int_eq(san_stats_file_read(dir, &r, NULL), -EPROTO); /* a directory */
	write_file(p, &good, 10);
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	write_file(p, &good, sizeof(good) - 8); /* slots cut short */
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	good.hdr.magic = 0x12345678;
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	good.hdr.magic = SAN_STATS_MAGIC;
	good.hdr.version = SAN_STATS_VERSION + 1;
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTONOSUPPORT);
	good.hdr.version = 1; /* the layout before the connection table */
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTONOSUPPORT);
	good.hdr.version = SAN_STATS_VERSION;
	good.hdr.hdr_len = 32;
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	good_hdr(&good.hdr);
	good.hdr.conn_off = 64; /* the table over the counters */
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	good_hdr(&good.hdr);
	good.hdr.conn_len = 8; /* slots shorter than a record */
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);
	good_hdr(&good.hdr);
	good.hdr.nr_conns = 0xffffffffu; /* a count whose product would wrap */
	good.hdr.conn_len = 4096;
	write_file(p, &good, sizeof(good));
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), -EPROTO);

	/* A later writer: what this build knows is found where that header says. */
	memset(big, 0, sizeof(big));
	good_hdr(h);
	h->hdr_len = HL;
	h->nr_counters = NC;
	h->nr_reasons = NR;
	h->nr_conns = NS;
	h->conn_len = CL;
	h->conn_off = CO;
	for (i = 0; i < NC; i++)
		((uint64_t *)(big + HL))[i] = 100 + i;
	for (i = 0; i < NR; i++)
		((uint64_t *)(big + HL + 8 * NC))[i] = 1000 + i;
	c = (void *)(big + CO + 3 * CL);
	c->seq = 2;
	c->fd = 7;
	c->state = SAN_CS_SWITCHED;
	c->role = SAN_ROLE_SERVER;
	c->prov = SAN_CP_SHM;
	c->peer_port = 5201;
	c->san_tx = 12345;
	c = (void *)(big + CO + (SAN_STATS_CONNS + 1) * CL); /* beyond this build's slots */
	c->fd = 9;
	c->state = SAN_CS_CANDIDATE;
	c->role = SAN_ROLE_CLIENT;
	write_file(p, big, sizeof(big));
	ck_assert_int_eq(san_stats_file_read(p, &r, &i), 0);
	ck_assert_uint_eq(i, 0);
	ck_assert_uint_eq(r.hdr.nr_counters, SAN_STATS_COUNTERS);
	ck_assert_uint_eq(r.hdr.nr_reasons, SAN_FB_SLOTS);
	ck_assert_uint_eq(r.hdr.nr_conns, SAN_STATS_CONNS);
	ck_assert_uint_eq(r.counters[0], 100);
	ck_assert_uint_eq(r.counters[SAN_STATS_COUNTERS - 1], 100 + SAN_STATS_COUNTERS - 1);
	ck_assert_uint_eq(r.fallback[0], 1000);
	ck_assert_uint_eq(r.fallback[SAN_FB_SLOTS - 1], 1000 + SAN_FB_SLOTS - 1);
	for (i = 0; i < SAN_STATS_CONNS; i++)
		ck_assert_uint_eq(r.conns[i].state, i == 3 ? SAN_CS_SWITCHED : SAN_CS_FREE);
	ck_assert_int_eq(r.conns[3].fd, 7);
	ck_assert_uint_eq(r.conns[3].peer_port, 5201);
	ck_assert_uint_eq(r.conns[3].san_tx, 12345);
}
END_TEST

/*
 * Records no writer makes are left out and counted, never shown: a slot with a state, role or
 * provider out of range, a negative fd, a seq left odd (a writer that never finished).
 */
START_TEST(test_file_read_bad_slots)
{
	static struct san_stats_file f, r;
	char p[128];
	unsigned int skipped, i;

	snprintf(p, sizeof(p), "%s/f", dir);
	memset(&f, 0, sizeof(f));
	good_hdr(&f.hdr);
	for (i = 0; i < 7; i++) {
		f.conns[i].seq = 4;
		f.conns[i].fd = 10 + (int)i;
		f.conns[i].state = SAN_CS_FALLBACK;
		f.conns[i].role = SAN_ROLE_CLIENT;
		f.conns[i].prov = SAN_CP_TCP;
		f.conns[i].reason = SAN_FB_NO_PEER;
	}
	f.conns[1].state = SAN_CS_NR;
	f.conns[2].role = 3;
	f.conns[3].prov = SAN_CP_NR;
	f.conns[4].fd = -1;
	f.conns[5].seq = 5;
	f.conns[6].addr_known = 4;
	f.conns[9].seq = 7; /* odd but free: a slot being claimed, nothing to show yet */
	write_file(p, &f, sizeof(f));
	ck_assert_int_eq(san_stats_file_read(p, &r, &skipped), 0);
	ck_assert_uint_eq(skipped, 6);
	ck_assert_uint_eq(r.conns[0].state, SAN_CS_FALLBACK);
	ck_assert_int_eq(r.conns[0].fd, 10);
	ck_assert_uint_eq(r.conns[0].reason, SAN_FB_NO_PEER);
	for (i = 1; i < SAN_STATS_CONNS; i++)
		ck_assert_uint_eq(r.conns[i].state, SAN_CS_FREE);
}
END_TEST

/* A file with our pid is a dead process's leftover: replaced. A symlink there is refused. */
START_TEST(test_file_leftover_and_symlink)
{
	struct san_stats_file *f;
	char target[128];

	ck_assert_int_eq(san_stats_file_create(dir, 4242, &f), 0);
	f->counters[SAN_STAT_SWITCHED] = 99;
	san_stats_file_unmap(f);
	ck_assert_int_eq(san_stats_file_create(dir, 4242, &f), 0);
	ck_assert_uint_eq(f->counters[SAN_STAT_SWITCHED], 0);
	san_stats_file_unmap(f);

	snprintf(target, sizeof(target), "%s/target", dir);
	write_file(target, "keep", 4);
	ck_assert_int_eq(symlink(target, path_of(4343)), 0);
	ck_assert_int_eq(san_stats_file_create(dir, 4343, &f), -EEXIST);
	{
		struct stat st;

		ck_assert_int_eq(stat(target, &st), 0);
		ck_assert_int_eq(st.st_size, 4);
	}
}
END_TEST

/* A pid that was ours a moment ago and is gone now (reaped). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* A stats file in dir for @pid, its header then changed as asked. */
static void leftover(pid_t pid, uint64_t pidns, uint64_t start)
{
	struct san_stats_file *f;

	ck_assert_int_eq(san_stats_file_create(dir, pid, &f), 0);
	f->hdr.pidns = pidns;
	f->hdr.start_ticks = start;
	san_stats_file_unmap(f);
}

static uint64_t start_of(pid_t pid)
{
	char p[64], buf[1024], comm[16];
	uint64_t st = 0;
	FILE *fp;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fp = fopen(p, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	ck_assert_int_eq(san_stats_parse_procstat(buf, comm, &st), 0);
	return st;
}

/* Dead processes' files go; live ones', other namespaces', strangers' and our own stay. */
START_TEST(test_gc)
{
	struct san_stats_file *f;
	pid_t dead = dead_pid(), dead2 = dead_pid(), dead3 = dead_pid(), ppid = getppid();
	uint64_t ns;
	char p[128];

	ck_assert_int_eq(san_stats_file_create(dir, getpid(), &f), 0);
	ns = f->hdr.pidns;
	ck_assert_uint_ne(ns, 0);
	san_stats_file_unmap(f);

	leftover(dead, ns, 1234);		/* gone: removed */
	leftover(ppid, ns, start_of(ppid) + 1); /* pid reused since: removed */
	leftover(dead2, ns + 1, 1234);		/* another pid namespace: kept */
	leftover(1, ns, start_of(1));		/* alive, same process: kept */
	write_file(path_of(dead3),
		   "not a stats file, not at all, no: longer than a header......."
		   "..............................",
		   90); /* not ours to judge: kept */
	snprintf(p, sizeof(p), "%s/sanswitch.x%d", dir, (int)dead);
	write_file(p, "x", 1);

	ck_assert_int_eq(san_stats_gc(dir, ns, getpid()), 2);
	ck_assert(!exists(path_of(dead)));
	ck_assert(!exists(path_of(ppid)));
	ck_assert(exists(path_of(dead2)));
	ck_assert(exists(path_of(1)));
	ck_assert(exists(path_of(dead3)));
	ck_assert(exists(p));
	ck_assert(exists(path_of(getpid())));
	ck_assert_int_eq(san_stats_gc(dir, ns, getpid()), 0);
	ck_assert_int_eq(san_stats_gc("/nonexistent", ns, getpid()), 0);
}
END_TEST

/* ---- the live counters ---------------------------------------------------- */

#define THREADS 4
#define ROUNDS 20000

static void *counting_thread(void *arg)
{
	int i;

	for (i = 0; i < ROUNDS; i++) {
		san_stats_add(SAN_STAT_TCP_TX_BYTES, 3);
		san_stats_add(SAN_STAT_SAN_RX_BYTES, 1);
		san_stats_fallback(i & 1 ? SAN_FB_NOT_ATTEMPTED : SAN_R_TIMEOUT);
		if (i % 100 == 0)
			san_stats_fallback(999); /* unknown */
	}
	return arg;
}

START_TEST(test_aggregation)
{
	pthread_t t[THREADS];
	struct san_stats_file r;
	const char *p;
	int i;

	/* No file before the first tracked socket. */
	ck_assert_ptr_null(san_stats_current());
	ck_assert_ptr_null(san_stats_path());
	ck_assert(!exists(path_of(getpid())));
	san_stats_track();
	p = san_stats_path();
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p, path_of(getpid()));
	ck_assert(exists(p));

	for (i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, counting_thread, NULL), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);

	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 3ull * THREADS * ROUNDS);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_SAN_RX_BYTES), 1ull * THREADS * ROUNDS);
	ck_assert_uint_eq(san_stats_get_fallback(SAN_FB_NOT_ATTEMPTED), THREADS * ROUNDS / 2);
	ck_assert_uint_eq(san_stats_get_fallback(SAN_R_TIMEOUT), THREADS * ROUNDS / 2);
	ck_assert_uint_eq(san_stats_get_fallback(999), THREADS * ROUNDS / 100);
	ck_assert_uint_eq(san_stats_get_fallback(SAN_FB_UNKNOWN), THREADS * ROUNDS / 100);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK),
			  THREADS * ROUNDS + THREADS * ROUNDS / 100);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_SWITCHED), 0);
	san_stats_add(SAN_STAT_NR, 5); /* ignored */

	/* What sanstat would read is what we counted. */
	ck_assert_int_eq(san_stats_file_read(p, &r, NULL), 0);
	ck_assert_int_eq(r.hdr.pid, getpid());
	ck_assert_uint_eq(r.counters[SAN_STAT_TCP_TX_BYTES], 3ull * THREADS * ROUNDS);
	ck_assert_uint_eq(r.counters[SAN_STAT_FALLBACK], san_stats_get(SAN_STAT_FALLBACK));
	ck_assert_uint_eq(r.fallback[SAN_FB_NOT_ATTEMPTED], THREADS * ROUNDS / 2);
}
END_TEST

START_TEST(test_off_counts_nothing)
{
	san_cfg.stats = SAN_CFG_STATS_OFF;
	san_stats_track();
	san_stats_add(SAN_STAT_TCP_TX_BYTES, 10);
	san_stats_fallback(SAN_R_TIMEOUT);
	ck_assert_ptr_null(san_stats_current());
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 0);
	ck_assert(!exists(path_of(getpid())));
}
END_TEST

/* ---- real connections -------------------------------------------------------- */

/* A connected loopback TCP pair: *c the connecting side, *s the accepted one. */
static void tcp_pair(int *c, int *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(*c, (struct sockaddr *)&a, sizeof(a)), 0);
	*s = accept(l, NULL, NULL);
	ck_assert_int_ge(*s, 0);
	close(l);
}

static void xfer(int from, int to, size_t n)
{
	char buf[4096];
	size_t got = 0;

	memset(buf, 'x', sizeof(buf));
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert_int_eq(send(from, buf, n, 0), (ssize_t)n);
	while (got < n) {
		ssize_t r = recv(to, buf, n - got, 0);

		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
}

START_TEST(test_conn_end_real)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int c, s, r, sp[2];

	tcp_pair(&c, &s);
	xfer(c, s, 1000);
	xfer(s, c, 300);
	san_stats_conn_end(c, true, SAN_FB_NOT_ATTEMPTED);
	san_stats_conn_end(s, false, SAN_FB_NOT_ATTEMPTED);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 1300);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_RX_BYTES), 1300);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 2);
	ck_assert_uint_eq(san_stats_get_fallback(SAN_FB_NOT_ATTEMPTED), 2);
	close(c);
	close(s);

	/* A refused connect was never a connection. */
	r = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(r, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(r, (struct sockaddr *)&a, &len), 0);
	close(r);
	r = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(r, (struct sockaddr *)&a, sizeof(a)), -1);
	ck_assert_int_eq(errno, ECONNREFUSED);
	san_stats_conn_end(r, true, SAN_FB_NOT_ATTEMPTED);
	close(r);
	/* Nor is anything that is not TCP (a stale entry's number reused). */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	errno = 1234;
	san_stats_conn_end(sp[0], false, SAN_FB_NOT_ATTEMPTED);
	ck_assert_int_eq(errno, 1234); /* the application's errno stands */
	close(sp[0]);
	close(sp[1]);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 2);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 1300);
}
END_TEST

/* dup()ed fds: the connection is counted once, at the close of the last one. */
START_TEST(test_fd_close_dup)
{
	int c, s, d;

	ck_assert_int_eq(san_fdtable_alloc(1024), 0);
	tcp_pair(&c, &s);
	ck_assert_int_eq(san_fd_track(c, SAN_FD_ACTIVE, 0), 0);
	ck_assert_int_eq(san_fd_track(s, SAN_FD_PASSIVE, 0), 0);
	d = dup(c);
	/* What preload/san_track.c does for a dup. */
	ck_assert_int_eq(san_fd_set_flags(c, SAN_FDF_DUP, 0), 0);
	ck_assert_int_eq(san_fd_copy(c, d), SAN_FD_ACTIVE);
	xfer(c, s, 100);

	ck_assert_int_eq(san_stats_fd_close(c), SAN_FD_ACTIVE);
	ck_assert_ptr_null(san_fd_get(c));
	close(c);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 0);
	xfer(d, s, 50);
	ck_assert_int_eq(san_stats_fd_close(d), SAN_FD_ACTIVE);
	close(d);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 1);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 150);

	/* Never dup'ed: counted at its only close. An untracked fd: nothing. */
	ck_assert_int_eq(san_stats_fd_close(s), SAN_FD_PASSIVE);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 2);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_RX_BYTES), 150);
	ck_assert_int_eq(san_stats_fd_close(s), SAN_FD_UNTRACKED);
	close(s);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 2);

	/* A listener or an unconnected socket is no connection. */
	ck_assert_int_eq(san_fd_track(900, SAN_FD_LISTENER, 0), 0);
	ck_assert_int_eq(san_stats_fd_close(900), SAN_FD_LISTENER);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_FALLBACK), 2);
}
END_TEST

/* At exit the open connections are counted, a dup'ed one once; one line; the file goes. */
START_TEST(test_exit_line)
{
	int c1, s1, c2, s2, d;
	const char *out;
	char *file;

	san_cfg.stats = SAN_CFG_STATS_PRINT;
	ck_assert_int_eq(san_fdtable_alloc(1024), 0);
	tcp_pair(&c1, &s1);
	tcp_pair(&c2, &s2);
	san_stats_track();
	file = strdup(san_stats_path());
	ck_assert(exists(file));
	ck_assert_int_eq(san_fd_track(c1, SAN_FD_ACTIVE, 0), 0);
	ck_assert_int_eq(san_fd_track(c2, SAN_FD_ACTIVE, 0), 0);
	d = dup(c2);
	san_fd_set_flags(c2, SAN_FDF_DUP, 0);
	san_fd_copy(c2, d);
	xfer(c1, s1, 10);
	xfer(c2, s2, 20);
	xfer(s2, d, 5);

	out = unit_stderr_of(san_stats_exit);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_msg(!strncmp(out, "sanswitch: pid=", 15), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, " switched=0 fallback=2 san_tx_bytes=0 san_rx_bytes=0 "
					  "tcp_tx_bytes=30 tcp_rx_bytes=5 "));
	ck_assert_ptr_nonnull(strstr(out, " fallback_not_attempted=2\n"));
	ck_assert(!exists(file));
	/* Once only. */
	out = unit_stderr_of(san_stats_exit);
	ck_assert_str_eq(out, "");
	free(file);
	close(c1);
	close(s1);
	close(c2);
	close(s2);
	close(d);
}
END_TEST

/* SANSWITCH_STATS=log: the line goes to the log file, and nothing to stderr. */
START_TEST(test_exit_line_to_log)
{
	char log[128], text[512] = "";
	const char *out;
	int c, s, fd;
	ssize_t n;

	snprintf(log, sizeof(log), "%s/log.%%p", dir);
	san_logfile_init(log);
	snprintf(log, sizeof(log), "%s/log.%d", dir, (int)getpid());
	san_cfg.stats = SAN_CFG_STATS_LOG;
	ck_assert_int_eq(san_fdtable_alloc(1024), 0);
	tcp_pair(&c, &s);
	san_stats_track();
	ck_assert_int_eq(san_fd_track(c, SAN_FD_ACTIVE, 0), 0);
	xfer(c, s, 10);
	out = unit_stderr_of(san_stats_exit);
	ck_assert_str_eq(out, "");
	fd = open(log, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(unit_count_lines(text), 1);
	ck_assert_msg(!strncmp(text, "sanswitch: pid=", 15), "%s", text);
	ck_assert_ptr_nonnull(
		strstr(text, " fallback=1 san_tx_bytes=0 san_rx_bytes=0 tcp_tx_bytes=10 "));
	san_logfile_init(NULL);
	close(c);
	close(s);
}
END_TEST

static void exit_quiet(void)
{
	san_cfg.stats = SAN_CFG_STATS_LIVE;
	san_stats_exit();
}

/* Without SANSWITCH_STATS=1 no line, but the file goes all the same. */
START_TEST(test_exit_live_no_line)
{
	const char *out;
	char *file;

	san_stats_track();
	file = strdup(san_stats_path());
	out = unit_stderr_of(exit_quiet);
	ck_assert_str_eq(out, "");
	ck_assert(!exists(file));
	free(file);
}
END_TEST

START_TEST(test_format_line)
{
	struct san_stats_file f;
	char buf[512];
	size_t n;
	int i;

	memset(&f, 0, sizeof(f));
	f.hdr.pid = 42;
	for (i = 0; i < SAN_STAT_NR; i++)
		f.counters[i] = (uint64_t)i + 1;
	f.fallback[SAN_R_TIMEOUT] = 1;
	f.fallback[SAN_FB_NOT_ATTEMPTED] = 2;
	n = san_stats_format_line(buf, sizeof(buf), &f);
	ck_assert_str_eq(buf, "sanswitch: pid=42 switched=1 fallback=2 san_tx_bytes=3 "
			      "san_rx_bytes=4 tcp_tx_bytes=5 tcp_rx_bytes=6 enobufs=7 connects=8 "
			      "accepts=9 read_tx_bytes=10 grant_tx_bytes=11 direct_tx_bytes=12 "
			      "direct_read_tx_bytes=13 switched_verbs=14 "
			      "verbs_direct_rx_bytes=15 verbs_reg_hits=16 verbs_reg_misses=17 "
			      "verbs_ahead_rx_bytes=18 verbs_cq_engine=19 verbs_cq_app=20 "
			      "shm_bells=21 shm_arms=22 shm_read_arms=23 shm_empty_arms=24 "
			      "fallback_timeout=1 "
			      "fallback_not_attempted=2\n");
	ck_assert_uint_eq(n, strlen(buf));
	/* Truncated, it is still one line. */
	n = san_stats_format_line(buf, 20, &f);
	ck_assert_uint_eq(n, 19);
	ck_assert_int_eq(buf[18], '\n');
	ck_assert_int_eq(unit_count_lines(buf), 1);
}
END_TEST

/* ---- fork and exec ---------------------------------------------------------- */

static int child_checks(pid_t parent)
{
	san_stats_atfork_child();
	if (san_stats_current() || san_stats_path())
		return 10;
	if (san_stats_get(SAN_STAT_TCP_TX_BYTES) != 0)
		return 11;
	san_stats_add(SAN_STAT_TCP_TX_BYTES, 5);
	if (!exists(path_of(getpid())) || !exists(path_of(parent)))
		return 12;
	if (san_stats_get(SAN_STAT_TCP_TX_BYTES) != 5)
		return 13;
	san_stats_exit(); /* its own file only */
	if (exists(path_of(getpid())) || !exists(path_of(parent)))
		return 14;
	return 0;
}

START_TEST(test_fork_child_own_counters)
{
	int status;
	pid_t pid;

	san_stats_add(SAN_STAT_TCP_TX_BYTES, 100);
	ck_assert(exists(path_of(getpid())));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child_checks(getppid()));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_TCP_TX_BYTES), 100);
	ck_assert(exists(path_of(getpid())));
	ck_assert(!exists(path_of(pid)));
}
END_TEST

/* The environment the exec of exec_hook() passes on. */
static char **exec_env;

static void exec_hook(void)
{
	san_stats_before_exec(exec_env);
}

/* A next program that will not count (SANSWITCH_STATS=0): the name is freed for it. */
START_TEST(test_before_exec)
{
	char *env[] = { "SANSWITCH_STATS=0", NULL };

	san_stats_track();
	ck_assert(exists(path_of(getpid())));
	san_stats_before_exec(env);
	ck_assert(!exists(path_of(getpid())));
	ck_assert_ptr_null(san_stats_path());
	/* A failed exec: the process goes on counting, privately. */
	san_stats_add(SAN_STAT_ACCEPTS, 1);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_ACCEPTS), 1);
}
END_TEST

/*
 * A next program that will count and print: no line at the exec, the file stays, flagged; the
 * new image (same pid: here the same process, its state forgotten as a fork child's is) takes
 * it over at load, counts on, and its one line has both images' counts.
 */
START_TEST(test_exec_hand_over)
{
	char *env[] = { "PATH=/bin", "SANSWITCH_STATS=1", NULL };
	struct san_stats_file r;
	const char *out;
	char *file;

	san_cfg.stats = SAN_CFG_STATS_PRINT;
	san_stats_add(SAN_STAT_CONNECTS, 1);
	san_stats_fallback(SAN_FB_NOT_ATTEMPTED);
	file = strdup(san_stats_path());
	exec_env = env;
	out = unit_stderr_of(exec_hook);
	ck_assert_str_eq(out, "");
	ck_assert(exists(file));
	ck_assert_str_eq(san_stats_path(), file);
	ck_assert_int_eq(san_stats_file_read(file, &r, NULL), 0);
	ck_assert_uint_eq(r.hdr.flags, SAN_STATS_F_EXEC);

	/* the new image */
	san_stats_atfork_child();
	ck_assert_ptr_null(san_stats_current());
	ck_assert(san_stats_take_over());
	ck_assert_str_eq(san_stats_path(), file);
	ck_assert_int_eq(san_stats_file_read(file, &r, NULL), 0);
	ck_assert_uint_eq(r.hdr.flags, 0);
	ck_assert_uint_eq(san_stats_get(SAN_STAT_CONNECTS), 1);
	ck_assert_uint_eq(san_stats_get_fallback(SAN_FB_NOT_ATTEMPTED), 1);
	san_stats_add(SAN_STAT_ACCEPTS, 2);
	out = unit_stderr_of(san_stats_exit);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, " fallback=1 "));
	ck_assert_ptr_nonnull(strstr(out, " connects=1 accepts=2 "));
	ck_assert(!exists(file));

	/* Nothing handed over (the flag is cleared once taken): nothing taken. */
	san_stats_atfork_child();
	ck_assert(!san_stats_take_over());
	ck_assert_ptr_null(san_stats_current());
	free(file);
}
END_TEST

/*
 * A next program that will not print (no SANSWITCH_STATS=1): the line is printed at the exec.
 * The exec fails, the process goes on: a second attempt and the exit print only what was
 * counted since, and nothing when that is nothing.
 */
START_TEST(test_exec_prints_now)
{
	char *env[] = { NULL };
	const char *out;
	char *file;

	san_cfg.stats = SAN_CFG_STATS_PRINT;
	san_stats_add(SAN_STAT_CONNECTS, 2);
	file = strdup(san_stats_path());
	exec_env = env;
	out = unit_stderr_of(exec_hook);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, " connects=2 accepts=0 "));
	ck_assert(!exists(file));
	ck_assert_ptr_null(san_stats_path());
	out = unit_stderr_of(exec_hook);
	ck_assert_str_eq(out, "");
	san_stats_add(SAN_STAT_ACCEPTS, 1);
	out = unit_stderr_of(san_stats_exit);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, " connects=0 accepts=1 "));
	ck_assert_uint_eq(san_stats_get(SAN_STAT_CONNECTS), 2);

	/* Printed at the exec, nothing since: no line at exit. */
	san_stats_reset(dir);
	san_cfg.stats = SAN_CFG_STATS_PRINT;
	san_stats_track();
	out = unit_stderr_of(exec_hook);
	ck_assert_int_eq(unit_count_lines(out), 1);
	out = unit_stderr_of(san_stats_exit);
	ck_assert_str_eq(out, "");
	free(file);
}
END_TEST

/*
 * No TCP socket, no line: not at exit, not at an exec. A fork child whose table holds its
 * parent's sockets (no counters of its own) prints one.
 */
START_TEST(test_quiet_without_tcp)
{
	char *env[] = { NULL };
	const char *out;

	san_cfg.stats = SAN_CFG_STATS_PRINT;
	exec_env = env;
	out = unit_stderr_of(exec_hook);
	ck_assert_str_eq(out, "");
	out = unit_stderr_of(san_stats_exit);
	ck_assert_str_eq(out, "");
	ck_assert_ptr_null(san_stats_path());
	ck_assert(!exists(path_of(getpid())));

	san_stats_reset(dir);
	ck_assert_int_eq(san_fdtable_alloc(1024), 0);
	ck_assert_int_eq(san_fd_track(900, SAN_FD_LISTENER, 0), 0);
	out = unit_stderr_of(san_stats_exit);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, " switched=0 fallback=0 "));
	san_fd_clear(900);
}
END_TEST

START_TEST(test_exec_hands_over_rule)
{
	/* clang-format off */
	static const struct {
		const char *env[4];
		bool by_env;
		enum san_cfg_stats ours;
		bool want;
	} t[] = {
		{ { NULL }, false, SAN_CFG_STATS_LIVE, true },
		{ { NULL }, false, SAN_CFG_STATS_PRINT, false }, /* the next one would not print */
		{ { "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_PRINT, true },
		{ { "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_LIVE, true },
		{ { "SANSWITCH_STATS=1" }, true, SAN_CFG_STATS_PRINT, false }, /* no LD_PRELOAD */
		{ { "LD_PRELOAD=/x/libsanswitch.so", "SANSWITCH_STATS=1" }, true,
		  SAN_CFG_STATS_PRINT, true },
		{ { "LD_PRELOAD=libasan.so.8 /b/libsanswitch.so" }, true, SAN_CFG_STATS_LIVE, true },
		{ { "LD_PRELOAD=/x/libother.so", "SANSWITCH_STATS=1" }, true, SAN_CFG_STATS_PRINT,
		  false },
		{ { "LD_PRELOAD=" }, true, SAN_CFG_STATS_LIVE, false },
		{ { "SANSWITCH_STATS=0" }, false, SAN_CFG_STATS_LIVE, false },
		{ { "SANSWITCH_STATS=" }, false, SAN_CFG_STATS_LIVE, true },
		{ { "SANSWITCH_STATS=bogus" }, false, SAN_CFG_STATS_LIVE, true },
		{ { "SANSWITCH_STATS=bogus" }, false, SAN_CFG_STATS_PRINT, false },
		{ { "SANSWITCH_DISABLE=1", "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_PRINT, false },
		{ { "SANSWITCH_DISABLE=0", "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_PRINT, true },
		{ { "SANSWITCH_DISABLE=yes", "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_PRINT,
		  true },
		/* names that only begin or end like ours are not ours */
		{ { "SANSWITCH_STATS_X=0", "XSANSWITCH_STATS=0", "SANSWITCH_STATS=1" }, false,
		  SAN_CFG_STATS_PRINT, true },
		{ { "SANSWITCH_STATSX=1" }, false, SAN_CFG_STATS_PRINT, false },
		/* a line in the log is a line: either prints the counts of both images */
		{ { "SANSWITCH_STATS=log" }, false, SAN_CFG_STATS_PRINT, true },
		{ { "SANSWITCH_STATS=1" }, false, SAN_CFG_STATS_LOG, true },
		{ { NULL }, false, SAN_CFG_STATS_LOG, false },
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(san_stats_exec_hands_over((char *const *)t[i].env, t[i].by_env,
							t[i].ours) == t[i].want,
			      "case %zu: want %d", i, t[i].want);
	ck_assert(san_stats_exec_hands_over(NULL, false, SAN_CFG_STATS_LIVE));
	ck_assert(!san_stats_exec_hands_over(NULL, true, SAN_CFG_STATS_LIVE));
}
END_TEST

/* Only a file flagged for an exec, of this process (pid, start time), not exited, is taken. */
START_TEST(test_file_adopt)
{
	struct san_stats_file *f, *g;
	pid_t me = getpid();

	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ENOENT);
	ck_assert_int_eq(san_stats_file_create(dir, me, &f), 0);
	f->counters[SAN_STAT_ACCEPTS] = 7;
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE); /* not flagged */
	f->hdr.flags = SAN_STATS_F_EXEC | SAN_STATS_F_EXITED;
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE);
	f->hdr.flags = SAN_STATS_F_EXEC;
	f->hdr.start_ticks++; /* a dead process that had our pid */
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE);
	f->hdr.start_ticks--;
	f->hdr.pidns++;
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE);
	f->hdr.pidns--;
	f->hdr.nr_counters--;
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE);
	f->hdr.nr_counters++;
	memset(f->hdr.comm, 0, sizeof(f->hdr.comm));
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), 0);
	ck_assert_uint_eq(g->counters[SAN_STAT_ACCEPTS], 7);
	ck_assert_uint_eq(f->hdr.flags, 0); /* the same file: the flag is cleared */
	ck_assert_str_ne(f->hdr.comm, "");  /* and the name is the program's now */
	san_stats_file_unmap(g);
	ck_assert_int_eq(san_stats_file_adopt(dir, me, &g), -ESTALE);
	san_stats_file_unmap(f);
	unlink(path_of(me));
	ck_assert_int_eq(symlink("/dev/null", path_of(me)), 0);
	ck_assert_int_lt(san_stats_file_adopt(dir, me, &g), 0);
	unlink(path_of(me));
}
END_TEST

Suite *make_stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");

	tcase_add_checked_fixture(tc, stats_setup, stats_teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_reason_table);
	tcase_add_test(tc, test_stat_names);
	tcase_add_loop_test(tc, test_tcp_payload, 0, sizeof(pay) / sizeof(pay[0]));
	tcase_add_test(tc, test_procstat);
	tcase_add_test(tc, test_file_round_trip);
	tcase_add_test(tc, test_file_read_rejects);
	tcase_add_test(tc, test_file_read_bad_slots);
	tcase_add_test(tc, test_file_leftover_and_symlink);
	tcase_add_test(tc, test_gc);
	tcase_add_test(tc, test_aggregation);
	tcase_add_test(tc, test_off_counts_nothing);
	tcase_add_test(tc, test_conn_end_real);
	tcase_add_test(tc, test_fd_close_dup);
	tcase_add_test(tc, test_exit_line);
	tcase_add_test(tc, test_exit_line_to_log);
	tcase_add_test(tc, test_exit_live_no_line);
	tcase_add_test(tc, test_format_line);
	tcase_add_test(tc, test_fork_child_own_counters);
	tcase_add_test(tc, test_before_exec);
	tcase_add_test(tc, test_exec_hand_over);
	tcase_add_test(tc, test_exec_prints_now);
	tcase_add_test(tc, test_quiet_without_tcp);
	tcase_add_test(tc, test_exec_hands_over_rule);
	tcase_add_test(tc, test_file_adopt);
	suite_add_tcase(s, tc);
	return s;
}
