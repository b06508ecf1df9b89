/*
 * tests/tools/sansigstale — a signal handler that ran during one connection's upgrade must not
 * end a later call on another connection (tests/e2e/t_edge_signal_stale.sh).
 *
 *   sansigstale      print two result lines
 *
 * The process forks a peer that listens and accepts two connections and then only waits. The
 * parent connects both. Connection 1: nonblocking, the peer stopped (SIGSTOP), a SIGUSR1 sent
 * 200 ms into one receive. Under the preload with SANSWITCH_SWITCH_AFTER=0 that receive
 * proposes, waits for the stopped peer's answer (1 s), and its wait notes the handler's run
 * (core/san_sig.h); over kernel TCP it returns EAGAIN at once. Connection 2: one byte sent by a
 * raw system call (behind the wrappers: its upgrade is refused, it stays on TCP), then a
 * blocking receive that only SIGALRM, 2 s later, ends. Over kernel TCP that receive fails EINTR
 * after 2 s with no SIGUSR1 handler run in it; a note left from connection 1 would end it at
 * once. Lines: "c1: <result>, handler <N>x in the call" (1x under the preload: the handler ran
 * while the upgrade waited, the case tests something; 0x over kernel TCP) and "c2: <result>,
 * <when>, handler <N>x" (when: "at the alarm", 1.5 s or more into the call; "at once", under
 * 0.5 s; "early" between). Exit status 0 when it ran, 2 on a set-up error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool_io.h"

static volatile sig_atomic_t usr1_runs;
static pthread_t main_thread;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_runs++;
}

static void on_alrm(int sig)
{
	(void)sig;
}

static void *send_usr1(void *arg)
{
	(void)arg;
	usleep(200000);
	pthread_kill(main_thread, SIGUSR1);
	return NULL;
}

static void die(const char *what)
{
	fprintf(stderr, "sansigstale: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* "-1 EAGAIN" / "N bytes" */
static const char *result(ssize_t r, int err, char *buf, size_t len)
{
	if (r >= 0)
		snprintf(buf, len, "%zd bytes", r);
	else
		snprintf(buf, len, "-1 %s", err == EINTR ? "EINTR" : err == EAGAIN ? "EAGAIN" : strerror(err));
	return buf;
}

/*
 * The peer: listen on 127.0.0.1, tell the port, accept two connections, say so, then wait to be
 * killed. *ready: the pipe end that says so (a byte after both accepts).
 */
static pid_t peer(struct sockaddr_in *a, int *ready)
{
	socklen_t al = sizeof(*a);
	int p[2], l;
	pid_t pid;

	if (pipe(p) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		l = socket(AF_INET, SOCK_STREAM, 0);
		if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) < 0 ||
		    getsockname(l, (struct sockaddr *)a, &al) < 0 || listen(l, 8) < 0)
			die("listen");
		if (write(p[1], a, sizeof(*a)) != (ssize_t)sizeof(*a))
			die("write");
		if (accept(l, NULL, NULL) < 0 || accept(l, NULL, NULL) < 0)
			die("accept");
		if (write(p[1], "", 1) != 1)
			die("write");
		for (;;)
			pause();
	}
	if (read(p[0], a, sizeof(*a)) != (ssize_t)sizeof(*a))
		die("read");
	*ready = p[0];
	return pid;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sigaction sa;
	char buf[16], res[64];
	pthread_t t;
	double t0;
	ssize_t r;
	int c1, c2, e, h0, ready;
	pid_t p;

	p = peer(&a, &ready);
	c1 = socket(AF_INET, SOCK_STREAM, 0);
	c2 = socket(AF_INET, SOCK_STREAM, 0);
	if (c1 < 0 || c2 < 0 || connect(c1, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    connect(c2, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	/* both accepted (a fixed sleep was not always enough: the case then tested nothing) */
	if (read(ready, buf, 1) != 1)
		die("the peer's accepts");
	memset(&sa, 0, sizeof(sa)); /* no SA_RESTART */
	sa.sa_handler = on_usr1;
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		die("sigaction");
	sa.sa_handler = on_alrm;
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		die("sigaction");
	main_thread = pthread_self();

	if (fcntl(c1, F_SETFL, O_NONBLOCK) < 0 || kill(p, SIGSTOP) < 0)
		die("c1 set-up");
	if (pthread_create(&t, NULL, send_usr1, NULL) != 0)
		die("pthread_create");
	r = recv(c1, buf, sizeof(buf), 0);
	e = errno;
	h0 = usr1_runs;
	pthread_join(t, NULL);
	printf("c1: %s, handler %dx in the call\n", result(r, e, res, sizeof(res)), h0);
	kill(p, SIGCONT);

	if (syscall(SYS_sendto, c2, "x", 1, 0, NULL, 0) != 1)
		die("raw sendto");
	h0 = usr1_runs;
	alarm(2);
	t0 = tool_now_s();
	r = recv(c2, buf, sizeof(buf), 0);
	e = errno;
	t0 = tool_now_s() - t0;
	printf("c2: %s, %s, handler %dx\n", result(r, e, res, sizeof(res)),
	       t0 >= 1.5 ? "at the alarm" : t0 < 0.5 ? "at once" : "early", (int)(usr1_runs - h0));
	fflush(stdout);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return 0;
}
