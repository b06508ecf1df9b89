/* tests/unit: core/san_forked.c — the kernel's counts of a stream, and who else holds a socket. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_forked.h"
#include "tests/unit/suites.h"

struct lpair {
	int lfd, cfd, sfd;
};

static void lpair_open(struct lpair *p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(p->lfd, 0);
	ck_assert_int_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(p->lfd, 4), 0);
	ck_assert_int_eq(getsockname(p->lfd, (struct sockaddr *)&a, &len), 0);
	p->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(p->cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	p->sfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(p->sfd, 0);
}

static void lpair_close(struct lpair *p)
{
	close(p->cfd);
	close(p->sfd);
	close(p->lfd);
}

static uint64_t inode_of(int fd)
{
	struct stat st;

	ck_assert_int_eq(fstat(fd, &st), 0);
	return (uint64_t)st.st_ino;
}

static void send_all(int fd, size_t n)
{
	static char buf[65536];

	while (n) {
		ssize_t r = send(fd, buf, n < sizeof(buf) ? n : sizeof(buf), 0);

		ck_assert_int_gt(r, 0);
		n -= (size_t)r;
	}
}

static void recv_n(int fd, size_t n)
{
	static char buf[65536];

	while (n) {
		ssize_t r = recv(fd, buf, n < sizeof(buf) ? n : sizeof(buf), 0);

		ck_assert_int_gt(r, 0);
		n -= (size_t)r;
	}
}

/*
 * The counts move by exactly what the application moved, each way, whatever is still queued in
 * either kernel (bytes sent and not yet read, bytes received and not yet read), from a base
 * taken before: the constant of the connection's life (the SYN) drops out.
 */
START_TEST(test_kernel_counts)
{
	uint64_t ctx0, crx0, stx0, srx0, ctx, crx, stx, srx;
	struct lpair p;

	lpair_open(&p);
	ck_assert_int_eq(san_forked_kernel_counts(p.cfd, &ctx0, &crx0), 0);
	ck_assert_int_eq(san_forked_kernel_counts(p.sfd, &stx0, &srx0), 0);
	send_all(p.cfd, 100000);
	recv_n(p.sfd, 40000); /* 60000 stay queued at the server */
	send_all(p.sfd, 5000);
	recv_n(p.cfd, 3000); /* 2000 stay queued at the client */
	ck_assert_int_eq(san_forked_kernel_counts(p.cfd, &ctx, &crx), 0);
	ck_assert_int_eq(san_forked_kernel_counts(p.sfd, &stx, &srx), 0);
	ck_assert_uint_eq(ctx - ctx0, 100000);
	ck_assert_uint_eq(crx - crx0, 3000);
	ck_assert_uint_eq(stx - stx0, 5000);
	ck_assert_uint_eq(srx - srx0, 40000);
	/* a listener has no stream (SIOCINQ: EINVAL); not a TCP socket; no socket */
	ck_assert_int_lt(san_forked_kernel_counts(p.lfd, &ctx, &crx), 0);
	{
		int u[2];

		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, u), 0);
		ck_assert_int_lt(san_forked_kernel_counts(u[0], &ctx, &crx), 0);
		close(u[0]);
		close(u[1]);
	}
	ck_assert_int_lt(san_forked_kernel_counts(-1, &ctx, &crx), 0);
	lpair_close(&p);
}
END_TEST

/* A child that keeps (or closes) its copy of fd, then waits for a byte on @go and exits. */
static pid_t holder(int fd, bool keep, int go, int ready)
{
	pid_t pid = fork();
	char c;

	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	if (!keep)
		close(fd);
	if (write(ready, "r", 1) != 1 || read(go, &c, 1) < 0)
		_exit(1);
	_exit(0);
}

static void reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/*
 * A child holds our socket: 1. It closes its copy: 0. A socket nobody else ever held: 0. And
 * from a child's side: a parent, or a sibling (the parent closed its copy), that holds it: 1.
 */
START_TEST(test_others_hold)
{
	int go[2], ready[2], res[2], gob[2];
	struct lpair p;
	uint64_t ino;
	pid_t a, b;
	char c;

	lpair_open(&p);
	ino = inode_of(p.sfd);
	ck_assert_int_eq(san_forked_others_hold(ino), 0);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(ready), 0);

	a = holder(p.sfd, true, go[0], ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	ck_assert_int_eq(san_forked_others_hold(ino), 1);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	reap(a);
	ck_assert_int_eq(san_forked_others_hold(ino), 0);
	a = holder(p.sfd, false, go[0], ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	ck_assert_int_eq(san_forked_others_hold(ino), 0);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	reap(a);

	/* the child's view: its parent holds it; then only its sibling does */
	ck_assert_int_eq(pipe(res), 0);
	ck_assert_int_eq(pipe(gob), 0);
	a = holder(p.sfd, true, go[0], ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	b = fork();
	ck_assert_int_ge(b, 0);
	if (b == 0) {
		char r = (char)('0' + san_forked_others_hold(ino));

		/* then, told that the parent closed its copy: its sibling still holds it */
		if (write(res[1], &r, 1) != 1 || read(gob[0], &c, 1) != 1)
			_exit(1);
		r = (char)('0' + san_forked_others_hold(ino));
		close(p.sfd);
		_exit(write(res[1], &r, 1) == 1 ? 0 : 1);
	}
	ck_assert_int_eq(read(res[0], &c, 1), 1);
	ck_assert_int_eq(c, '1');
	close(p.sfd);
	ck_assert_int_eq(write(gob[1], "g", 1), 1);
	ck_assert_int_eq(read(res[0], &c, 1), 1);
	ck_assert_int_eq(c, '1');
	reap(b);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	reap(a);
	close(p.cfd);
	close(p.lfd);
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	close(res[0]);
	close(res[1]);
	close(gob[0]);
	close(gob[1]);
}
END_TEST

Suite *make_forked_suite(void)
{
	Suite *s = suite_create("forked");
	TCase *tc = tcase_create("forked");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_kernel_counts);
	tcase_add_test(tc, test_others_hold);
	suite_add_tcase(s, tc);
	return s;
}
