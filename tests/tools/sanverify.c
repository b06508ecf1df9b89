/* sanverify: end-to-end stream verifier: PRNG streams echoed, every byte checked at both ends. */

/*
 * One client connection carries: a 32-byte header, then B bytes of a pseudo-random stream that
 * depends only on the per-connection key in the header.  The server checks every byte as it
 * arrives and echoes it; the client checks every echoed byte.  Write and read sizes come from a
 * separate generator, so the bytes on the wire never depend on how they were chunked.
 *
 * Threading and waiting are chosen on the command line (blocking threads or nonblocking event
 * loops; poll, select, epoll level/edge/oneshot) because the point of the tool is to exercise a
 * socket layer through every pattern a real program uses.
 */

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
/* Evaluates each argument once: callers pass random draws. */
#define MIN(a, b)                                  \
	({                                         \
		__typeof__(a) min_a_ = (a);        \
		__typeof__(b) min_b_ = (b);        \
		min_a_ < min_b_ ? min_a_ : min_b_; \
	})

#define EXIT_MISMATCH 1 /* a byte differed, was missing or was extra */
#define EXIT_SYSERR 2	/* usage or system-call error */
#define EXIT_TIMEOUT 3	/* -t exceeded */
#define EXIT_EXPECT 4	/* verified, but --expect-enobufs saw no ENOBUFS */

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)

/* ---------------------------------------------------------------- options */

enum wait_mode { W_POLL, W_SELECT, W_EPOLL, W_EPOLL_ET, W_EPOLL_ONESHOT };
static const char *const wait_names[] = { "poll", "select", "epoll", "epoll-et", "epoll-oneshot" };

/* Which calls move the bytes: each is an entry point a preload library must cover. */
enum io_kind { IO_SEND, IO_RW, IO_MSG, IO_VEC, IO_MIX };
static const char *const io_names[] = { "send", "rw", "msg", "vec", "mix" };

static struct opts {
	bool server;
	int family;
	const char *addr;
	unsigned port;
	const char *port_file;
	unsigned conns;
	unsigned threads;
	uint64_t bytes; /* stream bytes per connection */
	uint64_t seed;
	size_t min_write, max_write, max_read;
	size_t echo_buf; /* server: per-connection echo ring */
	bool nonblock;
	enum wait_mode wait;
	enum io_kind io;
	bool dup;
	bool half_close;
	uint64_t conns_total;
	unsigned timeout; /* seconds, 0 = none */
	bool quiet;
	bool corrupt; /* --corrupt: flip one byte to prove detection */
	uint64_t corrupt_at;
	bool expect_enobufs; /* --expect-enobufs: fail unless some send failed ENOBUFS */
} opt = {
	.family = AF_INET,
	.conns = 1,
	.threads = 1,
	.bytes = 16 * MiB,
	.seed = 1,
	.min_write = 1,
	.max_write = 4 * MiB,
	.echo_buf = 1 * MiB,
	.timeout = 300,
};

/* ---------------------------------------------------------------- messages and exit */

/*
 * The first thread to decide the outcome takes exit_lock and never releases it, so exactly one
 * verdict is printed even when several connections fail at once.
 */
static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;

static void __attribute__((noreturn)) quit(int status)
{
	fflush(stdout);
	fflush(stderr);
	_exit(status);
}

static void __attribute__((noreturn, format(printf, 2, 3))) fail(int status, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&exit_lock);
	va_start(ap, fmt);
	fputs("sanverify: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	quit(status);
}

static void __attribute__((format(printf, 1, 2))) note(const char *fmt, ...)
{
	va_list ap;

	if (opt.quiet)
		return;
	va_start(ap, fmt);
	flockfile(stderr);
	fputs("sanverify: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	va_end(ap);
}

/* Errors that end one server connection but not the server: always printed, even with -q. */
static void __attribute__((format(printf, 1, 2))) warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	flockfile(stderr);
	fputs("sanverify: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	va_end(ap);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		fail(EXIT_SYSERR, "out of memory (%zu bytes)", n);
	return p;
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- generators */

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ULL

/*
 * The byte stream is a sequence of 32-bit little-endian words.  Word j of the stream with key
 * K is
 *
 *	fmix32(lo32(j) ^ a) ^ b,  where a | b << 32 = mix64(K + hi32(j) * GOLDEN)
 *
 * and fmix32 is MurmurHash3's finalizer.  fmix32 is a bijection, so no word repeats within
 * 2^32 words (16 GiB) and a shift by any number of bytes shows at once; the outer xor makes
 * streams differ in all 64 key bits.  Being counter based, any offset can be produced directly,
 * which keeps partial writes and the two ends simple.  32-bit multiplies vectorize (eight per
 * AVX2 instruction), so generation runs at about 10 GB/s a core, well above loopback TCP: the
 * tool runs at both ends of throughput tests and must not be what they measure.
 */
#define STREAM_BLOCK 64 /* words per vectorized step; a constant trip count lets gcc -O2 do it */

typedef uint32_t u32_unaligned __attribute__((aligned(1), may_alias));

static inline uint32_t fmix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

static inline uint32_t stream_word(uint32_t a, uint32_t b, uint32_t j)
{
	return htole32(fmix32(j ^ a) ^ b);
}

__attribute__((target_clones("avx2", "default"))) static void
stream_blocks(uint32_t a, uint32_t b, uint32_t j, unsigned char *p, size_t nblocks)
{
	for (; nblocks; nblocks--, p += 4 * STREAM_BLOCK, j += STREAM_BLOCK) {
		u32_unaligned *o = (u32_unaligned *)p;

		for (unsigned i = 0; i < STREAM_BLOCK; i++)
			o[i] = stream_word(a, b, j + i);
	}
}

static void stream_fill(uint64_t key, uint64_t off, unsigned char *p, size_t n)
{
	uint64_t j = off >> 2;
	unsigned skip = off & 3;

	while (n) {
		uint64_t m = mix64(key + (j >> 32) * GOLDEN);
		uint32_t a = m, b = m >> 32, w;
		uint64_t seg_left = (1ULL << 32) - (uint32_t)j; /* words before the next segment */
		size_t words, blocks, k;

		if (skip || n < 4) {
			/* Partial word at either end. */
			w = stream_word(a, b, j);
			k = MIN(4 - skip, n);
			memcpy(p, (unsigned char *)&w + skip, k);
			p += k;
			n -= k;
			j++;
			skip = 0;
			continue;
		}
		words = MIN((uint64_t)n / 4, seg_left);
		blocks = words / STREAM_BLOCK;
		stream_blocks(a, b, j, p, blocks);
		p += 4 * STREAM_BLOCK * blocks;
		j += STREAM_BLOCK * blocks;
		n -= 4 * STREAM_BLOCK * blocks;
		for (words -= STREAM_BLOCK * blocks; words; words--, p += 4, n -= 4, j++) {
			w = stream_word(a, b, j);
			memcpy(p, &w, 4);
		}
	}
}

/* Index of the first byte of p[0..n) that differs from the stream at off, or n if none. */
static size_t stream_check(uint64_t key, uint64_t off, const unsigned char *p, size_t n)
{
	unsigned char want[4096];
	size_t done = 0, m, i;

	/* Generating into a cache-resident buffer and comparing costs little over a fused loop. */
	for (; done < n; done += m) {
		m = MIN(n - done, sizeof(want));
		stream_fill(key, off + done, want, m);
		if (memcmp(want, p + done, m)) {
			for (i = 0; want[i] == p[done + i]; i++)
				;
			return done + i;
		}
	}
	return n;
}

/* xorshift64*: the chunking generator, deliberately independent of the byte stream. */
struct rng {
	uint64_t s;
};

static void rng_seed(struct rng *r, uint64_t seed)
{
	r->s = mix64(seed) | 1;
}

static uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

/*
 * A size in [lo, hi], uniform in its bit length and then uniform within it: log scale, so 1-byte
 * and multi-megabyte calls both happen often.  Clamping makes lo and hi themselves a bit likelier,
 * which is welcome at edges.
 */
static size_t rand_size(struct rng *r, size_t lo, size_t hi)
{
	unsigned blo, bhi, b;
	uint64_t base, s;

	if (lo >= hi)
		return hi;
	blo = lo ? 64 - __builtin_clzll(lo) : 1;
	bhi = 64 - __builtin_clzll(hi);
	b = blo + rng_next(r) % (bhi - blo + 1);
	base = 1ULL << (b - 1);
	s = base + (rng_next(r) & (base - 1));
	if (s < lo)
		s = lo;
	if (s > hi)
		s = hi;
	return s;
}

/* Per-connection stream key: a function of the client's -s and the connection index only. */
static uint64_t conn_key(uint64_t seed, uint32_t idx)
{
	return mix64(mix64(seed ^ 0x53414e5645524946ULL) + (idx + 1ULL) * GOLDEN);
}

/* ---------------------------------------------------------------- crc32 (IEEE, as zlib) */

/*
 * The client reports the crc32 of every stream it verified, in connection order, so test
 * scripts can compare runs (kernel TCP against the switch) by one number.  It runs over every
 * received byte, so it must be fast: PCLMULQDQ folding where the CPU has it, slicing-by-8
 * otherwise.  Internally the "raw" register is the complemented crc.
 */
#define CRC_POLY 0xedb88320u

static uint32_t crc_tab[8][256];
static bool crc_have_clmul;

static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc_tab[k][i] =
				(crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

static uint32_t crc_raw_sw(uint32_t c, const unsigned char *p, size_t n)
{
	for (; n && ((uintptr_t)p & 7); n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	for (; n >= 8; p += 8, n -= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w = le64toh(w) ^ c;
		c = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		    crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
		    crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
		    crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
	}
	while (n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
/*
 * Carry-less multiply folding (Intel, "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ"), in the bit-reflected domain.  Constants are x^k mod P for the folding distances:
 * 4x128+32 / 4x128-32 bits for the four-lane loop, 128+32 / 128-32 for single folds, 64 for
 * the 64-to-32 step, then Barrett reduction with P and floor(x^64 / P).
 * Takes n >= 64, a multiple of 16.
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_raw_clmul(uint32_t c, const unsigned char *p, size_t n)
{
	const __m128i k_fold4 = _mm_set_epi64x(0x1c6e41596ULL, 0x154442bd4ULL);
	const __m128i k_fold1 = _mm_set_epi64x(0x0ccaa009eULL, 0x1751997d0ULL);
	const __m128i k_64 = _mm_set_epi64x(0, 0x163cd6124ULL);
	const __m128i k_barrett = _mm_set_epi64x(0x1f7011641ULL, 0x1db710641ULL);
	const __m128i lo32 = _mm_set_epi32(0, ~0, 0, ~0);
	__m128i a, b, d, e, t;

	a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128(c));
	b = _mm_loadu_si128((const __m128i *)(p + 16));
	d = _mm_loadu_si128((const __m128i *)(p + 32));
	e = _mm_loadu_si128((const __m128i *)(p + 48));
	p += 64;
	n -= 64;

#define FOLD(x, k, next)                                                          \
	((x) = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128((x), (k), 0x00),  \
					   _mm_clmulepi64_si128((x), (k), 0x11)), \
			     (next)))
	for (; n >= 64; p += 64, n -= 64) {
		FOLD(a, k_fold4, _mm_loadu_si128((const __m128i *)p));
		FOLD(b, k_fold4, _mm_loadu_si128((const __m128i *)(p + 16)));
		FOLD(d, k_fold4, _mm_loadu_si128((const __m128i *)(p + 32)));
		FOLD(e, k_fold4, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	FOLD(a, k_fold1, b);
	FOLD(a, k_fold1, d);
	FOLD(a, k_fold1, e);
	for (; n >= 16; p += 16, n -= 16)
		FOLD(a, k_fold1, _mm_loadu_si128((const __m128i *)p));
#undef FOLD

	/* 128 -> 64 bits */
	t = _mm_clmulepi64_si128(a, k_fold1, 0x10);
	a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
	/* 64 -> 32 bits */
	t = _mm_srli_si128(a, 4);
	a = _mm_clmulepi64_si128(_mm_and_si128(a, lo32), k_64, 0x00);
	a = _mm_xor_si128(a, t);
	/* Barrett reduction */
	t = _mm_clmulepi64_si128(_mm_and_si128(a, lo32), k_barrett, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, lo32), k_barrett, 0x00);
	a = _mm_xor_si128(a, t);
	return _mm_extract_epi32(a, 1);
}
#endif

static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n)
{
	uint32_t c = ~crc;

#if defined(__x86_64__)
	if (crc_have_clmul && n >= 64) {
		size_t k = n & ~(size_t)15;

		c = crc_raw_clmul(c, p, k);
		p += k;
		n -= k;
	}
#endif
	return ~crc_raw_sw(c, p, n);
}

/*
 * crc32 of A||B from crc(A), crc(B) and len(B): crc(A) times x^(8 len(B)) mod P, xor crc(B).
 * Lets every connection keep its own crc while the report is over all streams in order.
 */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1;
	}
	return p;
}

static uint32_t crc_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	uint32_t sq = 1u << 30; /* x^1, squared each round: x^(2^k) */
	uint32_t xn = 1u << 31; /* x^0 */
	uint64_t bits = len2 * 8;

	for (; bits; bits >>= 1) {
		if (bits & 1)
			xn = gf2_mulmod(sq, xn);
		sq = gf2_mulmod(sq, sq);
	}
	return gf2_mulmod(xn, crc1) ^ crc2;
}

/* ---------------------------------------------------------------- stream header */

/*
 * Stream header, sent by the client before its stream: 32 bytes, all fields big-endian.
 *
 *    0  u32 magic    "SANV"
 *    4  u16 version  1
 *    6  u16 flags    bit 0: the client half-closes after its last byte and waits for EOF
 *    8  u64 key      stream key; the byte stream is a function of this alone
 *   16  u64 bytes    stream length that follows the header
 *   24  u32 conn     connection index within the client (only for messages)
 *   28  u32 check    crc32 of bytes 0..27, so a damaged header is reported as such
 *
 * The server needs nothing else to verify the stream independently of the client's options.
 * Any change here bumps HDR_VERSION.
 */
#define HDR_LEN 32
#define HDR_MAGIC 0x53414e56u /* "SANV" */
#define HDR_VERSION 1
#define HDR_F_HALF_CLOSE 0x0001

struct hdr {
	uint16_t flags;
	uint64_t key;
	uint64_t bytes;
	uint32_t conn;
};

static void put_be32(unsigned char *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put_be64(unsigned char *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t get_be32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get_be64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static void hdr_encode(unsigned char *p, const struct hdr *h)
{
	put_be32(p, HDR_MAGIC);
	p[4] = HDR_VERSION >> 8;
	p[5] = HDR_VERSION & 0xff;
	p[6] = h->flags >> 8;
	p[7] = h->flags & 0xff;
	put_be64(p + 8, h->key);
	put_be64(p + 16, h->bytes);
	put_be32(p + 24, h->conn);
	put_be32(p + 28, crc_update(0, p, 28));
}

/* 0, or a static string saying what is wrong with the header. */
static const char *hdr_decode(const unsigned char *p, struct hdr *h)
{
	if (get_be32(p) != HDR_MAGIC)
		return "bad magic (not a sanverify client?)";
	if (get_be32(p + 28) != crc_update(0, p, 28))
		return "header checksum mismatch";
	if (((p[4] << 8) | p[5]) != HDR_VERSION)
		return "unsupported header version";
	h->flags = (p[6] << 8) | p[7];
	h->key = get_be64(p + 8);
	h->bytes = get_be64(p + 16);
	h->conn = get_be32(p + 24);
	return NULL;
}

/* ---------------------------------------------------------------- mismatch report */

#define SEARCH_WINDOW (16 * MiB)

/*
 * Fatal: p[bad] is the first wrong byte of a read of n bytes that should have been the stream
 * at offset base.  To help whoever debugs the transport, look for the received bytes elsewhere in
 * the stream nearby: a hit means bytes were skipped or repeated, not damaged.
 */
static void __attribute__((noreturn))
mismatch(const char *who, uint64_t key, uint64_t base, const unsigned char *p, size_t n, size_t bad)
{
	uint64_t off = base + bad, lo, span;
	size_t have = MIN(n - bad, (size_t)16);
	char hint[160] = "";
	unsigned char want;

	stream_fill(key, off, &want, 1);
	if (have >= 8) {
		unsigned char *win;
		void *hit;
		size_t z;

		for (z = 0; z < have && !p[bad + z]; z++)
			;
		lo = off > SEARCH_WINDOW ? off - SEARCH_WINDOW : 0;
		span = off + SEARCH_WINDOW - lo + have;
		win = malloc(span);
		if (z == have) {
			snprintf(hint, sizeof(hint), "; the received bytes are zeros");
		} else if (win) {
			stream_fill(key, lo, win, span);
			hit = memmem(win, span, p + bad, have);
			if (hit)
				snprintf(hint, sizeof(hint),
					 "; the received bytes are the stream at offset %" PRIu64
					 " (%+" PRId64 " bytes: skipped or repeated data)",
					 lo + ((unsigned char *)hit - win),
					 (int64_t)(lo + ((unsigned char *)hit - win) - off));
			else
				snprintf(hint, sizeof(hint),
					 "; they match nothing within +-%llu MiB of the stream",
					 SEARCH_WINDOW / MiB);
		}
		free(win);
	}
	fail(EXIT_MISMATCH,
	     "%s: data mismatch at offset %" PRIu64 ": expected 0x%02x got 0x%02x (byte %zu of a "
	     "%zu-byte read at offset %" PRIu64 ")%s",
	     who, off, want, p[bad], bad, n, base, hint);
}

/* ---------------------------------------------------------------- system calls */

/*
 * Send and receive through the entry point --io selects.  Vector forms split the buffer at a
 * random point (possibly giving an empty iovec) so gather/scatter paths see uneven pieces.
 * SIGPIPE is ignored process-wide, so write()/writev() are as safe as MSG_NOSIGNAL.
 */
static ssize_t io_send(int fd, struct rng *r, const void *buf, size_t len)
{
	enum io_kind k = opt.io == IO_MIX ? (enum io_kind)(rng_next(r) % 4) : opt.io;
	size_t cut = k >= IO_MSG ? rng_next(r) % (len + 1) : 0;
	struct iovec iov[2] = { { (void *)buf, cut }, { (char *)buf + cut, len - cut } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

	switch (k) {
	case IO_RW:
		return write(fd, buf, len);
	case IO_MSG:
		return sendmsg(fd, &m, MSG_NOSIGNAL);
	case IO_VEC:
		return writev(fd, iov, 2);
	default:
		return send(fd, buf, len, MSG_NOSIGNAL);
	}
}

static ssize_t io_recv(int fd, struct rng *r, void *buf, size_t len)
{
	enum io_kind k = opt.io == IO_MIX ? (enum io_kind)(rng_next(r) % 4) : opt.io;
	size_t cut = k >= IO_MSG ? rng_next(r) % (len + 1) : 0;
	struct iovec iov[2] = { { buf, cut }, { (char *)buf + cut, len - cut } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

	switch (k) {
	case IO_RW:
		return read(fd, buf, len);
	case IO_MSG:
		return recvmsg(fd, &m, 0);
	case IO_VEC:
		return readv(fd, iov, 2);
	default:
		return recv(fd, buf, len, 0);
	}
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		fail(EXIT_SYSERR, "fcntl(O_NONBLOCK): %s", strerror(errno));
}

static void check_select_fd(int fd)
{
	if (opt.wait == W_SELECT && fd >= FD_SETSIZE)
		fail(EXIT_SYSERR,
		     "fd %d >= FD_SETSIZE (%d): select cannot wait on it; use fewer connections or "
		     "another -m",
		     fd, FD_SETSIZE);
}

static bool is_epoll(void)
{
	return opt.wait >= W_EPOLL;
}

/* Result of one I/O step; edge-triggered waiting depends on telling FULL from SHORT. */
enum step {
	ST_IDLE,  /* nothing to do in this direction */
	ST_AGAIN, /* EAGAIN: wait for readiness */
	ST_SHORT, /* moved fewer bytes than asked (or EOF): the socket is drained / full */
	ST_FULL,  /* moved everything asked: there may be more */
};

/* ---------------------------------------------------------------- one-fd waits (blocking mode) */

/*
 * Blocking mode is the common application pattern "wait for readiness with MODE, then make a
 * blocking call".  Each thread owns its waiter, so with epoll the reader and the writer of one
 * connection register the same socket in two epoll sets.
 *
 * Edge-triggered waits report only new readiness, so after a wakeup the caller keeps calling
 * until a call comes up short (see ST_FULL): a blocking read that fills its buffer may have left
 * data behind that no new edge would announce.  A short read does not prove there is nothing
 * left to wait for, though: a FIN that arrived with the last data makes that read short and
 * leaves an EOF no edge will announce.  So readers also skip the wait once the peer's
 * shutdown was reported (EPOLLRDHUP, as nginx does) or once the whole stream is in and the
 * next read can only be the EOF; see et_go_on().
 */
struct fdwait {
	int fd;
	short events; /* POLLIN or POLLOUT */
	int epfd;
	bool fired; /* oneshot: disarmed until re-armed */
	bool hup;   /* a wakeup reported RDHUP/HUP/ERR: every later call returns at once */
};

static uint32_t ep_events(short events)
{
	return (events & POLLIN ? EPOLLIN : 0) | (events & POLLOUT ? EPOLLOUT : 0);
}

static void fdwait_init(struct fdwait *w, int fd, short events)
{
	struct epoll_event ev = { .events = ep_events(events) };

	w->fd = fd;
	w->events = events;
	w->epfd = -1;
	w->fired = false;
	w->hup = false;
	check_select_fd(fd);
	if (!is_epoll())
		return;
	if (opt.wait == W_EPOLL_ET)
		ev.events |= EPOLLET | (events & POLLIN ? EPOLLRDHUP : 0);
	if (opt.wait == W_EPOLL_ONESHOT)
		ev.events |= EPOLLONESHOT;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail(EXIT_SYSERR, "epoll: %s", strerror(errno));
}

static void fdwait_fini(struct fdwait *w)
{
	if (w->epfd >= 0)
		close(w->epfd);
	w->epfd = -1;
}

static void fdwait_wait(struct fdwait *w)
{
	struct epoll_event ev = { .events = ep_events(w->events) | EPOLLONESHOT };
	struct pollfd pfd = { .fd = w->fd, .events = w->events };
	fd_set set;
	int rc;

	do {
		switch (opt.wait) {
		case W_POLL:
			rc = poll(&pfd, 1, -1);
			break;
		case W_SELECT:
			FD_ZERO(&set);
			FD_SET(w->fd, &set);
			rc = select(w->fd + 1, w->events & POLLIN ? &set : NULL,
				    w->events & POLLOUT ? &set : NULL, NULL, NULL);
			break;
		default:
			if (w->fired && epoll_ctl(w->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
				fail(EXIT_SYSERR, "epoll_ctl(re-arm): %s", strerror(errno));
			w->fired = false;
			rc = epoll_wait(w->epfd, &ev, 1, -1);
			if (rc > 0 && opt.wait == W_EPOLL_ONESHOT)
				w->fired = true;
			if (rc > 0 && (ev.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
				w->hup = true;
			break;
		}
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		fail(EXIT_SYSERR, "%s: %s", wait_names[opt.wait], strerror(errno));
}

/*
 * After a call that returned st, may the next call go ahead without waiting?  Level-triggered
 * modes always wait first (that is the pattern under test); edge-triggered ones must not wait
 * while readiness may be left over (see struct fdwait).  eof_next: all expected bytes are in.
 */
static bool et_go_on(const struct fdwait *w, enum step st, bool eof_next)
{
	return opt.wait == W_EPOLL_ET && (st == ST_FULL || w->hup || eof_next);
}

/* ---------------------------------------------------------------- event loop (nonblocking mode) */

enum { WANT_RD = 1, WANT_WR = 2 };

/*
 * One descriptor in a thread's loop.  run() does all the I/O it can (every direction until
 * EAGAIN or until the other direction must make room), so the same routine is correct for
 * level- and edge-triggered waits; can_rd/can_wr remember readiness between wakeups and are
 * cleared only by EAGAIN.
 */
struct item {
	int fd;
	unsigned want;	/* WANT_* needed now; never 0 while the item lives */
	unsigned armed; /* epoll: events registered now (level/oneshot) */
	bool can_rd, can_wr;
	bool done; /* run() finished: the loop closes fd and calls fini() */
	void (*run)(struct item *it);
	void (*fini)(struct item *it);
};

struct loop {
	int epfd;
	struct item **items;
	size_t n, cap;
	struct pollfd *pfd;
	size_t pfd_cap;
};

static uint32_t item_events(const struct item *it)
{
	return (it->want & WANT_RD ? EPOLLIN : 0) | (it->want & WANT_WR ? EPOLLOUT : 0);
}

static void loop_init(struct loop *l)
{
	memset(l, 0, sizeof(*l));
	l->epfd = -1;
	if (is_epoll() && (l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		fail(EXIT_SYSERR, "epoll_create1: %s", strerror(errno));
}

static void loop_ctl(struct loop *l, struct item *it, int op)
{
	struct epoll_event ev = { .data.ptr = it };

	if (opt.wait == W_EPOLL_ET)
		ev.events = EPOLLIN | EPOLLOUT | EPOLLET; /* registered once, never changed */
	else
		ev.events = item_events(it) | (opt.wait == W_EPOLL_ONESHOT ? EPOLLONESHOT : 0);
	if (epoll_ctl(l->epfd, op, it->fd, &ev) < 0)
		fail(EXIT_SYSERR, "epoll_ctl(fd %d): %s", it->fd, strerror(errno));
	it->armed = item_events(it);
}

/* After run(): bring the registration in line with what the item wants now. */
static void loop_sync(struct loop *l, struct item *it)
{
	if (it->done || !is_epoll() || opt.wait == W_EPOLL_ET)
		return;
	/* A oneshot registration fired and is disarmed: re-arm every time. */
	if (opt.wait == W_EPOLL_ONESHOT || it->armed != item_events(it))
		loop_ctl(l, it, EPOLL_CTL_MOD);
}

/* Add and give it a first run on whatever readiness the caller claims. */
static void loop_add(struct loop *l, struct item *it)
{
	check_select_fd(it->fd);
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->items = realloc(l->items, l->cap * sizeof(*l->items));
		if (!l->items)
			fail(EXIT_SYSERR, "out of memory");
	}
	l->items[l->n++] = it;
	if (is_epoll())
		loop_ctl(l, it, EPOLL_CTL_ADD);
	if (it->can_rd || it->can_wr) {
		it->run(it);
		loop_sync(l, it);
	}
}

static void loop_fire(struct loop *l, struct item *it, bool rd, bool wr)
{
	if (it->done)
		return;
	it->can_rd |= rd;
	it->can_wr |= wr;
	it->run(it);
	loop_sync(l, it);
}

/* Closing is deferred to here so that no event in a batch refers to a freed item. */
static void loop_sweep(struct loop *l)
{
	for (size_t i = 0; i < l->n;) {
		struct item *it = l->items[i];

		if (!it->done) {
			i++;
			continue;
		}
		if (is_epoll() && epoll_ctl(l->epfd, EPOLL_CTL_DEL, it->fd, NULL) < 0)
			fail(EXIT_SYSERR, "epoll_ctl(DEL): %s", strerror(errno));
		close(it->fd);
		l->items[i] = l->items[--l->n];
		it->fini(it);
	}
}

/* Wait once (no timeout: -t guards against hangs) and run every item that became ready. */
static void loop_once(struct loop *l)
{
	struct epoll_event evs[64];
	fd_set rs, ws;
	size_t i, n = l->n;
	int rc, maxfd = -1;

	switch (opt.wait) {
	case W_POLL:
		if (l->pfd_cap < n) {
			l->pfd_cap = n * 2;
			l->pfd = realloc(l->pfd, l->pfd_cap * sizeof(*l->pfd));
			if (!l->pfd)
				fail(EXIT_SYSERR, "out of memory");
		}
		for (i = 0; i < n; i++) {
			l->pfd[i].fd = l->items[i]->fd;
			l->pfd[i].events = (l->items[i]->want & WANT_RD ? POLLIN : 0) |
					   (l->items[i]->want & WANT_WR ? POLLOUT : 0);
			l->pfd[i].revents = 0;
		}
		rc = poll(l->pfd, n, -1);
		if (rc < 0)
			break;
		/* Items added during this pass sit beyond n and were already run. */
		for (i = 0; i < n; i++) {
			short re = l->pfd[i].revents;

			if (re)
				loop_fire(l, l->items[i], re & (POLLIN | POLLHUP | POLLERR),
					  re & (POLLOUT | POLLHUP | POLLERR));
		}
		break;
	case W_SELECT:
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		for (i = 0; i < n; i++) {
			struct item *it = l->items[i];

			if (it->want & WANT_RD)
				FD_SET(it->fd, &rs);
			if (it->want & WANT_WR)
				FD_SET(it->fd, &ws);
			if (it->fd > maxfd)
				maxfd = it->fd;
		}
		rc = select(maxfd + 1, &rs, &ws, NULL, NULL);
		if (rc < 0)
			break;
		for (i = 0; i < n; i++) {
			struct item *it = l->items[i];
			bool rd = FD_ISSET(it->fd, &rs), wr = FD_ISSET(it->fd, &ws);

			if (rd || wr)
				loop_fire(l, it, rd, wr);
		}
		break;
	default:
		rc = epoll_wait(l->epfd, evs, 64, -1);
		for (i = 0; rc > 0 && i < (size_t)rc; i++) {
			uint32_t e = evs[i].events;

			loop_fire(l, evs[i].data.ptr, e & (EPOLLIN | EPOLLHUP | EPOLLERR),
				  e & (EPOLLOUT | EPOLLHUP | EPOLLERR));
		}
		break;
	}
	if (rc < 0 && errno != EINTR)
		fail(EXIT_SYSERR, "%s: %s", wait_names[opt.wait], strerror(errno));
	loop_sweep(l);
}

/* ---------------------------------------------------------------- common connection helpers */

#define VERIFY_BLOCK (64 * KiB) /* check and crc a block while it is still in cache */

/* Progress counters are also read by the timeout report from the signal thread. */
#define PUBLISH(var, val) __atomic_store_n(&(var), (val), __ATOMIC_RELAXED)
#define PEEK(var) __atomic_load_n(&(var), __ATOMIC_RELAXED)

static bool would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/*
 * ENOBUFS from a send means the transport could not get memory for it (libsanswitch: a send
 * above its inline size that can neither be registered nor copied; Windows: WSAENOBUFS).
 * Nothing of that send went out and the connection is still usable, so it is not an error:
 * like a careful application, both ends count it and send the same bytes again in smaller
 * pieces.  Each failure halves the size of the next try, down to ENOBUFS_FLOOR, so a transport
 * that refuses every large send forever still sees the stream go through in small ones.
 */
#define ENOBUFS_FLOOR (1 * KiB)

static uint64_t enobufs_seen; /* sends that failed ENOBUFS, in this process */

/* A send of len bytes failed ENOBUFS: count it, return the size to try next. */
static size_t enobufs_retry(const char *who, size_t len)
{
	static bool warned;
	struct timespec backoff = { 0, 1000000 };

	__atomic_add_fetch(&enobufs_seen, 1, __ATOMIC_RELAXED);
	if (len > ENOBUFS_FLOOR)
		return MIN(len / 2 > ENOBUFS_FLOOR ? len / 2 : (size_t)ENOBUFS_FLOOR, len);
	/* Nothing smaller to try: back off a moment and retry the same (-t bounds it). */
	if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
		warn("%s: a %zu-byte send failed with ENOBUFS (at or below the %llu-byte floor); "
		     "retrying it every 1 ms",
		     who, len, ENOBUFS_FLOOR);
	nanosleep(&backoff, NULL);
	return len;
}

/* Where to connect or bind, from -4/-6, -a and -p. */
static struct sockaddr_storage sv_addr;
static socklen_t sv_addrlen;

static void resolve(void)
{
	struct addrinfo hints = { .ai_family = opt.family,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%u", opt.port);
	rc = getaddrinfo(opt.addr, port, &hints, &res);
	if (rc)
		fail(EXIT_SYSERR, "%s: %s", opt.addr, gai_strerror(rc));
	memcpy(&sv_addr, res->ai_addr, res->ai_addrlen);
	sv_addrlen = res->ai_addrlen;
	freeaddrinfo(res);
}

static void addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN], serv[8];

	if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(buf, size, "?");
	else if (sa->sa_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, serv);
	else
		snprintf(buf, size, "%s:%s", host, serv);
}

static void start_thread(pthread_t *tid, void *(*fn)(void *), void *arg, bool detach)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * KiB);
	if (detach)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(tid, &attr, fn, arg);
	if (rc)
		fail(EXIT_SYSERR, "pthread_create: %s", strerror(rc));
	pthread_attr_destroy(&attr);
}

/* Turn a step into "did something", clearing the readiness flag on EAGAIN. */
static bool stepped(enum step st, bool *ready)
{
	if (st == ST_AGAIN)
		*ready = false;
	return st == ST_SHORT || st == ST_FULL;
}

/* ================================================================ client */

/*
 * A client connection sends header + stream and verifies the echo.  In nonblocking mode it is
 * an item in one thread's loop; in blocking mode the connection's own thread writes while a
 * second thread reads, so both directions always make progress and the echo cannot deadlock.
 */
struct cconn {
	struct item it; /* it.fd is the socket */
	int rfd;	/* reads use this: the socket, or a dup of it with --dup */
	uint32_t idx;
	uint64_t key;
	char who[32];
	bool connected;

	/* send side */
	unsigned char hdr[HDR_LEN];
	unsigned hdr_sent;
	unsigned char *txbuf; /* the current write: generated once, sent by one or more calls */
	size_t tx_len, tx_pos;
	size_t tx_cap;	 /* after ENOBUFS: largest send for the rest of this chunk (0: none) */
	uint64_t tx_off; /* stream bytes the kernel accepted */
	bool tx_shut;	 /* SHUT_WR done (--half-close) */
	struct rng wr;

	/* receive side: separate generator, it runs in another thread in blocking mode */
	uint64_t rx_off; /* stream bytes received and verified */
	bool rx_eof;
	uint32_t crc; /* of the verified bytes */
	struct rng rd;
	pthread_t reader;
	unsigned char *rxbuf;
	size_t rxcap;
	unsigned *live; /* nonblocking: the owning thread's count of open connections */
	bool closed;	/* finished and closed (read by the timeout report) */
};

static struct cconn *cl_conns;

static void c_init(struct cconn *c, uint32_t idx)
{
	struct hdr h = {
		.flags = opt.half_close ? HDR_F_HALF_CLOSE : 0,
		.key = conn_key(opt.seed, idx),
		.bytes = opt.bytes,
		.conn = idx,
	};

	memset(c, 0, sizeof(*c));
	c->idx = idx;
	c->key = h.key;
	c->it.fd = c->rfd = -1;
	hdr_encode(c->hdr, &h);
	rng_seed(&c->wr, c->key ^ 0x7772697465ULL);
	rng_seed(&c->rd, c->key ^ 0x72656164ULL);
	snprintf(c->who, sizeof(c->who), "client conn %u", idx);
}

static bool c_tx_data_done(const struct cconn *c)
{
	return c->hdr_sent == HDR_LEN && c->tx_off == opt.bytes;
}

static bool c_tx_done(const struct cconn *c)
{
	return c_tx_data_done(c) && (!opt.half_close || c->tx_shut);
}

static bool c_rx_done(const struct cconn *c)
{
	return c->rx_off == opt.bytes && (!opt.half_close || c->rx_eof);
}

static void c_open(struct cconn *c, bool nonblock)
{
	int fd = socket(opt.family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		fail(EXIT_SYSERR, "%s: socket: %s", c->who, strerror(errno));
	if (nonblock)
		set_nonblock(fd); /* fcntl, not SOCK_NONBLOCK: the server side uses accept4 flags */
	c->it.fd = c->rfd = fd;
	if (connect(fd, (struct sockaddr *)&sv_addr, sv_addrlen) == 0)
		c->connected = true;
	else if (!nonblock || errno != EINPROGRESS)
		fail(EXIT_SYSERR, "%s: connect to %s port %u: %s", c->who, opt.addr, opt.port,
		     strerror(errno));
	if (opt.dup && (c->rfd = dup(fd)) < 0)
		fail(EXIT_SYSERR, "dup: %s", strerror(errno));
}

/* The next write: its size from the chunking generator, its bytes from the stream. */
static void c_next_chunk(struct cconn *c)
{
	uint64_t left = opt.bytes - c->tx_off;

	if (!c->txbuf)
		c->txbuf = xmalloc(MIN((uint64_t)opt.max_write, opt.bytes));
	c->tx_len = MIN(rand_size(&c->wr, opt.min_write, opt.max_write), left);
	c->tx_pos = 0;
	c->tx_cap = 0;
	stream_fill(c->key, c->tx_off, c->txbuf, c->tx_len);
	if (opt.corrupt && c->idx == 0 && opt.corrupt_at >= c->tx_off &&
	    opt.corrupt_at - c->tx_off < c->tx_len)
		c->txbuf[opt.corrupt_at - c->tx_off] ^= 0x01;
}

/* One send call: header bytes first, then the current chunk. */
static enum step c_tx(struct cconn *c)
{
	const unsigned char *p;
	size_t len;
	ssize_t n;

	if (c->hdr_sent < HDR_LEN) {
		p = c->hdr + c->hdr_sent;
		len = HDR_LEN - c->hdr_sent;
	} else {
		if (c->tx_off == opt.bytes)
			return ST_IDLE;
		if (c->tx_pos == c->tx_len)
			c_next_chunk(c);
		p = c->txbuf + c->tx_pos;
		len = c->tx_len - c->tx_pos;
	}
	if (c->tx_cap && len > c->tx_cap)
		len = c->tx_cap;
	n = io_send(c->it.fd, &c->wr, p, len);
	if (n < 0) {
		if (would_block())
			return ST_AGAIN;
		if (errno == EINTR)
			return ST_FULL; /* no information: call again */
		if (errno == ENOBUFS) {
			/* Nothing was sent: the same bytes again, in smaller pieces, at once. */
			c->tx_cap = enobufs_retry(c->who, len);
			return ST_FULL;
		}
		fail(EXIT_SYSERR, "%s: send at offset %" PRIu64 ": %s", c->who, c->tx_off,
		     strerror(errno));
	}
	if (c->hdr_sent < HDR_LEN) {
		c->hdr_sent += n;
	} else {
		c->tx_pos += n;
		PUBLISH(c->tx_off, c->tx_off + n);
	}
	return (size_t)n == len ? ST_FULL : ST_SHORT;
}

static void c_shut(struct cconn *c)
{
	if (shutdown(c->it.fd, SHUT_WR) < 0)
		fail(EXIT_SYSERR, "%s: shutdown(SHUT_WR): %s", c->who, strerror(errno));
	c->tx_shut = true;
}

/* Verify n received bytes (the start of a read of size got) and fold them into the crc. */
static void c_verify(struct cconn *c, const unsigned char *buf, size_t n, size_t got)
{
	uint64_t base = c->rx_off;

	for (size_t done = 0; done < n;) {
		size_t m = MIN(n - done, VERIFY_BLOCK);
		size_t bad = stream_check(c->key, c->rx_off, buf + done, m);

		if (bad != m)
			mismatch(c->who, c->key, base, buf, got, done + bad);
		c->crc = crc_update(c->crc, buf + done, m);
		PUBLISH(c->rx_off, c->rx_off + m);
		done += m;
	}
}

/* One receive call into buf (up to cap bytes, random size). */
static enum step c_rx(struct cconn *c, unsigned char *buf, size_t cap)
{
	size_t want = rand_size(&c->rd, 1, cap), ok;
	ssize_t n = io_recv(c->rfd, &c->rd, buf, want);

	if (n < 0) {
		if (would_block())
			return ST_AGAIN;
		if (errno == EINTR)
			return ST_FULL;
		fail(EXIT_SYSERR, "%s: recv after %" PRIu64 " verified bytes: %s", c->who,
		     c->rx_off, strerror(errno));
	}
	if (n == 0) {
		if (c->rx_off < opt.bytes)
			fail(EXIT_MISMATCH,
			     "%s: unexpected EOF after %" PRIu64 " of %" PRIu64 " echoed bytes",
			     c->who, c->rx_off, opt.bytes);
		c->rx_eof = true;
		return ST_SHORT;
	}
	ok = MIN((uint64_t)n, opt.bytes - c->rx_off);
	c_verify(c, buf, ok, n);
	if ((size_t)n > ok)
		fail(EXIT_MISMATCH, "%s: %zu extra bytes after the %" PRIu64 "-byte stream", c->who,
		     n - ok, opt.bytes);
	return (size_t)n == want ? ST_FULL : ST_SHORT;
}

/* ---------------------------------------------------------------- client, nonblocking */

struct cthread {
	pthread_t tid;
	unsigned id;
	unsigned live; /* connections not yet closed */
	struct loop loop;
	/* Shared by the thread's connections: each read is verified before the next. */
	unsigned char *rxbuf;
};

static void c_run(struct item *it)
{
	struct cconn *c = container_of(it, struct cconn, it);
	bool progress = true;

	if (!c->connected) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (!it->can_wr)
			return;
		if (getsockopt(it->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err)
			fail(EXIT_SYSERR, "%s: connect to %s port %u: %s", c->who, opt.addr,
			     opt.port, strerror(err));
		c->connected = true;
	}
	while (progress) {
		progress = false;
		if (it->can_wr && !c_tx_data_done(c))
			progress |= stepped(c_tx(c), &it->can_wr);
		if (c_tx_data_done(c) && opt.half_close && !c->tx_shut)
			c_shut(c);
		if (it->can_rd && !c_rx_done(c))
			progress |= stepped(c_rx(c, c->rxbuf, c->rxcap), &it->can_rd);
	}
	it->done = c_tx_done(c) && c_rx_done(c);
	it->want = (c_tx_data_done(c) ? 0 : WANT_WR) | (c_rx_done(c) ? 0 : WANT_RD);
}

static void c_fini(struct item *it)
{
	struct cconn *c = container_of(it, struct cconn, it);

	if (c->rfd != it->fd)
		close(c->rfd);
	free(c->txbuf);
	c->txbuf = NULL;
	PUBLISH(c->closed, true);
	(*c->live)--;
}

static void *c_nb_thread(void *arg)
{
	struct cthread *t = arg;

	loop_init(&t->loop);
	t->rxbuf = xmalloc(opt.max_read);
	for (unsigned i = t->id; i < opt.conns; i += opt.threads) {
		struct cconn *c = &cl_conns[i];

		c->rxbuf = t->rxbuf;
		c->rxcap = opt.max_read;
		c->live = &t->live;
		c->it.run = c_run;
		c->it.fini = c_fini;
		c_open(c, true);
		c->it.want = c->connected ? WANT_RD | WANT_WR : WANT_WR;
		c->it.can_rd = c->it.can_wr = c->connected;
		t->live++;
		loop_add(&t->loop, &c->it);
	}
	loop_sweep(&t->loop);
	while (t->live)
		loop_once(&t->loop);
	free(t->rxbuf);
	return NULL;
}

/* ---------------------------------------------------------------- client, blocking */

/* Wait-then-call loop shared by both blocking directions (see struct fdwait for the ET rule). */
static void c_reader_loop(struct cconn *c)
{
	struct fdwait w;
	bool wait = true;

	fdwait_init(&w, c->rfd, POLLIN);
	while (!c_rx_done(c)) {
		enum step st;

		if (wait)
			fdwait_wait(&w);
		st = c_rx(c, c->rxbuf, c->rxcap);
		wait = !et_go_on(&w, st, c->rx_off == opt.bytes);
	}
	fdwait_fini(&w);
}

static void *c_reader_thread(void *arg)
{
	struct cconn *c = arg;

	c->rxcap = opt.max_read;
	c->rxbuf = xmalloc(c->rxcap);
	c_reader_loop(c);
	free(c->rxbuf);
	return NULL;
}

/* One thread per connection: connect, start the reader, write everything, wait for the reader. */
static void *c_conn_thread(void *arg)
{
	struct cconn *c = arg;
	struct fdwait w;
	bool wait = true;

	c_open(c, false);
	start_thread(&c->reader, c_reader_thread, c, false);
	fdwait_init(&w, c->it.fd, POLLOUT);
	while (!c_tx_data_done(c)) {
		enum step st;

		if (wait)
			fdwait_wait(&w);
		st = c_tx(c);
		wait = !et_go_on(&w, st, false);
	}
	fdwait_fini(&w);
	if (opt.half_close)
		c_shut(c);
	pthread_join(c->reader, NULL);
	if (c->rfd != c->it.fd)
		close(c->rfd);
	close(c->it.fd);
	free(c->txbuf);
	c->txbuf = NULL;
	PUBLISH(c->closed, true);
	return NULL;
}

/* ---------------------------------------------------------------- client main */

static int client_main(void)
{
	unsigned nthreads = opt.nonblock ? MIN(opt.threads, opt.conns) : opt.conns;
	pthread_t *tids = xmalloc(nthreads * sizeof(*tids));
	struct cthread *ct = NULL;
	uint64_t total = opt.bytes * opt.conns;
	uint32_t crc = 0;
	uint64_t enobufs;
	double t0, dt;

	resolve();
	cl_conns = xmalloc(opt.conns * sizeof(*cl_conns));
	for (unsigned i = 0; i < opt.conns; i++)
		c_init(&cl_conns[i], i);

	t0 = now_sec();
	if (opt.nonblock) {
		opt.threads = nthreads; /* c_nb_thread strides by it */
		ct = xmalloc(nthreads * sizeof(*ct));
		memset(ct, 0, nthreads * sizeof(*ct));
		for (unsigned t = 0; t < nthreads; t++) {
			ct[t].id = t;
			start_thread(&ct[t].tid, c_nb_thread, &ct[t], false);
		}
		for (unsigned t = 0; t < nthreads; t++)
			pthread_join(ct[t].tid, NULL);
	} else {
		for (unsigned i = 0; i < opt.conns; i++)
			start_thread(&tids[i], c_conn_thread, &cl_conns[i], false);
		for (unsigned i = 0; i < opt.conns; i++)
			pthread_join(tids[i], NULL);
	}
	dt = now_sec() - t0;

	for (unsigned i = 0; i < opt.conns; i++)
		crc = i ? crc_combine(crc, cl_conns[i].crc, opt.bytes) : cl_conns[i].crc;
	note("client: %u conn%s x %" PRIu64 " bytes echoed in %.3f s: %.2f Gbit/s each way "
	     "(%s, %s, %s)",
	     opt.conns, opt.conns == 1 ? "" : "s", opt.bytes, dt, dt > 0 ? total * 8 / dt / 1e9 : 0,
	     opt.nonblock ? "nonblocking" : "blocking", wait_names[opt.wait], io_names[opt.io]);
	enobufs = PEEK(enobufs_seen);
	if (enobufs)
		note("client: %" PRIu64 " send%s failed with ENOBUFS, sent again in smaller pieces",
		     enobufs, enobufs == 1 ? "" : "s");
	pthread_mutex_lock(&exit_lock);
	if (opt.expect_enobufs && !enobufs) {
		fprintf(stderr,
			"sanverify: client FAILED: --expect-enobufs, but no send failed with "
			"ENOBUFS (the streams verified: conns=%u bytes=%" PRIu64 " crc32=%08x)\n",
			opt.conns, total, crc);
		quit(EXIT_EXPECT);
	}
	/* New fields go at the end: scripts parse "conns=.. bytes=.. crc32=..". */
	printf("sanverify: client ok conns=%u bytes=%" PRIu64 " crc32=%08x enobufs=%" PRIu64 "\n",
	       opt.conns, total, crc, enobufs);
	quit(0);
}

/* ================================================================ server */

/*
 * A server connection reads the header, then verifies each read as it lands in a bounded echo
 * ring and sends the ring back.  The ring bounds memory and gives flow control: when it is
 * full the server stops reading until the client has taken some echo, so a client that writes
 * while it reads never deadlocks against us, and one that stops reading is held back by TCP.
 */
struct sconn {
	struct item it; /* it.fd is the socket */
	int rfd;	/* reads use this: the socket, or a dup of it with --dup */
	uint64_t id;	/* accept order */
	char who[96];

	unsigned char raw[HDR_LEN];
	unsigned hdr_got;
	bool have_hdr;
	struct hdr h;

	uint64_t rx_off; /* stream bytes received and verified */
	uint64_t tx_off; /* stream bytes echoed */
	unsigned char *ring;
	size_t head, len; /* echo data is ring[head .. head+len) modulo opt.echo_buf */
	bool eof;
	int failed;   /* EXIT_* once the connection has failed */
	bool ignored; /* closed before sending a byte: a port probe, not a client */
	struct rng wr, rd;
	/*
	 * After ENOBUFS (see enobufs_retry): the bytes of the failed send not yet echoed, sent in
	 * pieces of at most retry_cap before sizes are drawn at random again.  Writer only.
	 */
	size_t retry_left, retry_cap;

	/* blocking mode: reader and writer threads share the ring */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
};

static struct {
	pthread_mutex_t lock;
	uint64_t done;	 /* connections finished, failed or not */
	uint64_t failed; /* of which failed */
	uint64_t bytes;	 /* stream bytes of the successful ones */
	uint64_t active;
	int status; /* EXIT_MISMATCH wins over EXIT_SYSERR */
} srv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void __attribute__((noreturn)) server_finish(void)
{
	uint64_t enobufs = PEEK(enobufs_seen);

	pthread_mutex_lock(&exit_lock);
	pthread_mutex_lock(&srv.lock);
	if (srv.status) {
		fprintf(stderr, "sanverify: server FAILED conns=%" PRIu64 " failed=%" PRIu64 "\n",
			srv.done, srv.failed);
		quit(srv.status);
	}
	if (opt.expect_enobufs && !enobufs) {
		fprintf(stderr,
			"sanverify: server FAILED: --expect-enobufs, but no echo send failed with "
			"ENOBUFS (the streams verified: conns=%" PRIu64 " bytes=%" PRIu64 ")\n",
			srv.done, srv.bytes);
		quit(EXIT_EXPECT);
	}
	/* New fields go at the end: scripts parse "conns=.. bytes=..". */
	printf("sanverify: server ok conns=%" PRIu64 " bytes=%" PRIu64 " enobufs=%" PRIu64 "\n",
	       srv.done, srv.bytes, enobufs);
	quit(0);
}

/* The connection failed: say why now, count it when it closes. */
static void __attribute__((format(printf, 3, 4)))
s_fail(struct sconn *c, int status, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!c->failed)
		warn("%s: %s", c->who, msg);
	if (!c->failed || status == EXIT_MISMATCH)
		c->failed = status;
}

static struct sconn *s_new(int fd, const struct sockaddr *sa, socklen_t salen)
{
	static uint64_t next_id;
	struct sconn *c = xmalloc(sizeof(*c));
	char peer[64];

	memset(c, 0, sizeof(*c));
	c->id = next_id++;
	c->it.fd = c->rfd = fd;
	if (opt.dup && (c->rfd = dup(fd)) < 0)
		fail(EXIT_SYSERR, "dup: %s", strerror(errno));
	addr_str(sa, salen, peer, sizeof(peer));
	snprintf(c->who, sizeof(c->who), "server conn %" PRIu64 " from %s", c->id, peer);
	c->ring = xmalloc(opt.echo_buf);
	rng_seed(&c->rd, c->id ^ 0x73727264ULL);
	rng_seed(&c->wr, c->id ^ 0x73777274ULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_mutex_lock(&srv.lock);
	srv.active++;
	pthread_mutex_unlock(&srv.lock);
	return c;
}

/* Closed: count it, and stop the server if --conns-total is reached. */
static void s_end(struct sconn *c)
{
	bool finish = false;

	if (c->rfd != c->it.fd)
		close(c->rfd);
	pthread_mutex_lock(&srv.lock);
	srv.active--;
	if (c->ignored) {
		note("%s: closed before sending a header; not counted", c->who);
	} else {
		srv.done++;
		if (c->failed) {
			srv.failed++;
			if (!srv.status || c->failed == EXIT_MISMATCH)
				srv.status = c->failed;
		} else {
			srv.bytes += c->h.bytes;
		}
		finish = opt.conns_total && srv.done >= opt.conns_total;
	}
	pthread_mutex_unlock(&srv.lock);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c->ring);
	free(c);
	if (finish)
		server_finish();
}

/* EOF from the client: fine only after exactly the announced stream. */
static void s_eof(struct sconn *c)
{
	c->eof = true;
	if (!c->have_hdr && !c->hdr_got)
		c->ignored = true;
	else if (!c->have_hdr)
		s_fail(c, EXIT_MISMATCH, "EOF after %u bytes of the %d-byte header", c->hdr_got,
		       HDR_LEN);
	else if (c->rx_off != c->h.bytes)
		s_fail(c, EXIT_MISMATCH,
		       "stream truncated: EOF after %" PRIu64 " of %" PRIu64
		       " bytes (client conn %u)",
		       c->rx_off, c->h.bytes, c->h.conn);
}

/* A receive call returned n <= 0 (err: its errno); ST_IDLE means the connection failed. */
static enum step s_rx_error(struct sconn *c, ssize_t n, int err)
{
	if (n == 0) {
		s_eof(c);
		return ST_SHORT;
	}
	if (err == EAGAIN || err == EWOULDBLOCK)
		return ST_AGAIN;
	if (err == EINTR)
		return ST_FULL;
	s_fail(c, EXIT_SYSERR, "recv after %" PRIu64 " stream bytes: %s", c->rx_off, strerror(err));
	return ST_IDLE;
}

/* Account for a receive of n header bytes out of want asked. */
static enum step s_hdr_update(struct sconn *c, ssize_t n, size_t want, int err)
{
	const char *bad;

	if (n <= 0)
		return s_rx_error(c, n, err);
	c->hdr_got += n;
	if (c->hdr_got == HDR_LEN) {
		bad = hdr_decode(c->raw, &c->h);
		if (bad)
			s_fail(c, EXIT_MISMATCH, "stream header: %s", bad);
		else
			c->have_hdr = true;
	}
	return (size_t)n == want ? ST_FULL : ST_SHORT;
}

/* Contiguous free space at the ring's tail (call with the lock held in blocking mode). */
static size_t s_room(const struct sconn *c, unsigned char **p)
{
	size_t cap = opt.echo_buf, tail;

	if (c->len == cap)
		return 0;
	if (c->head + c->len < cap) {
		tail = c->head + c->len;
		*p = c->ring + tail;
		return cap - tail;
	}
	tail = c->head + c->len - cap;
	*p = c->ring + tail;
	return c->head - tail;
}

/* n bytes just read to p: verify before they may be echoed. */
static void s_consume(struct sconn *c, unsigned char *p, size_t n)
{
	uint64_t ok = MIN((uint64_t)n, c->h.bytes - c->rx_off);
	size_t bad = stream_check(c->h.key, c->rx_off, p, ok);
	char who[128];

	if (bad != ok) {
		snprintf(who, sizeof(who), "%s (client conn %u)", c->who, c->h.conn);
		mismatch(who, c->h.key, c->rx_off, p, n, bad);
	}
	if (n > ok)
		fail(EXIT_MISMATCH,
		     "%s (client conn %u): %" PRIu64 " extra bytes after the %" PRIu64
		     "-byte stream",
		     c->who, c->h.conn, n - ok, c->h.bytes);
	if (opt.corrupt && c->h.conn == 0 && opt.corrupt_at >= c->rx_off &&
	    opt.corrupt_at - c->rx_off < n)
		p[opt.corrupt_at - c->rx_off] ^= 0x01;
	PUBLISH(c->rx_off, c->rx_off + n);
}

/*
 * One send of echo data from p (at most avail contiguous bytes); ST_IDLE: failed with *err.
 * ENOBUFS is not a failure: *sent is -1 and the next call sends the same bytes in smaller pieces.
 */
static enum step s_tx_call(struct sconn *c, const unsigned char *p, size_t avail, ssize_t *sent,
			   int *err)
{
	size_t want = c->retry_left ? MIN(c->retry_cap, c->retry_left)
				    : rand_size(&c->wr, 1, opt.max_write);
	ssize_t n;

	if (want > avail)
		want = avail;
	n = io_send(c->it.fd, &c->wr, p, want);

	*sent = n;
	*err = errno;
	if (n >= 0) {
		c->retry_left -= MIN((size_t)n, c->retry_left);
		return (size_t)n == want ? ST_FULL : ST_SHORT;
	}
	if (would_block())
		return ST_AGAIN;
	if (errno == EINTR)
		return ST_FULL;
	if (errno == ENOBUFS) {
		if (!c->retry_left)
			c->retry_left = want;
		c->retry_cap = enobufs_retry(c->who, want);
		return ST_FULL; /* call again at once */
	}
	return ST_IDLE;
}

static void s_tx_failed(struct sconn *c, int err)
{
	s_fail(c, EXIT_SYSERR, "send after %" PRIu64 " echoed bytes: %s", c->tx_off, strerror(err));
}

static void s_advance_tx(struct sconn *c, size_t n)
{
	c->head = (c->head + n) % opt.echo_buf;
	c->len -= n;
	c->tx_off += n;
}

/* ---------------------------------------------------------------- server, nonblocking */

static enum step s_rx(struct sconn *c)
{
	unsigned char *p;
	size_t room, want;
	ssize_t n;

	if (!c->have_hdr) {
		want = HDR_LEN - c->hdr_got;
		n = io_recv(c->rfd, &c->rd, c->raw + c->hdr_got, want);
		return s_hdr_update(c, n, want, errno);
	}
	room = s_room(c, &p);
	want = MIN(rand_size(&c->rd, 1, opt.max_read), room);
	n = io_recv(c->rfd, &c->rd, p, want);
	if (n <= 0)
		return s_rx_error(c, n, errno);
	s_consume(c, p, n);
	c->len += n;
	return (size_t)n == want ? ST_FULL : ST_SHORT;
}

static enum step s_tx(struct sconn *c)
{
	ssize_t n;
	int err;
	enum step st =
		s_tx_call(c, c->ring + c->head, MIN(c->len, opt.echo_buf - c->head), &n, &err);

	if (n > 0)
		s_advance_tx(c, n);
	if (st == ST_IDLE)
		s_tx_failed(c, err);
	return st;
}

static void s_run(struct item *it)
{
	struct sconn *c = container_of(it, struct sconn, it);
	bool progress = true;

	while (progress && !c->failed) {
		progress = false;
		if (it->can_wr && c->len)
			progress |= stepped(s_tx(c), &it->can_wr);
		if (it->can_rd && !c->eof && !c->failed && c->len < opt.echo_buf)
			progress |= stepped(s_rx(c), &it->can_rd);
	}
	if (!c->failed && c->eof && !c->len) {
		/* Everything echoed: pass the EOF on. */
		if (!c->ignored && shutdown(it->fd, SHUT_WR) < 0)
			s_fail(c, EXIT_SYSERR, "shutdown(SHUT_WR): %s", strerror(errno));
		it->done = true;
	}
	if (c->failed)
		it->done = true;
	it->want = (!c->eof && c->len < opt.echo_buf ? WANT_RD : 0) | (c->len ? WANT_WR : 0);
}

static void s_fini(struct item *it)
{
	s_end(container_of(it, struct sconn, it));
}

/* A worker thread: an event loop fed new connections by the acceptor through a pipe. */
struct sworker {
	pthread_t tid;
	int pipe[2];
	struct loop loop;
	struct item pipe_item;
};

static void s_pipe_run(struct item *it)
{
	struct sworker *w = container_of(it, struct sworker, pipe_item);
	struct sconn *cs[64];
	ssize_t n;

	/* Each write is one pointer, smaller than PIPE_BUF, so reads never split one. */
	while ((n = read(it->fd, cs, sizeof(cs))) > 0) {
		for (size_t i = 0; i < n / sizeof(cs[0]); i++) {
			struct sconn *c = cs[i];

			c->it.run = s_run;
			c->it.fini = s_fini;
			c->it.want = WANT_RD;
			c->it.can_rd = c->it.can_wr = true;
			loop_add(&w->loop, &c->it);
		}
	}
	if (n == 0 || !would_block())
		fail(EXIT_SYSERR, "worker pipe: %s", n ? strerror(errno) : "EOF");
	it->can_rd = false;
	it->want = WANT_RD;
}

static void *s_worker_thread(void *arg)
{
	struct sworker *w = arg;

	for (;;)
		loop_once(&w->loop);
	return NULL;
}

/* ---------------------------------------------------------------- server, blocking */

/* Last of the two threads out closes the socket. */
static void s_put(struct sconn *c)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last) {
		close(c->it.fd);
		s_end(c);
	}
}

/* A failure seen by one thread: record it, wake the other and kick it out of any socket call. */
static void s_abort(struct sconn *c)
{
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	shutdown(c->it.fd, SHUT_RDWR);
}

static void *s_reader_thread(void *arg)
{
	struct sconn *c = arg;
	struct fdwait w;
	bool wait = true;
	enum step st;

	fdwait_init(&w, c->rfd, POLLIN);
	for (;;) {
		unsigned char *p;
		size_t room, want;
		ssize_t n;
		int err;

		if (!c->have_hdr) {
			want = HDR_LEN - c->hdr_got;
			if (wait)
				fdwait_wait(&w);
			n = io_recv(c->rfd, &c->rd, c->raw + c->hdr_got, want);
			err = errno;
			pthread_mutex_lock(&c->lock);
			st = s_hdr_update(c, n, want, err);
			if (c->failed) {
				s_abort(c);
				break;
			}
			if (c->eof) {
				pthread_cond_broadcast(&c->cond);
				pthread_mutex_unlock(&c->lock);
				break;
			}
			pthread_mutex_unlock(&c->lock);
			wait = !et_go_on(&w, st, false);
			continue;
		}
		pthread_mutex_lock(&c->lock);
		while (c->len == opt.echo_buf && !c->failed)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->failed) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		room = s_room(c, &p);
		pthread_mutex_unlock(&c->lock);

		/* The writer never touches the free region, so the read and check run unlocked. */
		want = MIN(rand_size(&c->rd, 1, opt.max_read), room);
		if (wait)
			fdwait_wait(&w);
		n = io_recv(c->rfd, &c->rd, p, want);
		err = errno;
		if (n > 0) {
			s_consume(c, p, n);
			st = (size_t)n == want ? ST_FULL : ST_SHORT;
		}
		pthread_mutex_lock(&c->lock);
		if (n > 0) {
			c->len += n;
			pthread_cond_broadcast(&c->cond);
		} else {
			st = s_rx_error(c, n, err);
		}
		if (c->failed) {
			s_abort(c);
			break;
		}
		if (c->eof) {
			pthread_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->lock);
			break;
		}
		pthread_mutex_unlock(&c->lock);
		wait = !et_go_on(&w, st, c->rx_off == c->h.bytes);
	}
	fdwait_fini(&w);
	s_put(c);
	return NULL;
}

static void *s_writer_thread(void *arg)
{
	struct sconn *c = arg;
	struct fdwait w;
	bool wait = true;

	fdwait_init(&w, c->it.fd, POLLOUT);
	for (;;) {
		const unsigned char *p;
		size_t avail;
		enum step st;
		ssize_t n;
		int err;

		pthread_mutex_lock(&c->lock);
		while (!c->len && !c->eof && !c->failed)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->failed) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		if (!c->len) {
			/* EOF and everything echoed: pass the EOF on. */
			if (!c->ignored && shutdown(c->it.fd, SHUT_WR) < 0)
				s_fail(c, EXIT_SYSERR, "shutdown(SHUT_WR): %s", strerror(errno));
			pthread_mutex_unlock(&c->lock);
			break;
		}
		p = c->ring + c->head;
		avail = MIN(c->len, opt.echo_buf - c->head);
		pthread_mutex_unlock(&c->lock);

		if (wait)
			fdwait_wait(&w);
		st = s_tx_call(c, p, avail, &n, &err);
		pthread_mutex_lock(&c->lock);
		if (st == ST_IDLE) {
			s_tx_failed(c, err);
			s_abort(c);
			break;
		}
		if (n > 0) {
			s_advance_tx(c, n);
			pthread_cond_broadcast(&c->cond);
		}
		pthread_mutex_unlock(&c->lock);
		wait = !et_go_on(&w, st, false);
	}
	fdwait_fini(&w);
	s_put(c);
	return NULL;
}

/* ---------------------------------------------------------------- server main */

static void write_port_file(unsigned port)
{
	char tmp[4096];
	FILE *f;

	/* Write then rename, so a script polling for the file never reads half a number. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", opt.port_file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0)
		fail(EXIT_SYSERR, "%s: %s", tmp, strerror(errno));
	if (rename(tmp, opt.port_file) < 0)
		fail(EXIT_SYSERR, "rename %s to %s: %s", tmp, opt.port_file, strerror(errno));
}

static int server_main(void)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct sworker *ws = NULL;
	unsigned next = 0;
	struct fdwait lw;
	int lfd, one = 1;
	char where[80];

	resolve();
	lfd = socket(opt.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		fail(EXIT_SYSERR, "socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sv_addr, sv_addrlen) < 0)
		fail(EXIT_SYSERR, "bind %s port %u: %s", opt.addr, opt.port, strerror(errno));
	if (listen(lfd, 4096) < 0)
		fail(EXIT_SYSERR, "listen: %s", strerror(errno));
	/* Always nonblocking: the acceptor drains the queue to EAGAIN after every wakeup. */
	set_nonblock(lfd);
	if (getsockname(lfd, (struct sockaddr *)&ss, &sslen) < 0)
		fail(EXIT_SYSERR, "getsockname: %s", strerror(errno));
	opt.port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						  : ((struct sockaddr_in *)&ss)->sin_port);

	if (opt.nonblock) {
		ws = xmalloc(opt.threads * sizeof(*ws));
		memset(ws, 0, opt.threads * sizeof(*ws));
		for (unsigned t = 0; t < opt.threads; t++) {
			struct sworker *w = &ws[t];

			if (pipe2(w->pipe, O_CLOEXEC) < 0)
				fail(EXIT_SYSERR, "pipe: %s", strerror(errno));
			set_nonblock(w->pipe[0]);
			loop_init(&w->loop);
			w->pipe_item.fd = w->pipe[0];
			w->pipe_item.want = WANT_RD;
			w->pipe_item.run = s_pipe_run;
			loop_add(&w->loop, &w->pipe_item);
			start_thread(&w->tid, s_worker_thread, w, true);
		}
	}

	addr_str((struct sockaddr *)&ss, sslen, where, sizeof(where));
	note("server: listening on %s (%s, %s, %s%s)", where,
	     opt.nonblock ? "nonblocking" : "blocking", wait_names[opt.wait], io_names[opt.io],
	     opt.conns_total ? "" : "; runs until SIGTERM");
	if (opt.port_file)
		write_port_file(opt.port);

	fdwait_init(&lw, lfd, POLLIN);
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		struct sconn *c;
		pthread_t tid;
		int fd;

		fd = accept4(lfd, (struct sockaddr *)&peer, &plen,
			     SOCK_CLOEXEC | (opt.nonblock ? SOCK_NONBLOCK : 0));
		if (fd < 0) {
			if (would_block())
				fdwait_wait(&lw);
			else if (errno != EINTR && errno != ECONNABORTED)
				fail(EXIT_SYSERR, "accept: %s", strerror(errno));
			continue;
		}
		c = s_new(fd, (struct sockaddr *)&peer, plen);
		if (opt.nonblock) {
			if (write(ws[next].pipe[1], &c, sizeof(c)) != sizeof(c))
				fail(EXIT_SYSERR, "worker pipe: %s", strerror(errno));
			next = (next + 1) % opt.threads;
		} else {
			c->refs = 2;
			start_thread(&tid, s_reader_thread, c, true);
			start_thread(&tid, s_writer_thread, c, true);
		}
	}
}

/* ================================================================ signals, options, main */

/* -t expired: say how far every unfinished connection got, then exit 3. */
static void __attribute__((noreturn)) timeout_exit(void)
{
	unsigned shown = 0, open = 0;

	pthread_mutex_lock(&exit_lock);
	if (opt.server) {
		fprintf(stderr,
			"sanverify: server timeout after %u s: %" PRIu64 " conns done, %" PRIu64
			" in progress%s\n",
			opt.timeout, PEEK(srv.done), PEEK(srv.active),
			opt.conns_total ? "" : " (use -t 0 for a server that runs until killed)");
		quit(EXIT_TIMEOUT);
	}
	for (unsigned i = 0; i < opt.conns; i++) {
		struct cconn *c = &cl_conns[i];
		uint64_t tx = PEEK(c->tx_off), rx = PEEK(c->rx_off);

		if (PEEK(c->closed))
			continue;
		open++;
		if (shown++ < 8)
			fprintf(stderr,
				"sanverify: client conn %u: sent %" PRIu64 ", verified %" PRIu64
				" of %" PRIu64 " bytes%s\n",
				i, tx, rx, opt.bytes,
				rx == opt.bytes
					? (opt.half_close ? ", waiting for EOF" : ", closing")
					: "");
	}
	fprintf(stderr, "sanverify: client timeout after %u s: %u of %u conns unfinished\n",
		opt.timeout, open, opt.conns);
	quit(EXIT_TIMEOUT);
}

/*
 * Every other thread blocks these signals, so they arrive here as ordinary events: no
 * async-signal-safety concerns and no EINTR in the I/O paths.
 */
static sigset_t handled;

static void *signal_thread(void *arg)
{
	int sig;

	for (;;) {
		if (sigwait(&handled, &sig))
			continue;
		if (sig == SIGALRM)
			timeout_exit();
		if (opt.server)
			server_finish();
		fail(EXIT_SYSERR, "client interrupted by %s", strsignal(sig));
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sanverify server [options]\n"
		"       sanverify client -p PORT [options]\n"
		"Stream verifier: the client sends pseudo-random streams, the server checks and\n"
		"echoes them, the client checks the echo.  See sanverify(1).\n"
		"  -4 | -6              address family (default -4)\n"
		"  -a ADDR              address (default 127.0.0.1 or ::1)\n"
		"  -p PORT              port (server: 0 = ephemeral)\n"
		"  --port-file FILE     server: write the bound port to FILE once listening\n"
		"  -c N                 client: connections (default 1)\n"
		"  -T N                 threads (-n: event loops; server: workers)\n"
		"  -b BYTES             client: stream bytes per connection, K M G suffixes (16M)\n"
		"  -s SEED              client: seed (default 1)\n"
		"  --min-write BYTES    smallest write (default 1)\n"
		"  --max-write BYTES    largest write (default 4M)\n"
		"  --max-read BYTES     largest read (default: --max-write, at most 1M)\n"
		"  --echo-buf BYTES     server: echo buffer per connection (default 1M)\n"
		"  -n                   nonblocking sockets, one event loop per thread\n"
		"  -m MODE              poll | select | epoll | epoll-et | epoll-oneshot (poll)\n"
		"  --io KIND            send | rw | msg | vec | mix: calls that move bytes (send)\n"
		"  --dup                read through a dup() of each socket\n"
		"  --half-close         client: shutdown(SHUT_WR) after the stream, expect EOF\n"
		"  --conns-total N      server: exit after N connections\n"
		"  --corrupt OFFSET     flip the byte at OFFSET of conn 0 (proves detection)\n"
		"  --expect-enobufs     fail (exit 4) unless some send failed with ENOBUFS\n"
		"  -t SECONDS           overall timeout, exit 3 (default 300, 0 = none)\n"
		"  -q                   quiet: only errors and the result line\n"
		"A send failing with ENOBUFS is counted and retried in smaller pieces (halved,\n"
		"down to 1K); the result line ends with enobufs=N.\n"
		"Exit: 0 verified, 1 data mismatch, 2 usage or system error, 3 timeout,\n"
		"4 verified but --expect-enobufs saw no ENOBUFS.\n");
}

static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("sanverify: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n(sanverify --help for usage)\n", stderr);
	va_end(ap);
	exit(EXIT_SYSERR);
}

/* A byte count with an optional K, M, G or T suffix (powers of 1024). */
static uint64_t parse_size(const char *name, const char *s)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		usage_error("%s: bad number '%s'", name, s);
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		usage_error("%s: bad suffix in '%s' (K, M, G or T)", name, s);
	}
	if (*end && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
		usage_error("%s: bad suffix in '%s' (K, M, G or T)", name, s);
	if (shift && v > (~0ULL >> shift))
		usage_error("%s: '%s' is too large", name, s);
	return (uint64_t)v << shift;
}

static unsigned parse_uint(const char *name, const char *s, unsigned lo, unsigned hi)
{
	uint64_t v = parse_size(name, s);

	if (v < lo || v > hi)
		usage_error("%s: %s out of range [%u, %u]", name, s, lo, hi);
	return v;
}

static int parse_name(const char *name, const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	usage_error("%s: unknown '%s'", name, s);
}

enum {
	O_PORT_FILE = 256,
	O_MIN_WRITE,
	O_MAX_WRITE,
	O_MAX_READ,
	O_ECHO_BUF,
	O_IO,
	O_DUP,
	O_HALF_CLOSE,
	O_CONNS_TOTAL,
	O_CORRUPT,
	O_EXPECT_ENOBUFS,
	O_HELP,
};

static void parse_args(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "port-file", required_argument, NULL, O_PORT_FILE },
		{ "min-write", required_argument, NULL, O_MIN_WRITE },
		{ "max-write", required_argument, NULL, O_MAX_WRITE },
		{ "max-read", required_argument, NULL, O_MAX_READ },
		{ "echo-buf", required_argument, NULL, O_ECHO_BUF },
		{ "io", required_argument, NULL, O_IO },
		{ "dup", no_argument, NULL, O_DUP },
		{ "half-close", no_argument, NULL, O_HALF_CLOSE },
		{ "conns-total", required_argument, NULL, O_CONNS_TOTAL },
		{ "corrupt", required_argument, NULL, O_CORRUPT },
		{ "expect-enobufs", no_argument, NULL, O_EXPECT_ENOBUFS },
		{ "help", no_argument, NULL, O_HELP },
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "conns", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 'T' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "nonblock", no_argument, NULL, 'n' },
		{ "wait", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0 },
	};
	bool have_port = false;
	int ch;

	while ((ch = getopt_long(argc, argv, "46a:p:c:T:b:s:nm:t:qh", lopts, NULL)) != -1) {
		switch (ch) {
		case '4':
			opt.family = AF_INET;
			break;
		case '6':
			opt.family = AF_INET6;
			break;
		case 'a':
			opt.addr = optarg;
			break;
		case 'p':
			opt.port = parse_uint("-p", optarg, 0, 65535);
			have_port = true;
			break;
		case O_PORT_FILE:
			opt.port_file = optarg;
			break;
		case 'c':
			opt.conns = parse_uint("-c", optarg, 1, 1000000);
			break;
		case 'T':
			opt.threads = parse_uint("-T", optarg, 1, 4096);
			break;
		case 'b':
			opt.bytes = parse_size("-b", optarg);
			break;
		case 's':
			opt.seed = parse_size("-s", optarg);
			break;
		case O_MIN_WRITE:
			opt.min_write = parse_uint("--min-write", optarg, 1, 1 << 30);
			break;
		case O_MAX_WRITE:
			opt.max_write = parse_uint("--max-write", optarg, 1, 1 << 30);
			break;
		case O_MAX_READ:
			opt.max_read = parse_uint("--max-read", optarg, 1, 1 << 30);
			break;
		case O_ECHO_BUF:
			opt.echo_buf = parse_uint("--echo-buf", optarg, 1, 1 << 30);
			break;
		case 'n':
			opt.nonblock = true;
			break;
		case 'm':
			opt.wait = parse_name("-m", optarg, wait_names, 5);
			break;
		case O_IO:
			opt.io = parse_name("--io", optarg, io_names, 5);
			break;
		case O_DUP:
			opt.dup = true;
			break;
		case O_HALF_CLOSE:
			opt.half_close = true;
			break;
		case O_CONNS_TOTAL:
			opt.conns_total = parse_size("--conns-total", optarg);
			break;
		case O_CORRUPT:
			opt.corrupt = true;
			opt.corrupt_at = parse_size("--corrupt", optarg);
			break;
		case O_EXPECT_ENOBUFS:
			opt.expect_enobufs = true;
			break;
		case 't':
			opt.timeout = parse_uint("-t", optarg, 0, 100000000);
			break;
		case 'q':
			opt.quiet = true;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage_error("bad option");
		}
	}
	if (optind != argc - 1)
		usage_error("expected exactly one of 'client' or 'server'");
	if (!strcmp(argv[optind], "server"))
		opt.server = true;
	else if (strcmp(argv[optind], "client"))
		usage_error("unknown mode '%s' (client or server)", argv[optind]);
	if (!opt.server && (!have_port || !opt.port))
		usage_error("client: -p PORT is required");
	if (opt.min_write > opt.max_write)
		usage_error("--min-write %zu is larger than --max-write %zu", opt.min_write,
			    opt.max_write);
	/* Reads past about 1 MiB gain nothing on loopback and cost cache and memory. */
	if (!opt.max_read)
		opt.max_read = MIN(opt.max_write, (size_t)MiB);
	if (!opt.addr)
		opt.addr = opt.family == AF_INET6 ? "::1" : "127.0.0.1";
}

int main(int argc, char **argv)
{
	pthread_t tid;

	parse_args(argc, argv);
	crc_init();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&handled);
	sigaddset(&handled, SIGALRM);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &handled, NULL);
	start_thread(&tid, signal_thread, NULL, true);
	if (opt.timeout)
		alarm(opt.timeout);
	return opt.server ? server_main() : client_main();
}
