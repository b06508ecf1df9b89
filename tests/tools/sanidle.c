/*
 * sanidle — what an idle connection costs in CPU, for `make bench`: a connection that has lived
 * (some exchanges, enough for the library's default policy to switch it) then sits idle, both
 * processes asleep, while the CPU time of the two processes (all their threads) is taken.
 *
 *   sanidle server PORTFILE            accepts one connection on 127.0.0.1 and answers each
 *                                      16-byte request with 16 bytes carrying its pid, until the
 *                                      client closes
 *   sanidle client PORT EXCHANGES SECONDS
 *                                      EXCHANGES requests, then SECONDS of sleep (the connection
 *                                      idle), then one more request (the connection still works)
 *                                      and close
 *
 * The client prints one line:
 *   idle_secs=S client_ms=A server_ms=B total_ms=C
 * the user + system CPU time (/proc/PID/stat, clock ticks: 10 ms granularity on most kernels)
 * that each process spent during the idle SECONDS. Kernel TCP's is 0: an idle socket costs
 * nothing until a packet or a timer comes; a transport that polls, or wakes on timers, shows here.
 * Exit 1 at any failed call or wrong byte.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tool_io.h"

#define MSG 16

static int fail(const char *what)
{
	fprintf(stderr, "sanidle: %s: %s\n", what, strerror(errno));
	return 1;
}

static int server(const char *portfile)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	char tmp[4096], buf[MSG];
	int l = socket(AF_INET, SOCK_STREAM, 0), c;
	FILE *f;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		return fail("listen");
	snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, portfile))
		return fail("port file");
	c = accept(l, NULL, NULL);
	if (c < 0)
		return fail("accept");
	for (;;) {
		ssize_t r = recv(c, buf, MSG, MSG_WAITALL);

		if (r == 0)
			return 0;
		if (r != MSG)
			return fail("recv");
		memset(buf, 0, MSG);
		snprintf(buf, MSG, "%ld", (long)getpid());
		if (io_all(c, buf, MSG, 0))
			return fail("send");
	}
}

/* user + system time of PID in milliseconds, or -1 */
static long cpu_ms(long pid)
{
	char path[64], line[4096], *p;
	unsigned long long ut, st;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	/* after "pid (comm) ", comm perhaps with spaces: state is field 3, utime 14, stime 15 */
	if (!ok || !(p = strrchr(line, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long)((ut + st) * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK));
}

static int exchange(int fd, long *peer)
{
	char buf[MSG] = "ping";

	if (io_all(fd, buf, MSG, 0) || io_all(fd, buf, MSG, 1))
		return -1;
	buf[MSG - 1] = 0;
	*peer = strtol(buf, NULL, 10);
	return *peer > 0 ? 0 : -1;
}

static int client(int port, int exchanges, int secs)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timespec idle = { .tv_sec = secs };
	long peer = 0, c0, s0, c1, s1;
	int fd = socket(AF_INET, SOCK_STREAM, 0), i;

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return fail("connect");
	for (i = 0; i < exchanges; i++)
		if (exchange(fd, &peer))
			return fail("exchange");
	c0 = cpu_ms(getpid());
	s0 = cpu_ms(peer);
	while (nanosleep(&idle, &idle) && errno == EINTR)
		;
	c1 = cpu_ms(getpid());
	s1 = cpu_ms(peer);
	if (c0 < 0 || s0 < 0 || c1 < 0 || s1 < 0)
		return fail("/proc/PID/stat");
	if (exchange(fd, &peer))
		return fail("exchange after the idle time");
	close(fd);
	printf("idle_secs=%d client_ms=%ld server_ms=%ld total_ms=%ld\n", secs, c1 - c0, s1 - s0,
	       c1 - c0 + s1 - s0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: sanidle server PORTFILE | sanidle client PORT EXCHANGES SECONDS\n");
	return 2;
}
