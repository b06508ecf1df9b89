/* sanverbs: exercise core/san_verbs.c — seeded messages through the verbs transport, checked. */

/*
 *   sanverbs server ADDR PORT
 *   sanverbs client ADDR PORT COUNT MAXSIZE SEED
 *   sanverbs rdma-client ADDR PORT ROUNDS SIZE SEED
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
 */

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/san_log.h"
#include "core/san_verbs.h"

#define STALL_MS 20000 /* no progress for this long: fail rather than hang */
#define MAGIC_REQ "SANVRB1"
#define MAGIC_REP "SANVOK1"

struct req {
	char magic[8];
	uint64_t count, maxsize, seed; /* little endian */
	uint64_t mode;		       /* 0: messages, 1: rdma */
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

/* Sleep until the completion channel (or the CM channel) has something; fail when stalled. */
static void wait_events(struct san_verbs_conn *c, const char *doing)
{
	struct pollfd pfd[2] = {
		{ .fd = san_verbs_fd(c), .events = POLLIN },
		{ .fd = san_verbs_cm_fd(c), .events = POLLIN },
	};
	int n;

	do
		n = poll(pfd, 2, STALL_MS);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die(1, "poll: %s", strerror(errno));
	if (n == 0)
		die(1, "stalled for %d ms while %s", STALL_MS, doing);
	if (pfd[0].revents)
		san_verbs_ack(c);
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

struct srv {
	uint64_t rng, count, maxsize, got, bytes, hash;
	uint8_t *want;
	const char *err;
	char errbuf[160];
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
	return 0;
}

static int run_server(const char *addr, uint16_t port)
{
	struct san_verbs_listener *l;
	struct san_verbs_conn *c;
	struct san_verbs_info in;
	struct srv s = { .hash = FNV_INIT };
	struct req rq;
	struct rep rp = { .magic = MAGIC_REP, .max_msg = htole32(4096 + 16) };
	struct sum sm;
	size_t rqlen = sizeof(rq);
	double t0;
	int rc;

	rc = san_verbs_listen(addr, port, NULL, &l);
	if (rc < 0)
		die(1, "listen on %s:%u: %s", addr, port, strerror(-rc));
	fprintf(stderr, "sanverbs: listening on %s:%u\n", addr, port);
	memset(&rq, 0, sizeof(rq));
	rc = san_verbs_accept_next(l, 60000, &c, &rq, &rqlen, &rp, sizeof(rp));
	if (rc < 0)
		die(1, "accept: %s", strerror(-rc));
	san_verbs_listener_close(l);
	if (rqlen < sizeof(rq) || memcmp(rq.magic, MAGIC_REQ, 8) != 0)
		die(1, "the client's private data is not a sanverbs request (%zu bytes)", rqlen);
	if (le64toh(rq.mode) == 1) {
		rdma_server(c, le64toh(rq.count), le64toh(rq.maxsize), le64toh(rq.seed));
		return 0;
	}
	s.count = le64toh(rq.count);
	s.maxsize = le64toh(rq.maxsize);
	s.rng = le64toh(rq.seed);
	if (s.maxsize == 0 || s.maxsize > 4096 + 16)
		die(1, "the client asks for MAXSIZE %" PRIu64, s.maxsize);
	s.want = malloc(s.maxsize + 8);
	if (!s.want)
		die(1, "out of memory");

	t0 = now_s();
	while (s.got < s.count) {
		rc = san_verbs_poll(c, srv_cb, &s);
		if (s.err)
			die(1, "%s", s.err);
		if (rc < 0)
			die(1, "after %" PRIu64 " of %" PRIu64 " messages: %s", s.got, s.count,
			    strerror(-rc));
		if (rc > 0 || s.got == s.count)
			continue;
		rc = san_verbs_arm(c);
		if (rc < 0)
			die(1, "arm: %s", strerror(-rc));
		if (rc == 0)
			wait_events(c, "receiving");
	}
	double secs = now_s() - t0;

	sm.hash = htole64(s.hash);
	sm.bytes = htole64(s.bytes);
	sm.msgs = htole64(s.got);
	for (;;) {
		rc = san_verbs_send(c, &sm, sizeof(sm));
		if (rc == 0)
			break;
		if (rc != -EAGAIN)
			die(1, "sending the checksum: %s", strerror(-rc));
		rc = san_verbs_poll(c, srv_cb, &s);
		if (s.err)
			die(1, "%s", s.err);
		if (rc < 0)
			die(1, "waiting to send the checksum: %s", strerror(-rc));
		if (rc == 0 && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for a credit for the checksum");
	}
	/* Stay until every send has completed: the checksum has been received then. */
	for (;;) {
		san_verbs_get_info(c, &in);
		if (in.sends_busy == 0)
			break;
		rc = san_verbs_poll(c, srv_cb, &s);
		if (s.err)
			die(1, "%s", s.err);
		if (rc < 0)
			die(1, "waiting for the checksum's completion: %s", strerror(-rc));
		if (rc == 0 && san_verbs_arm(c) == 0)
			wait_events(c, "waiting for the checksum's completion");
	}
	print_stats("server", c, secs, s.bytes);
	san_verbs_close(c);
	free(s.want);
	printf("sanverbs: ok messages=%" PRIu64 " bytes=%" PRIu64 "\n", s.got, s.bytes);
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

static int run_client(const char *addr, uint16_t port, uint64_t count, uint64_t maxsize,
		      uint64_t seed)
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
	for (;;) {
		san_verbs_get_info(c, &in);
		if (in.sends_busy == 0)
			break;
		pump(c, NULL, NULL, "waiting for the done message's completion");
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
	while (!m.got)
		pump(c, small_cb, &m, "waiting for the server's reads and writes");
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
	if (argc == 4 && strcmp(argv[1], "server") == 0)
		return run_server(argv[2], (uint16_t)parse_u64(argv[3], "PORT"));
	if (argc == 7 && strcmp(argv[1], "client") == 0)
		return run_client(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				  parse_u64(argv[4], "COUNT"), parse_u64(argv[5], "MAXSIZE"),
				  parse_u64(argv[6], "SEED"));
	if (argc == 7 && strcmp(argv[1], "rdma-client") == 0)
		return run_rdma_client(argv[2], (uint16_t)parse_u64(argv[3], "PORT"),
				       parse_u64(argv[4], "ROUNDS"), parse_u64(argv[5], "SIZE"),
				       parse_u64(argv[6], "SEED"));
	fprintf(stderr, "usage: sanverbs server ADDR PORT\n"
			"       sanverbs client ADDR PORT COUNT MAXSIZE SEED\n"
			"       sanverbs rdma-client ADDR PORT ROUNDS SIZE SEED\n");
	return 1;
}
