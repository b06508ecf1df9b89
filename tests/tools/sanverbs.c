/* sanverbs: exercise core/san_verbs.c — seeded messages through the verbs transport, checked. */

/*
 *   sanverbs server ADDR PORT [NCONN [MEMLOCK_KB]]
 *   sanverbs client ADDR PORT COUNT MAXSIZE SEED [HOLD]
 *   sanverbs rdma-client ADDR PORT ROUNDS SIZE SEED
 *   sanverbs memlock-client ADDR PORT KB COUNT MAXSIZE SEED
 *
 * The client announces COUNT, MAXSIZE and SEED in the connect's private data, then sends COUNT
 * messages of pseudo-random sizes 1..MAXSIZE filled with pseudo-random bytes, both drawn from one
 * generator seeded with SEED. When it has no credit (or no send slot) it sleeps in poll() on the
 * completion channel's fd. The server regenerates the same sequence and checks every message's
 * size and every byte; after the last one it sends back {checksum, bytes, messages}, which the
 * client compares with its own. Each side prints `sanverbs: ok messages=N bytes=B` on stdout and
 * exits 0, or prints what failed on stderr and exits 1. A client whose connect is refused (nobody
 * listens on that port) prints so and exits 2. The server says `sanverbs: listening` on stderr
 * once it is ready.
 *
 * rdma-client: the client registers 2 x SIZE bytes, fills the first half with seeded bytes and
 * sends {addr, rkey, SIZE}; the server RDMA-READs the first half ROUNDS times (in chunks, several
 * outstanding, its buffer cleared before each round) and checks every byte, then RDMA-WRITEs
 * the bytes XOR 0x5a into the second half and sends {rounds, bytes read, bytes written}; the
 * client checks the second half. Both print `sanverbs: ok rdma rounds=N read=B written=W`.
 *
 * Several clients (NCONN, default 1): the server accepts NCONN connections, one after another
 * from one listener, and serves each in its own thread while it accepts the next; each prints
 * its own ok line, and the server says `sanverbs: server connections=N max_active=M` on stderr
 * at the end (M: most connections being served at once).
 *
 * HOLD (default 0): the server keeps the slot of every message it receives (san_verbs_hold),
 * holding up to HOLD of them, and releases them in reverse order, all at once, when HOLD are
 * held (from inside the message callback, the message just delivered included: HOLD 1 releases
 * each message in its own callback) or when nothing arrived for HOLD_MS (the client is out of
 * credits: it sleeps on the completion channel until the released slots come back as credits).
 * Every message is checked when it arrives and once more, byte for byte, when it is released (the
 * peer must not have written into a held slot). The server also checks that bad handles are refused
 * (-EINVAL, -EALREADY) and reports `holds= releases= max_held= batches=` on stderr.
 *
 * MEMLOCK_KB (server): the first connection is accepted with the soft RLIMIT_MEMLOCK lowered to
 * MEMLOCK_KB KiB; the server expects the accept to fail (-ENOMEM/-EPERM) and checks that open
 * fds and pinned memory (VmPin) are as before, prints `sanverbs: memlock accept failed: ...`,
 * restores the limit and then accepts its NCONN connections normally. If the accept succeeds it
 * says `sanverbs: memlock not enforced` and serves that connection as one of the NCONN.
 *
 * memlock-client: lowers its soft RLIMIT_MEMLOCK to KB KiB, connects (expected to fail with
 * -ENOMEM/-EPERM, nothing left behind: fds and VmPin as before), restores the limit, connects
 * and runs a normal client stream, then lowers the limit again and registers 1 MiB with
 * san_verbs_reg (expected to fail the same way, the connection still usable), and prints
 * `sanverbs: memlock ...` lines on stderr. It says `sanverbs: memlock not enforced` (exit 3)
 * when the limited connect succeeds.
 */

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/san_log.h"
#include "core/san_verbs.h"

#define STALL_MS 20000 /* no progress for this long: fail rather than hang */
#define HOLD_MS 20     /* HOLD mode: release what is held after this long without a message */
#define HOLD_SLOTS 64  /* HOLD mode: entries kept (the server's pool, N, is the real bound) */
#define MAGIC_REQ "SANVRB1"
#define MAGIC_REP "SANVOK1"

struct req {
	char magic[8];
	uint64_t count, maxsize, seed; /* little endian */
	uint64_t mode;		       /* 0: messages, 1: rdma */
	uint64_t hold;		       /* messages: the server holds up to this many */
};

struct region_msg {
	uint64_t addr, len; /* little endian */
	uint32_t rkey, pad;
};

struct rdma_done {
	uint64_t rounds, read, written; /* little endian */
};

#define RDMA_CHUNK (64 * 1024)
#define XOR_BYTE 0x5a

struct rep {
	char magic[8];
	uint32_t max_msg; /* little endian */
};

struct sum {
	uint64_t hash, bytes, msgs; /* little endian */
};

static __attribute__((noreturn, format(printf, 2, 3))) void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("sanverbs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64: one generator for sizes and bytes, so the stream depends only on the seed. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The next message: its size and bytes. */
static size_t gen_msg(uint64_t *s, uint64_t maxsize, uint8_t *buf)
{
	size_t n = (size_t)(rng_next(s) % maxsize) + 1;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t r = rng_next(s);
		size_t k = n - i < 8 ? n - i : 8;

		memcpy(buf + i, &r, k);
	}
	return n;
}

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV_INIT 0xcbf29ce484222325ULL

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		die(1, "bad %s '%s'", what, s);
	return v;
}

/* Sleep until the completion channel (or the CM channel) has something, at most @ms: 1, or 0
 * when the time ran out. */
static int wait_events_ms(struct san_verbs_conn *c, int ms)
{
	struct pollfd pfd[2] = {
		{ .fd = san_verbs_fd(c), .events = POLLIN },
		{ .fd = san_verbs_cm_fd(c), .events = POLLIN },
	};
	int n;

	do
		n = poll(pfd, 2, ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die(1, "poll: %s", strerror(errno));
	if (n == 0)
		return 0;
	if (pfd[0].revents)
		san_verbs_ack(c);
	return 1;
}

/* Sleep until something happens; fail when stalled. */
static void wait_events(struct san_verbs_conn *c, const char *doing)
{
	if (!wait_events_ms(c, STALL_MS))
		die(1, "stalled for %d ms while %s", STALL_MS, doing);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* VmPin of /proc/self/status, KiB (pinned pages: registered memory), or -1. */
static long vm_pin_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Set the soft RLIMIT_MEMLOCK to @bytes (the hard one stays); the old limits in *old. */
static void memlock_set(rlim_t bytes, struct rlimit *old)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		die(1, "getrlimit: %s", strerror(errno));
	if (old)
		*old = rl;
	rl.rlim_cur = bytes;
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		die(1, "setrlimit(RLIMIT_MEMLOCK, %llu): %s", (unsigned long long)bytes,
		    strerror(errno));
}

static void print_stats(const char *who, struct san_verbs_conn *c, double secs, uint64_t bytes)
{
	struct san_verbs_info in;

	san_verbs_get_info(c, &in);
	fprintf(stderr,
		"sanverbs: %s dev=%s secs=%.3f MB/s=%.1f tx=%" PRIu64 " rx=%" PRIu64
		" updates_tx=%" PRIu64 " updates_rx=%" PRIu64 " inline_tx=%" PRIu64
		" credit_waits=%" PRIu64 " max_inline=%u\n",
		who, in.dev, secs, secs > 0 ? bytes / secs / 1e6 : 0.0, in.msgs_tx, in.msgs_rx,
		in.updates_tx, in.updates_rx, in.inline_tx, in.credit_waits, in.max_inline);
}

/* ---------------------------------------------------------------- server */

static void rdma_server(struct san_verbs_conn *c, uint64_t rounds, uint64_t size, uint64_t seed);

struct held {
	int64_t h;
	const uint8_t *msg;
	size_t len;
	uint8_t *want; /* what it must still hold when released */
};

struct srv;
static void release_all(struct srv *s);

struct srv {
	struct san_verbs_conn *c;
	uint64_t rng, count, maxsize, got, bytes, hash;
	uint8_t *want;
	const char *err;
	char errbuf[160];
	/* HOLD mode */
	uint64_t hold;
	struct held held[HOLD_SLOTS];
	uint32_t nheld, max_held;
	uint64_t batches, holds, releases;
	bool checked_bad;
};

static int srv_cb(void *arg, const void *msg, size_t len)
{
	struct srv *s = arg;
	size_t n;

	if (s->got == s->count) {
		s->err = "a message after the last one";
		return -1;
	}
	n = gen_msg(&s->rng, s->maxsize, s->want);
	if (n != len) {
		snprintf(s->errbuf, sizeof(s->errbuf),
			 "message %" PRIu64 ": %zu bytes, expected %zu", s->got, len, n);
		s->err = s->errbuf;
		return -1;
	}
	if (memcmp(msg, s->want, n) != 0) {
		size_t i = 0;

		while (((const uint8_t *)msg)[i] == s->want[i])
			i++;
		snprintf(s->errbuf, sizeof(s->errbuf),
			 "message %" PRIu64 " (%zu bytes): byte %zu is 0x%02x, expected 0x%02x",
			 s->got, len, i, ((const uint8_t *)msg)[i], s->want[i]);
		s->err = s->errbuf;
		return -1;
	}
	s->hash = fnv1a(s->hash, msg, len);
	s->bytes += len;
	s->got++;
	if (s->hold && s->nheld < HOLD_SLOTS) {
		struct held *e = &s->held[s->nheld];
		int h = san_verbs_hold(s->c);

		if (h < 0 || san_verbs_hold(s->c) != h) {
			snprintf(s->errbuf, sizeof(s->errbuf), "san_verbs_hold: %d", h);
			s->err = s->errbuf;
			return -1;
		}
		e->h = h;
		e->msg = msg;
		e->len = len;
		memcpy(e->want, s->want, len);
		s->nheld++;
		s->holds++;
		if (s->nheld > s->max_held)
			s->max_held = s->nheld;
		if (s->nheld >= s->hold)
			release_all(s); /* from inside the callback, this message included */
	}
	return 0;
}

/* HOLD mode: release everything held, newest first, checking that the bytes are intact. */
static void release_all(struct srv *s)
{
	if (!s->nheld)
		return;
	for (uint32_t i = s->nheld; i-- > 0;) {
		struct held *e = &s->held[i];
		int rc;

		if (memcmp(e->msg, e->want, e->len) != 0)
			die(1,
			    "a held message (slot %" PRId64 ", %zu bytes) changed before release",
			    e->h, e->len);
		rc = san_verbs_release(s->c, e->h);
		if (rc < 0)
			die(1, "san_verbs_release(%" PRId64 "): %s", e->h, strerror(-rc));
		s->releases++;
		if (!s->checked_bad) {
			/* Bad handles are refused, never followed. */
			int a = san_verbs_release(s->c, e->h), b = san_verbs_release(s->c, -1),
			    d = san_verbs_release(s->c, 1 << 20);

			if (a != -EALREADY || b != -EINVAL || d != -EINVAL)
				die(1,
				    "bad handles: release twice %d, release(-1) %d, release(2^20) "
				    "%d",
				    a, b, d);
			s->checked_bad = true;
		}
	}
	s->nheld = 0;
	s->batches++;
}

static void *serve_msgs(struct san_verbs_conn *c, const struct req *rq)
{
	struct san_verbs_info in;
	struct srv *s = calloc(1, sizeof(*s));
	struct sum sm;
	double t0;
	int rc;

	if (!s)
		die(1, "out of memory");
	s->c = c;
	s->hash = FNV_INIT;
	s->count = le64toh(rq->count);
	s->maxsize = le64toh(rq->maxsize);
	s->rng = le64toh(rq->seed);
	s->hold = le64toh(rq->hold);
	if (s->maxsize == 0 || s->maxsize > 4096 + 16)
		die(1, "the client asks for MAXSIZE %" PRIu64, s->maxsize);
	s->want = malloc(s->maxsize + 8);
	if (!s->want)
		die(1, "out of memory");
	if (s->hold)
		for (int i = 0; i < HOLD_SLOTS; i++)
			if (!(s->held[i].want = malloc(s->maxsize)))
				die(1, "out of memory");

	t0 = now_s();
	while (s->got < s->count) {
		rc = san_verbs_poll(c, srv_cb, s);
		if (s->err)
			die(1, "%s", s->err);
		if (rc < 0)
			die(1, "after %" PRIu64 " of %" PRIu64 " messages: %s", s->got, s->count,
			    strerror(-rc));
		if (s->hold && (s->nheld >= s->hold || s->nheld == HOLD_SLOTS))
			release_all(s);
		if (rc > 0 || s->got == s->count)
			continue;
		rc = san_verbs_arm(c);
		if (rc < 0)
			die(1, "arm: %s", strerror(-rc));
		if (rc > 0)
			continue;
		if (!s->nheld)
			wait_events(c, "receiving");
		else if (!wait_events_ms(c, HOLD_MS))
			release_all(s); /* quiet for HOLD_MS: the client must be out of credits */
	}
	release_all(s);
	if (s->hold && (rc = san_verbs_hold(c)) != -EINVAL)
		die(1, "san_verbs_hold outside a callback: %d, expected -EINVAL", rc);
	double secs = now_s() - t0;

	sm.hash = htole64(s->hash);
	sm.bytes = htole64(s->bytes);
	sm.msgs = htole64(s->got);
	for (;;) {
		rc = san_verbs_send(c, &sm, sizeof(sm));
		if (rc == 0)
			break;
		if (rc != -EAGAIN)
			die(1, "sending the checksum: %s", strerror(-rc));
		rc = san_verbs_poll(c, srv_cb, s);
		if (s->err)
			die(1, "%s", s->err);
		if (rc < 0)
			die(1, "waiting to send the checksum: %s", strerror(-rc));
		if (rc == 0 && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for a credit for the checksum");
	}
	/* Stay until every send has completed: the checksum has been received then. The client
	 * closes once it has it, and its disconnect may overtake our send completion (which is
	 * then flushed): a reset here is the client being done, its own exit tells the rest. */
	for (;;) {
		san_verbs_get_info(c, &in);
		if (in.sends_busy == 0)
			break;
		rc = san_verbs_poll(c, srv_cb, s);
		if (s->err)
			die(1, "%s", s->err);
		if (rc == -ECONNRESET)
			break;
		if (rc < 0)
			die(1, "waiting for the checksum's completion: %s", strerror(-rc));
		if (rc == 0 && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for the checksum's completion");
	}
	print_stats("server", c, secs, s->bytes);
	if (s->hold) {
		san_verbs_get_info(c, &in);
		if (in.holds != s->holds || in.releases != s->releases || in.rx_held != 0)
			die(1,
			    "the transport counts holds=%" PRIu64 " releases=%" PRIu64
			    " held=%u, the server %" PRIu64 " %" PRIu64 " 0",
			    in.holds, in.releases, in.rx_held, s->holds, s->releases);
		fprintf(stderr,
			"sanverbs: server hold=%" PRIu64 " holds=%" PRIu64 " releases=%" PRIu64
			" max_held=%u batches=%" PRIu64 " bad-handles=refused\n",
			s->hold, s->holds, s->releases, s->max_held, s->batches);
		for (int i = 0; i < HOLD_SLOTS; i++)
			free(s->held[i].want);
	}
	san_verbs_close(c);
	printf("sanverbs: ok messages=%" PRIu64 " bytes=%" PRIu64 "\n", s->got, s->bytes);
	free(s->want);
	free(s);
	return NULL;
}

struct job {
	pthread_t th;
	struct san_verbs_conn *c;
	struct req rq;
};

static int active, max_active;
static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;

static void *job_main(void *arg)
{
	struct job *j = arg;

	pthread_mutex_lock(&active_mu);
	if (++active > max_active)
		max_active = active;
	pthread_mutex_unlock(&active_mu);
	if (le64toh(j->rq.mode) == 1)
		rdma_server(j->c, le64toh(j->rq.count), le64toh(j->rq.maxsize),
			    le64toh(j->rq.seed));
	else
		serve_msgs(j->c, &j->rq);
	pthread_mutex_lock(&active_mu);
	active--;
	pthread_mutex_unlock(&active_mu);
	return NULL;
}

/* Accept one connection: 0 and *j filled, or the accept's -errno. */
static int accept_one(struct san_verbs_listener *l, struct job *j)
{
	struct rep rp = { .magic = MAGIC_REP, .max_msg = htole32(4096 + 16) };
	size_t rqlen = sizeof(j->rq);
	int rc;

	memset(&j->rq, 0, sizeof(j->rq));
	rc = san_verbs_accept_next(l, 60000, &j->c, &j->rq, &rqlen, &rp, sizeof(rp));
	if (rc < 0)
		return rc;
	if (rqlen < sizeof(j->rq) || memcmp(j->rq.magic, MAGIC_REQ, 8) != 0)
		die(1, "the client's private data is not a sanverbs request (%zu bytes)", rqlen);
	return 0;
}

static int run_server(const char *addr, uint16_t port, uint64_t nconn, uint64_t memlock_kb)
{
	struct san_verbs_listener *l;
	struct job *jobs;
	uint64_t n = 0;
	int rc;

	if (nconn == 0 || nconn > 256)
		die(1, "NCONN must be 1..256");
	jobs = calloc(nconn, sizeof(*jobs));
	if (!jobs)
		die(1, "out of memory");
	rc = san_verbs_listen(addr, port, NULL, &l);
	if (rc < 0)
		die(1, "listen on %s:%u: %s", addr, port, strerror(-rc));
	fprintf(stderr, "sanverbs: listening on %s:%u\n", addr, port);
	if (memlock_kb) {
		struct rlimit old;
		int fds0 = count_fds();
		long pin0 = vm_pin_kb();

		memlock_set((rlim_t)memlock_kb * 1024, &old);
		rc = accept_one(l, &jobs[0]);
		if (setrlimit(RLIMIT_MEMLOCK, &old) < 0)
			die(1, "restoring RLIMIT_MEMLOCK: %s", strerror(errno));
		if (rc == 0) {
			fprintf(stderr,
				"sanverbs: memlock not enforced: accept with RLIMIT_MEMLOCK "
				"%" PRIu64 " KiB succeeded (VmPin %ld KiB)\n",
				memlock_kb, vm_pin_kb());
			n = 1;
		} else {
			int fds1 = count_fds();
			long pin1 = vm_pin_kb();

			if (rc != -ENOMEM && rc != -EPERM)
				die(1,
				    "accept with RLIMIT_MEMLOCK %" PRIu64 " KiB: %s (expected "
				    "ENOMEM or EPERM)",
				    memlock_kb, strerror(-rc));
			if (fds1 != fds0 || pin1 != pin0)
				die(1, "the failed accept left fds %d -> %d, VmPin %ld -> %ld KiB",
				    fds0, fds1, pin0, pin1);
			fprintf(stderr,
				"sanverbs: memlock accept failed: %s (%d), RLIMIT_MEMLOCK %" PRIu64
				" KiB; fds %d -> %d, VmPin %ld -> %ld KiB\n",
				strerror(-rc), rc, memlock_kb, fds0, fds1, pin0, pin1);
		}
	}
	for (; n <= nconn; n++) {
		/* Start the previous one, then accept the next while it runs. */
		if (n > 0 && pthread_create(&jobs[n - 1].th, NULL, job_main, &jobs[n - 1]) != 0)
			die(1, "pthread_create failed");
		if (n == nconn)
			break;
		rc = accept_one(l, &jobs[n]);
		if (rc < 0)
			die(1, "accept %" PRIu64 " of %" PRIu64 ": %s", n + 1, nconn,
			    strerror(-rc));
	}
	for (uint64_t i = 0; i < nconn; i++)
		pthread_join(jobs[i].th, NULL);
	san_verbs_listener_close(l);
	if (nconn > 1)
		fprintf(stderr, "sanverbs: server connections=%" PRIu64 " max_active=%d\n", nconn,
			max_active);
	free(jobs);
	return 0;
}

/* ---------------------------------------------------------------- client */

struct cli {
	bool got_sum;
	struct sum sum;
	const char *err;
};

static int cli_cb(void *arg, const void *msg, size_t len)
{
	struct cli *k = arg;

	if (k->got_sum || len != sizeof(k->sum)) {
		k->err = "unexpected message from the server";
		return -1;
	}
	memcpy(&k->sum, msg, sizeof(k->sum));
	k->got_sum = true;
	return 0;
}

/*
 * memlock-client, before the real connect: a connect under a low limit must fail cleanly. Twice:
 * librdmacm opens the devices (and keeps them open) at its first use, so the fds are compared
 * around the second attempt; VmPin around both.
 */
static int memlock_connect(const char *addr, uint16_t port, uint64_t kb, const struct req *rq)
{
	struct san_verbs_conn *c = NULL;
	struct rlimit old;
	struct rep rp;
	size_t rplen = sizeof(rp);
	int fds_start = count_fds(), fds0 = -1, fds1, rc;
	long pin0 = vm_pin_kb(), pin1;

	memlock_set((rlim_t)kb * 1024, &old);
	for (int i = 0; i < 2; i++) {
		fds0 = count_fds();
		rc = san_verbs_connect(addr, port, NULL, rq, sizeof(*rq), 5000, &c, &rp, &rplen);
		if (rc == 0 || (rc != -ENOMEM && rc != -EPERM))
			break;
	}
	if (setrlimit(RLIMIT_MEMLOCK, &old) < 0)
		die(1, "restoring RLIMIT_MEMLOCK: %s", strerror(errno));
	if (rc == 0) {
		fprintf(stderr,
			"sanverbs: memlock not enforced: connect with RLIMIT_MEMLOCK %" PRIu64
			" KiB succeeded (VmPin %ld KiB)\n",
			kb, vm_pin_kb());
		san_verbs_close(c);
		return 3;
	}
	fds1 = count_fds();
	pin1 = vm_pin_kb();
	if (rc != -ENOMEM && rc != -EPERM)
		die(1, "connect with RLIMIT_MEMLOCK %" PRIu64 " KiB: %s (expected ENOMEM or EPERM)",
		    kb, strerror(-rc));
	if (c || fds1 != fds0 || pin1 != pin0)
		die(1, "the failed connect left fds %d -> %d, VmPin %ld -> %ld KiB", fds0, fds1,
		    pin0, pin1);
	fprintf(stderr,
		"sanverbs: memlock connect failed twice: %s (%d), RLIMIT_MEMLOCK %" PRIu64
		" KiB; fds %d (before librdmacm's first use) -> %d -> %d, VmPin %ld -> %ld KiB\n",
		strerror(-rc), rc, kb, fds_start, fds0, fds1, pin0, pin1);
	return 0;
}

/* memlock-client, on the live connection: registering more than the limit fails cleanly. */
static void memlock_reg(struct san_verbs_conn *c, uint64_t kb)
{
	struct san_verbs_region r;
	struct rlimit old;
	size_t len = 1 << 20;
	uint8_t *buf = aligned_alloc(4096, len);
	long pin0 = vm_pin_kb(), pin1;
	int rc;

	if (!buf)
		die(1, "out of memory");
	memset(buf, 1, len);
	memlock_set((rlim_t)kb * 1024, &old);
	rc = san_verbs_reg(c, buf, len, SAN_VERBS_REMOTE_READ, &r);
	if (setrlimit(RLIMIT_MEMLOCK, &old) < 0)
		die(1, "restoring RLIMIT_MEMLOCK: %s", strerror(errno));
	pin1 = vm_pin_kb();
	if (rc == 0) {
		fprintf(stderr,
			"sanverbs: memlock not enforced: san_verbs_reg of %zu bytes under "
			"%" PRIu64 " KiB succeeded\n",
			len, kb);
		san_verbs_dereg(&r);
	} else {
		if (rc != -ENOMEM && rc != -EPERM)
			die(1, "san_verbs_reg under RLIMIT_MEMLOCK %" PRIu64 " KiB: %s", kb,
			    strerror(-rc));
		if (r.mr || pin1 != pin0)
			die(1, "the failed san_verbs_reg left VmPin %ld -> %ld KiB", pin0, pin1);
		fprintf(stderr,
			"sanverbs: memlock reg failed: %zu bytes under %" PRIu64
			" KiB: %s (%d); VmPin %ld -> %ld KiB\n",
			len, kb, strerror(-rc), rc, pin0, pin1);
	}
	/* With the limit back, the same registration works. */
	rc = san_verbs_reg(c, buf, len, SAN_VERBS_REMOTE_READ, &r);
	if (rc < 0)
		die(1, "san_verbs_reg with the limit restored: %s", strerror(-rc));
	san_verbs_dereg(&r);
	free(buf);
}

static int run_client(const char *addr, uint16_t port, uint64_t count, uint64_t maxsize,
		      uint64_t seed, uint64_t hold, uint64_t memlock_kb)
{
	struct san_verbs_conn *c;
	struct req rq = { .magic = MAGIC_REQ };
	struct rep rp;
	struct cli k = { 0 };
	size_t rplen = sizeof(rp), len = 0;
	uint64_t rng = seed, sent = 0, bytes = 0, hash = FNV_INIT;
	bool have = false;
	uint8_t *buf;
	double t0;
	int rc;

	if (maxsize == 0 || maxsize > 4096 + 16)
		die(1, "MAXSIZE must be 1..%d", 4096 + 16);
	rq.count = htole64(count);
	rq.maxsize = htole64(maxsize);
	rq.seed = htole64(seed);
	rq.hold = htole64(hold);
	if (memlock_kb) {
		rc = memlock_connect(addr, port, memlock_kb, &rq);
		if (rc)
			return rc;
	}
	memset(&rp, 0, sizeof(rp));
	t0 = now_s();
	rc = san_verbs_connect(addr, port, NULL, &rq, sizeof(rq), 5000, &c, &rp, &rplen);
	if (rc == -ECONNREFUSED) {
		fprintf(stderr, "sanverbs: connect %s:%u: %s (ECONNREFUSED) after %.0f ms\n", addr,
			port, strerror(-rc), (now_s() - t0) * 1e3);
		return 2;
	}
	if (rc < 0)
		die(1, "connect %s:%u: %s", addr, port, strerror(-rc));
	if (rplen < sizeof(rp) || memcmp(rp.magic, MAGIC_REP, 8) != 0)
		die(1, "the server's accept carries no sanverbs reply (%zu bytes)", rplen);
	buf = malloc(maxsize + 8);
	if (!buf)
		die(1, "out of memory");

	t0 = now_s();
	while (!k.got_sum) {
		rc = san_verbs_poll(c, cli_cb, &k);
		if (k.err)
			die(1, "%s", k.err);
		if (rc < 0 && k.got_sum && sent == count)
			break; /* the server closed after its checksum (this poll gave it) */
		if (rc < 0)
			die(1, "after %" PRIu64 " of %" PRIu64 " messages: %s", sent, count,
			    strerror(-rc));
		bool progress = rc > 0;

		while (sent < count) {
			if (!have) {
				len = gen_msg(&rng, maxsize, buf);
				have = true;
			}
			rc = san_verbs_send(c, buf, len);
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				die(1, "send of message %" PRIu64 ": %s", sent, strerror(-rc));
			hash = fnv1a(hash, buf, len);
			bytes += len;
			sent++;
			have = false;
			progress = true;
		}
		if (progress || k.got_sum)
			continue;
		rc = san_verbs_arm(c);
		if (rc < 0)
			die(1, "arm: %s", strerror(-rc));
		if (rc == 0)
			wait_events(c, sent < count ? "waiting for credits"
						    : "waiting for the checksum");
	}
	double secs = now_s() - t0;

	if (le64toh(k.sum.msgs) != count || le64toh(k.sum.bytes) != bytes ||
	    le64toh(k.sum.hash) != hash)
		die(1,
		    "checksum mismatch: server saw %" PRIu64 " messages, %" PRIu64
		    " bytes, hash %016" PRIx64 "; sent %" PRIu64 ", %" PRIu64 ", %016" PRIx64,
		    le64toh(k.sum.msgs), le64toh(k.sum.bytes), le64toh(k.sum.hash), sent, bytes,
		    hash);
	print_stats("client", c, secs, bytes);
	if (memlock_kb)
		memlock_reg(c, memlock_kb);
	san_verbs_close(c);
	free(buf);
	printf("sanverbs: ok messages=%" PRIu64 " bytes=%" PRIu64 "\n", sent, bytes);
	return 0;
}

/* ---------------------------------------------------------------- rdma mode */

static void gen_fill(uint64_t seed, uint8_t *buf, size_t n)
{
	uint64_t s = seed;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t r = rng_next(&s);
		size_t k = n - i < 8 ? n - i : 8;

		memcpy(buf + i, &r, k);
	}
}

/* Poll once; sleep when nothing is pending. Dies on a transport error. */
static void pump(struct san_verbs_conn *c, san_verbs_msg_cb cb, void *arg, const char *doing)
{
	int rc = san_verbs_poll(c, cb, arg);

	if (rc < 0)
		die(1, "%s: %s", doing, strerror(-rc));
	if (rc > 0)
		return;
	rc = san_verbs_arm(c);
	if (rc < 0)
		die(1, "%s: arm: %s", doing, strerror(-rc));
	if (rc == 0)
		wait_events(c, doing);
}

/* Send one small message, waiting for a credit as long as needed. */
static void send_wait(struct san_verbs_conn *c, const void *m, size_t len, san_verbs_msg_cb cb,
		      void *arg, const char *doing)
{
	for (;;) {
		int rc = san_verbs_send(c, m, len);

		if (rc == 0)
			return;
		if (rc != -EAGAIN)
			die(1, "%s: %s", doing, strerror(-rc));
		pump(c, cb, arg, doing);
	}
}

struct small {
	bool got;
	size_t len;
	uint8_t buf[64];
};

static int small_cb(void *arg, const void *msg, size_t len)
{
	struct small *m = arg;

	if (m->got || len > sizeof(m->buf))
		return -1;
	memcpy(m->buf, msg, len);
	m->len = len;
	m->got = true;
	return 0;
}

struct rdma_state {
	uint64_t done, failed;
};

static void rdma_cb(void *arg, uint64_t cookie, int status)
{
	struct rdma_state *st = arg;

	st->done++;
	if (status)
		st->failed++;
}

/* Move [0, len) between @local and the peer's (raddr, rkey) in chunks, nrdma outstanding. */
static void rdma_all(struct san_verbs_conn *c, bool write, const struct san_verbs_region *local,
		     uint64_t raddr, uint32_t rkey, size_t len)
{
	struct rdma_state st = { 0 };
	uint64_t posted = 0;
	size_t off = 0;

	san_verbs_set_rdma_cb(c, rdma_cb, &st);
	while (off < len || st.done < posted) {
		while (off < len) {
			size_t n = len - off < RDMA_CHUNK ? len - off : RDMA_CHUNK;
			int rc =
				write ? san_verbs_write(c, local, off, raddr + off, rkey, n, posted)
				      : san_verbs_read(c, local, off, raddr + off, rkey, n, posted);

			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				die(1, "RDMA %s at %zu: %s", write ? "WRITE" : "READ", off,
				    strerror(-rc));
			off += n;
			posted++;
		}
		if (st.failed)
			die(1, "RDMA %s failed", write ? "WRITE" : "READ");
		if (off < len || st.done < posted)
			pump(c, NULL, NULL, write ? "RDMA writing" : "RDMA reading");
	}
	if (st.failed)
		die(1, "RDMA %s failed", write ? "WRITE" : "READ");
	san_verbs_set_rdma_cb(c, NULL, NULL);
}

static void rdma_server(struct san_verbs_conn *c, uint64_t rounds, uint64_t size, uint64_t seed)
{
	struct small m = { 0 };
	struct region_msg rm;
	struct rdma_done dn;
	struct san_verbs_region loc;
	struct san_verbs_info in;
	uint8_t *buf, *want;
	uint64_t raddr, rlen;
	double t0, secs;
	int rc;

	while (!m.got)
		pump(c, small_cb, &m, "waiting for the client's region");
	if (m.len != sizeof(rm))
		die(1, "the region message has %zu bytes", m.len);
	memcpy(&rm, m.buf, sizeof(rm));
	raddr = le64toh(rm.addr);
	rlen = le64toh(rm.len);
	if (rlen != 2 * size)
		die(1, "the client's region has %" PRIu64 " bytes, expected %" PRIu64, rlen,
		    2 * size);
	buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	want = malloc(size);
	if (!buf || !want)
		die(1, "out of memory");
	gen_fill(seed, want, size);
	rc = san_verbs_reg(c, buf, size, 0, &loc);
	if (rc < 0)
		die(1, "registering %" PRIu64 " bytes: %s", size, strerror(-rc));
	t0 = now_s();
	for (uint64_t r = 0; r < rounds; r++) {
		memset(buf, 0, size);
		rdma_all(c, false, &loc, raddr, le32toh(rm.rkey), size);
		if (memcmp(buf, want, size) != 0) {
			size_t i = 0;

			while (buf[i] == want[i])
				i++;
			die(1, "round %" PRIu64 ": byte %zu read 0x%02x, expected 0x%02x", r, i,
			    buf[i], want[i]);
		}
	}
	secs = now_s() - t0;
	for (size_t i = 0; i < size; i++)
		buf[i] ^= XOR_BYTE;
	rdma_all(c, true, &loc, raddr + size, le32toh(rm.rkey), size);
	dn.rounds = htole64(rounds);
	dn.read = htole64(rounds * size);
	dn.written = htole64(size);
	send_wait(c, &dn, sizeof(dn), NULL, NULL, "sending done");
	for (;;) { /* as in serve_msgs: a reset here is the client done with us */
		san_verbs_get_info(c, &in);
		if (in.sends_busy == 0)
			break;
		rc = san_verbs_poll(c, NULL, NULL);
		if (rc == -ECONNRESET)
			break;
		if (rc < 0)
			die(1, "waiting for the done message's completion: %s", strerror(-rc));
		if (rc == 0 && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for the done message's completion");
	}
	fprintf(stderr, "sanverbs: server rdma read %.1f MB/s rd_atom=%u\n",
		secs > 0 ? rounds * size / secs / 1e6 : 0.0, in.rd_atom);
	san_verbs_dereg(&loc);
	san_verbs_close(c);
	free(buf);
	free(want);
	printf("sanverbs: ok rdma rounds=%" PRIu64 " read=%" PRIu64 " written=%" PRIu64 "\n",
	       rounds, rounds * size, size);
}

static int run_rdma_client(const char *addr, uint16_t port, uint64_t rounds, uint64_t size,
			   uint64_t seed)
{
	struct san_verbs_conn *c;
	struct req rq = { .magic = MAGIC_REQ, .mode = htole64(1) };
	struct rep rp;
	struct small m = { 0 };
	struct region_msg rm;
	struct rdma_done dn;
	struct san_verbs_region reg;
	size_t rplen = sizeof(rp);
	uint8_t *area;
	int rc;

	if (size == 0 || size > (1ULL << 30))
		die(1, "SIZE must be 1..1 GiB");
	rq.count = htole64(rounds);
	rq.maxsize = htole64(size);
	rq.seed = htole64(seed);
	rc = san_verbs_connect(addr, port, NULL, &rq, sizeof(rq), 5000, &c, &rp, &rplen);
	if (rc == -ECONNREFUSED) {
		fprintf(stderr, "sanverbs: connect %s:%u: %s (ECONNREFUSED)\n", addr, port,
			strerror(-rc));
		return 2;
	}
	if (rc < 0)
		die(1, "connect %s:%u: %s", addr, port, strerror(-rc));
	area = aligned_alloc(4096, (2 * size + 4095) & ~(size_t)4095);
	if (!area)
		die(1, "out of memory");
	gen_fill(seed, area, size);
	memset(area + size, 0, size);
	rc = san_verbs_reg(c, area, 2 * size, SAN_VERBS_REMOTE_READ | SAN_VERBS_REMOTE_WRITE, &reg);
	if (rc < 0)
		die(1, "registering %" PRIu64 " bytes: %s", 2 * size, strerror(-rc));
	rm.addr = htole64((uintptr_t)area);
	rm.len = htole64(2 * size);
	rm.rkey = htole32(reg.rkey);
	rm.pad = 0;
	send_wait(c, &rm, sizeof(rm), small_cb, &m, "sending the region");
	while (!m.got) {
		/* The server closes as soon as its done message is sent: the poll that delivers it
		 * may also report the disconnect. */
		int rc2 = san_verbs_poll(c, small_cb, &m);

		if (rc2 < 0 && m.got)
			break;
		if (rc2 < 0)
			die(1, "waiting for the server's reads and writes: %s", strerror(-rc2));
		if (rc2 == 0 && !m.got && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for the server's reads and writes");
	}
	if (m.len != sizeof(dn))
		die(1, "the done message has %zu bytes", m.len);
	memcpy(&dn, m.buf, sizeof(dn));
	for (size_t i = 0; i < size; i++)
		if ((uint8_t)(area[i] ^ XOR_BYTE) != area[size + i])
			die(1, "written byte %zu is 0x%02x, expected 0x%02x", i, area[size + i],
			    (uint8_t)(area[i] ^ XOR_BYTE));
	if (le64toh(dn.rounds) != rounds || le64toh(dn.read) != rounds * size ||
	    le64toh(dn.written) != size)
		die(1, "the server reports other totals");
	san_verbs_close(c);
	san_verbs_dereg(&reg); /* after close: deregistering under a live QP is fine too */
	free(area);
	printf("sanverbs: ok rdma rounds=%" PRIu64 " read=%" PRIu64 " written=%" PRIu64 "\n",
	       rounds, rounds * size, size);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	san_log_init();
	if (argc >= 4 && argc <= 6 && strcmp(argv[1], "server") == 0)
		return run_server(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				  argc > 4 ? parse_u64(argv[4], "NCONN") : 1,
				  argc > 5 ? parse_u64(argv[5], "MEMLOCK_KB") : 0);
	if ((argc == 7 || argc == 8) && strcmp(argv[1], "client") == 0)
		return run_client(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				  parse_u64(argv[4], "COUNT"), parse_u64(argv[5], "MAXSIZE"),
				  parse_u64(argv[6], "SEED"),
				  argc > 7 ? parse_u64(argv[7], "HOLD") : 0, 0);
	if (argc == 8 && strcmp(argv[1], "memlock-client") == 0)
		return run_client(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				  parse_u64(argv[5], "COUNT"), parse_u64(argv[6], "MAXSIZE"),
				  parse_u64(argv[7], "SEED"), 0, parse_u64(argv[4], "KB") ?: 1);
	if (argc == 7 && strcmp(argv[1], "rdma-client") == 0)
		return run_rdma_client(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				       parse_u64(argv[4], "ROUNDS"), parse_u64(argv[5], "SIZE"),
				       parse_u64(argv[6], "SEED"));
	fprintf(stderr, "usage: sanverbs server ADDR PORT [NCONN [MEMLOCK_KB]]\n"
			"       sanverbs client ADDR PORT COUNT MAXSIZE SEED [HOLD]\n"
			"       sanverbs rdma-client ADDR PORT ROUNDS SIZE SEED\n"
			"       sanverbs memlock-client ADDR PORT KB COUNT MAXSIZE SEED\n");
	return 1;
}
