/*
 * sanconnrate — short connections, for `make bench` and the server-shapes tests: each one a
 * connect, a small request, its reply (the request's bytes reversed), close.
 *
 *   sanconnrate server PORTFILE [any]        a single-process server: one connection at a time,
 *                                            requests answered until the client closes; runs
 *                                            until killed. Listens on 127.0.0.1, or with "any"
 *                                            on every address (for a client that spreads)
 *   sanconnrate client PORT SECONDS SIZE REQS [NADDR]
 *                                            connections in a loop for SECONDS, each with REQS
 *                                            requests of SIZE bytes; every reply is checked.
 *                                            NADDR > 1: the connections go to 127.0.0.1 ..
 *                                            127.0.0.NADDR in turn (the server with "any")
 *
 * Why spread: every connection the client closes first leaves its port in TIME_WAIT, and on
 * loopback (tcp_tw_reuse=2) a port can be taken again only a second later; with the default
 * ephemeral range connect() then finds about 14,000 ports a second (it prefers one parity of the
 * range), and a loop faster than that measures the kernel's port supply, the same for every mode
 * (the earlier `make bench` runs: 14,100-14,200 connections/s for kernel TCP, pass-through and
 * the switch alike). A port is in TIME_WAIT for one destination only: N destinations give the
 * loop N times the supply, and no other system call than over one. `make bench` uses 200: with
 * 16, the 100,000 and more connections a bench leaves in TIME_WAIT (60 s each) filled most of the
 * 16 x 28,232 pairs, and connect()'s search for a free one took a varying share of the loop
 * (rounds 0.91-0.98 of kernel TCP where 200 destinations give 0.97-0.98).
 *
 * The client prints one line:
 *   conns=N secs=S rate=R first_p50_us=A first_p99_us=B second_p50_us=C third_p50_us=D
 * rate: connections per second; first_*: from the start of connect() to the whole first reply,
 * the cost of a new connection's first request; second_ and third_: from the request's first
 * byte to its whole reply (0 with fewer requests): under the library's default policy the
 * second is the one that switches a keep-alive connection, the third the first switched. Exit 1
 * at the first wrong byte or failed call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tool_io.h"

#define SIZE_MAX_REQ 65536

static int serve(int c)
{
	static char buf[SIZE_MAX_REQ];
	uint32_t len;

	for (;;) {
		ssize_t r = recv(c, &len, sizeof(len), MSG_WAITALL);

		if (r == 0)
			return 0;
		if (r != (ssize_t)sizeof(len))
			return -1;
		len = ntohl(len);
		if (len > sizeof(buf) || io_all(c, buf, len, 1) < 0)
			return -1;
		for (uint32_t i = 0; i < len / 2; i++) {
			char t = buf[i];

			buf[i] = buf[len - 1 - i];
			buf[len - 1 - i] = t;
		}
		if (io_all(c, buf, len, 0) < 0)
			return -1;
	}
}

static int server(const char *portfile, int any)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(any ? INADDR_ANY : INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	char tmp[4096];
	FILE *f;

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 128) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		perror("sanconnrate server");
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, portfile)) {
		perror("sanconnrate server: port file");
		return 1;
	}
	for (;;) {
		int c = accept(l, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			perror("accept");
			return 1;
		}
		(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (serve(c) < 0)
			fprintf(stderr, "sanconnrate server: a connection failed: %s\n", strerror(errno));
		close(c);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int client(int port, double secs, size_t size, int reqs, int naddr)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	size_t cap = 1 << 16, n = 0;
	double *first = malloc(cap * sizeof(*first));
	double *second = malloc(cap * sizeof(*second)), *third = malloc(cap * sizeof(*third));
	static char req[SIZE_MAX_REQ + 4], back[SIZE_MAX_REQ];
	double t0 = tool_now_s(), end = t0 + secs, t;
	uint32_t len = htonl((uint32_t)size);
	int one = 1;

	if (!first || !second || !third || size > SIZE_MAX_REQ)
		return 2;
	memcpy(req, &len, 4);
	for (size_t i = 0; i < size; i++)
		req[4 + i] = (char)('a' + i % 26);
	while ((t = tool_now_s()) < end) {
		int c = socket(AF_INET, SOCK_STREAM, 0);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)(naddr > 1 ? n % (size_t)naddr : 0));

		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("sanconnrate client: connect");
			return 1;
		}
		(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (n == cap) {
			double *m1 = realloc(first, 2 * cap * sizeof(*first));
			double *m2 = m1 ? realloc(second, 2 * cap * sizeof(*second)) : NULL;
			double *m3 = m2 ? realloc(third, 2 * cap * sizeof(*third)) : NULL;

			if (!m3)
				return 2;
			first = m1;
			second = m2;
			third = m3;
			cap *= 2;
		}
		second[n] = third[n] = 0;
		for (int k = 0; k < reqs; k++) {
			double tk = tool_now_s();

			int sent;

			errno = 0; /* (io_all leaves it as it is at the end of the stream) */
			sent = io_all(c, req, 4 + size, 0) == 0;
			if (!sent || io_all(c, back, size, 1) < 0) {
				fprintf(stderr, "sanconnrate client: request %d of connection %zu, %s: %s\n",
					k + 1, n + 1, sent ? "its reply" : "its send",
					errno ? strerror(errno) : "end of stream");
				return 1;
			}
			for (size_t i = 0; i < size; i++)
				if (back[i] != req[4 + size - 1 - i]) {
					fprintf(stderr, "sanconnrate client: WRONG reply byte %zu\n", i);
					return 1;
				}
			if (k == 0)
				first[n] = (tool_now_s() - t) * 1e6;
			else if (k == 1)
				second[n] = (tool_now_s() - tk) * 1e6;
			else if (k == 2)
				third[n] = (tool_now_s() - tk) * 1e6;
		}
		n++;
		close(c);
	}
	t = tool_now_s() - t0;
	qsort(first, n, sizeof(*first), cmp_d);
	qsort(second, n, sizeof(*second), cmp_d);
	qsort(third, n, sizeof(*third), cmp_d);
	printf("conns=%zu secs=%.3f rate=%.1f first_p50_us=%.1f first_p99_us=%.1f second_p50_us=%.1f "
	       "third_p50_us=%.1f\n",
	       n, t, (double)n / t, n ? first[n / 2] : 0.0, n ? first[n * 99 / 100] : 0.0,
	       n ? second[n / 2] : 0.0, n ? third[n / 2] : 0.0);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || (argc == 4 && !strcmp(argv[3], "any"))) && !strcmp(argv[1], "server"))
		return server(argv[2], argc == 4);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), atof(argv[3]), (size_t)atol(argv[4]), atoi(argv[5]),
			      argc == 7 ? atoi(argv[6]) : 1);
	fprintf(stderr, "usage: sanconnrate server PORTFILE [any] | client PORT SECONDS SIZE REQS [NADDR]\n");
	return 2;
}
