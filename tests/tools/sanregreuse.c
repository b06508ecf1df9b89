/*
 * tests/tools/sanregreuse — receive into memory that is freed, unmapped or discarded between
 * receives, and check every byte: the test of the verbs registration cache's invalidation
 * (docs/verbs-registration.md, tests/rxe/t_switch_verbs_regcache.sh).
 *
 *   sanregreuse server -a ADDR --port-file F [-r ROUNDS] [-n SIZE]
 *   sanregreuse client -a ADDR -p PORT -m MODE [-r ROUNDS] [-n SIZE]
 *
 * Per round the client gets a receive buffer as MODE says, sends one byte, receives SIZE bytes
 * and compares them with the round's pattern (which it computes itself), then lets the buffer go
 * as MODE says:
 *
 *   keep     one buffer for every round (its registration can be reused: cache hits)
 *   malloc   malloc/free per round, with glibc's mmap threshold pinned at 64 KiB: each buffer is
 *            a fresh mapping that free() unmaps, usually at the address the last one had
 *   mmap     mmap/munmap per round, likewise
 *   madvise  one buffer, madvise(MADV_DONTNEED) after each round: same address, new pages
 *   realloc  one malloc'd buffer (mmap threshold at 64 KiB), grown by realloc each round:
 *            glibc moves or grows it with its own, unseen mremap
 *   thread   a new thread per round receives into a buffer on its stack and exits: glibc
 *            gives the next thread the same stack, its pages discarded by an unseen madvise
 *   burst    one buffer; after the client's first byte the server sends every round at once
 *            (run it with --burst) and the client starts reading only a second later, so
 *            rounds wait in its receive queue (the verbs provider then READs them ahead)
 *
 * A registration that outlived its pages would send the next round's bytes into the old pages:
 * the buffer would read as zeros, and the comparison fails. The client prints how many rounds
 * got a buffer at an address an earlier round had used (the case that needs the invalidation),
 * then "sanregreuse: client ok rounds=R reused=N" or the first mismatch, exit 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "sanregreuse: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: sanregreuse server -a ADDR --port-file F [--burst] [-r ROUNDS] "
			"[-n SIZE]\n"
			"       sanregreuse client -a ADDR -p PORT -m "
			"keep|malloc|mmap|madvise|realloc|thread|burst "
			"[-r ROUNDS] [-n SIZE]\n");
	exit(2);
}

/* Byte i of round r: a xorshift stream seeded by the round, so rounds differ everywhere. */
static void pattern(uint8_t *p, size_t n, unsigned int round)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (round + 1);

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die("send");
		p += k;
		n -= (size_t)k;
	}
}

/* Large receives, as an application with a big buffer does: the whole rest each time. */
static void recv_all(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = recv(fd, p, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die("recv");
		if (k == 0) {
			fprintf(stderr, "sanregreuse: EOF with %zu bytes of the round missing\n",
				n);
			exit(1);
		}
		p += k;
		n -= (size_t)k;
	}
}

static int server(const char *addr, const char *port_file, bool burst, unsigned int rounds,
		  size_t size)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	uint8_t *buf = malloc(size), go;
	int l, c, one = 1;
	FILE *f;

	if (!buf || inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		usage();
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sin, &len))
		die("listener");
	f = fopen(port_file, "w");
	if (!f || fprintf(f, "%u\n", ntohs(sin.sin_port)) < 0 || fclose(f))
		die("port file");
	c = accept(l, NULL, NULL);
	if (c < 0)
		die("accept");
	for (unsigned int r = 0; r < rounds; r++) {
		if (!burst || r == 0)
			recv_all(c, &go, 1);
		pattern(buf, size, r);
		send_all(c, buf, size);
	}
	close(c);
	close(l);
	printf("sanregreuse: server ok rounds=%u\n", rounds);
	return 0;
}

struct round {
	int fd;
	unsigned int r;
	size_t size;
	const char *mode;
	uint8_t *buf;  /* where the round's bytes landed */
	uint8_t *want; /* the pattern, to compare with */
};

/* One round into r->buf: ask, receive, compare (exit 1 at the first wrong byte). */
static void round_recv(struct round *rd)
{
	uint8_t go = 1, *p = rd->buf;

	memset(p, 0xa5, rd->size); /* touched: mapped pages, and no leftover of the last round */
	if (strcmp(rd->mode, "burst"))
		send_all(rd->fd, &go, 1);
	recv_all(rd->fd, p, rd->size);
	pattern(rd->want, rd->size, rd->r);
	for (size_t i = 0; i < rd->size; i++)
		if (p[i] != rd->want[i]) {
			fprintf(stderr,
				"sanregreuse: round %u (buffer %p, mode %s): byte %zu is 0x%02x, "
				"expected 0x%02x\n",
				rd->r, (void *)p, rd->mode, i, p[i], rd->want[i]);
			exit(1);
		}
}

/* thread: the round on a new thread's stack; the buffer's address comes back in rd->buf. */
static void *round_thread(void *arg)
{
	struct round *rd = arg;
	uint8_t buf[rd->size];

	rd->buf = buf;
	round_recv(rd);
	return NULL;
}

static uint8_t *get_buf(const char *mode, size_t size, uint8_t *kept, unsigned int r)
{
	uint8_t *p;

	if (!strcmp(mode, "malloc"))
		return malloc(size);
	if (!strcmp(mode, "mmap")) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	if (!strcmp(mode, "realloc"))
		return realloc(kept, size + (size_t)r * 4096);
	return kept; /* keep, madvise, burst */
}

static void put_buf(const char *mode, uint8_t *p, size_t size)
{
	if (!strcmp(mode, "malloc"))
		free(p);
	else if (!strcmp(mode, "mmap") && munmap(p, size))
		die("munmap");
	else if (!strcmp(mode, "madvise") && madvise(p, size, MADV_DONTNEED))
		die("madvise");
}

static int client(const char *addr, int port, const char *mode, unsigned int rounds, size_t size)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	uint8_t *want = malloc(size), *kept = NULL, **seen = calloc(rounds, sizeof(*seen));
	bool thread = !strcmp(mode, "thread");
	pthread_attr_t attr;
	unsigned int reused = 0;
	int c;

	if (!want || !seen || inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		usage();
	if (!strcmp(mode, "malloc") || !strcmp(mode, "realloc")) {
		if (!mallopt(M_MMAP_THRESHOLD, 64 * 1024))
			die("mallopt");
	} else if (!strcmp(mode, "keep") || !strcmp(mode, "madvise") || !strcmp(mode, "burst")) {
		kept = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (kept == MAP_FAILED)
			die("mmap");
	} else if (thread) {
		if (pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, size + (1u << 20)))
			die("pthread_attr");
	} else if (strcmp(mode, "mmap")) {
		usage();
	}
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect");
	if (!strcmp(mode, "burst")) {
		uint8_t go = 1;

		send_all(c, &go, 1); /* (the first data call: the connection switches here) */
		sleep(1); /* the rounds pile up meanwhile (as many as the sender may have out) */
	}
	for (unsigned int r = 0; r < rounds; r++) {
		struct round rd = { .fd = c, .r = r, .size = size, .mode = mode, .want = want };
		pthread_t t;

		if (thread) {
			if ((errno = pthread_create(&t, &attr, round_thread, &rd)) ||
			    (errno = pthread_join(t, NULL)))
				die("thread");
		} else {
			rd.buf = get_buf(mode, size, kept, r);
			if (!rd.buf)
				die("buffer");
			if (!strcmp(mode, "realloc"))
				kept = rd.buf;
			round_recv(&rd);
			put_buf(mode, rd.buf, size);
		}
		for (unsigned int i = 0; i < r; i++)
			if (seen[i] == rd.buf) {
				reused++;
				break;
			}
		seen[r] = rd.buf;
	}
	close(c);
	printf("sanregreuse: client ok rounds=%u reused=%u\n", rounds, reused);
	return 0;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *port_file = NULL, *mode = NULL;
	bool burst = false;
	unsigned int rounds = 12;
	size_t size = 192 * 1024;
	int port = 0;

	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--burst")) {
			burst = true;
			continue;
		}
		if (!v)
			usage();
		if (!strcmp(o, "-a"))
			addr = v;
		else if (!strcmp(o, "--port-file"))
			port_file = v;
		else if (!strcmp(o, "-p"))
			port = atoi(v);
		else if (!strcmp(o, "-m"))
			mode = v;
		else if (!strcmp(o, "-r"))
			rounds = (unsigned int)atoi(v);
		else if (!strcmp(o, "-n"))
			size = (size_t)strtoul(v, NULL, 0);
		else
			usage();
		i++;
	}
	if (!addr || !rounds || size < 1)
		usage();
	if (!strcmp(argv[1], "server") && port_file)
		return server(addr, port_file, burst, rounds, size);
	if (!strcmp(argv[1], "client") && port > 0 && mode)
		return client(addr, port, mode, rounds, size);
	usage();
	return 2;
}
