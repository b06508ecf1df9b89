/*
 * sanquick — the server of t_switch_verbs_listen (tests/rxe): a new process that listens, takes
 * one connection, reads it to its end and answers with a digest of what came.
 *
 *   sanquick ADDR PORT      bind ADDR:PORT (0: an ephemeral port), listen, print the port on
 *                           stdout (a line) the moment listen() has returned, accept one
 *                           connection, read it to EOF, answer with the CRC-32 of everything
 *                           read (zlib's, 8 hex digits and a newline), close, exit 0
 *
 * Its listen() is the process's first, the one that loads rdma-core under the preload: the test
 * is whether a client connecting that moment is switched. A program rather than a script, since
 * what the test repeats 30 times is that moment, not an interpreter's start (seconds each in the
 * emulated guest, where this one starts in a tenth of that). The client is quick_listen.py.
 * Exit 1 at any failed call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tool_io.h"

static int fail(const char *what)
{
	fprintf(stderr, "sanquick: %s: %s\n", what, strerror(errno));
	return 1;
}

/* CRC-32 (reflected polynomial 0xedb88320, as zlib.crc32) of N bytes at P, continuing CRC. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	static unsigned char buf[1 << 17];
	char line[16];
	uint32_t crc = 0;
	int l, c;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: sanquick ADDR PORT\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[2]));
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		return fail("listen");
	if (printf("%u\n", ntohs(a.sin_port)) < 0 || fflush(stdout))
		return fail("stdout");
	c = accept(l, NULL, NULL);
	if (c < 0)
		return fail("accept");
	for (;;) {
		ssize_t r = recv(c, buf, sizeof(buf), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail("recv");
		if (r == 0)
			break;
		crc = crc32_update(crc, buf, (size_t)r);
	}
	snprintf(line, sizeof(line), "%08x\n", crc);
	if (io_all(c, line, strlen(line), 0))
		return fail("send");
	close(c);
	close(l);
	return 0;
}
