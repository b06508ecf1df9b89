/*
 * sanref — reference points for `make bench`: what this machine does without TCP, so that the
 * switched numbers can be read against the floor a same-host transport can reach. Never preloaded.
 *
 *   sanref unix-pp SIZE SECONDS     ping-pong of SIZE bytes over a UNIX-domain stream socketpair
 *                                   between two processes; prints p50_us=A p99_us=B (one-way
 *                                   latency, half a round trip: sockperf's convention)
 *   sanref unix-bw SIZE SECONDS     one process writes SIZE-byte chunks into a UNIX-domain stream
 *                                   socketpair, the other reads them; prints gbps=G (received)
 *   sanref memcpy SIZE SECONDS      memcpy() of SIZE bytes between two buffers of one process,
 *                                   over and over; prints gbps=G
 *   sanref vm-readv SIZE SECONDS    process_vm_readv() of SIZE bytes from a child's buffer (one
 *                                   copy across address spaces, the kernel's cost included);
 *                                   prints gbps=G
 *
 * memcpy and process_vm_readv are the two copies a shared-memory transport can be made of (a copy
 * into a shared ring, or one straight from the peer's memory); the UNIX socket is the kernel's
 * own same-host stream without TCP's protocol. Exit 1 on any failed call.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool_io.h"

static void die(const char *what)
{
	fprintf(stderr, "sanref: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *buffer(size_t size)
{
	char *b = aligned_alloc(4096, (size + 4095) / 4096 * 4096);

	if (!b)
		die("aligned_alloc");
	memset(b, 0x5a, size); /* touched: no page faults in the timed loops */
	return b;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double percentile(double *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

/* A socketpair and a child running SERVE on its end; the parent keeps the other end. */
static int pair_with_child(pid_t *child, void (*serve)(int fd, char *b, size_t size), char *b,
			   size_t size)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair");
	*child = fork();
	if (*child < 0)
		die("fork");
	if (*child == 0) {
		close(sv[0]);
		serve(sv[1], b, size);
		_exit(0);
	}
	close(sv[1]);
	return sv[0];
}

static void echo_until_eof(int fd, char *b, size_t size)
{
	while (io_all(fd, b, size, 1) == 0 && io_all(fd, b, size, 0) == 0)
		;
}

static void write_until_error(int fd, char *b, size_t size)
{
	while (io_all(fd, b, size, 0) == 0)
		;
}

static int unix_pp(size_t size, double secs)
{
	char *b = buffer(size);
	size_t n = 0, cap = 1 << 20;
	double *lat = malloc(cap * sizeof(*lat)), end;
	pid_t child;
	int fd = pair_with_child(&child, echo_until_eof, b, size);

	if (!lat)
		die("malloc");
	end = tool_now_s() + secs;
	for (;;) {
		double t0 = tool_now_s(), t1;

		if (io_all(fd, b, size, 0) || io_all(fd, b, size, 1))
			die("ping-pong");
		t1 = tool_now_s();
		if (n == cap) {
			cap *= 2;
			lat = realloc(lat, cap * sizeof(*lat));
			if (!lat)
				die("realloc");
		}
		lat[n++] = (t1 - t0) / 2 * 1e6;
		if (t1 >= end)
			break;
	}
	close(fd);
	waitpid(child, NULL, 0);
	qsort(lat, n, sizeof(*lat), cmp_double);
	printf("p50_us=%.3f p99_us=%.3f count=%zu\n", percentile(lat, n, 0.50),
	       percentile(lat, n, 0.99), n);
	return 0;
}

static int unix_bw(size_t size, double secs)
{
	char *b = buffer(size);
	unsigned long long bytes = 0;
	double t0, t = 0;
	pid_t child;
	int fd = pair_with_child(&child, write_until_error, b, size);

	t0 = tool_now_s();
	do {
		ssize_t r = read(fd, b, size);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("read");
		bytes += (unsigned long long)r;
		t = tool_now_s();
	} while (t - t0 < secs);
	close(fd); /* the writer's next write fails: it exits */
	waitpid(child, NULL, 0);
	printf("gbps=%.2f\n", (double)bytes * 8 / (t - t0) / 1e9);
	return 0;
}

static int copy_memcpy(size_t size, double secs)
{
	char *src = buffer(size), *dst = buffer(size);
	unsigned long long bytes = 0;
	double t0 = tool_now_s(), t;

	do {
		memcpy(dst, src, size);
		/* the copy's result is "used": the compiler may not drop or merge the calls */
		__asm__ volatile("" : : "r"(dst) : "memory");
		bytes += size;
		t = tool_now_s();
	} while (t - t0 < secs);
	printf("gbps=%.2f\n", (double)bytes * 8 / (t - t0) / 1e9);
	return 0;
}

static int copy_vm_readv(size_t size, double secs)
{
	char *src = buffer(size), *dst = buffer(size);
	unsigned long long bytes = 0;
	double t0, t = 0;
	pid_t child = fork();

	if (child < 0)
		die("fork");
	if (child == 0) { /* holds src at the same address as ours (a fork's copy) until killed */
		for (;;)
			pause();
	}
	t0 = tool_now_s();
	do {
		struct iovec local = { .iov_base = dst, .iov_len = size };
		struct iovec remote = { .iov_base = src, .iov_len = size };
		ssize_t r = process_vm_readv(child, &local, 1, &remote, 1, 0);

		if (r != (ssize_t)size) {
			kill(child, SIGKILL);
			die("process_vm_readv");
		}
		bytes += size;
		t = tool_now_s();
	} while (t - t0 < secs);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	printf("gbps=%.2f\n", (double)bytes * 8 / (t - t0) / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	size_t size;
	double secs;

	if (argc != 4 || (size = strtoul(argv[2], NULL, 10)) == 0 || (secs = atof(argv[3])) <= 0) {
		fprintf(stderr, "usage: sanref unix-pp|unix-bw|memcpy|vm-readv SIZE SECONDS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "unix-pp"))
		return unix_pp(size, secs);
	if (!strcmp(argv[1], "unix-bw"))
		return unix_bw(size, secs);
	if (!strcmp(argv[1], "memcpy"))
		return copy_memcpy(size, secs);
	if (!strcmp(argv[1], "vm-readv"))
		return copy_vm_readv(size, secs);
	fprintf(stderr, "sanref: unknown test '%s'\n", argv[1]);
	return 2;
}
