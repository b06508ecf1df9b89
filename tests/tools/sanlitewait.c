/*
 * tests/tools/sanlitewait — a server's blocking receive once its client may be due, with a
 * signal (tests/e2e/t_lite_wait.sh). Under the preload with SANSWITCH_SWITCH_AFTER=4 the client
 * does not propose (its three exchanges and then one send: due only at the send that begins its
 * 5th) and the connection stays a lite candidate, whose receive after three answers waits
 * outside its gate (poll, then MSG_DONTWAIT: core/san_sock.c, lite_b_may_be_due, lite_wait_io);
 * over kernel TCP it sleeps in the kernel. Both must end the same way.
 *
 *   sanlitewait MODE     print one line: "MODE: r=<n or -1 errno> handler <N>x; then r=<...>"
 *
 * A thread of the process is the client: three one-byte exchanges, then nothing for 400 ms,
 * then 3 bytes, then a close 200 ms later; SIGALRM is blocked there, so the server's thread
 * takes it. The server, after the exchanges, arms
 * SIGALRM for 100 ms and receives:
 *   eintr     handler without SA_RESTART: -1 EINTR (then the 3 bytes)
 *   restart   SA_RESTART: the 3 bytes (then end-of-file)
 *   timeo     SO_RCVTIMEO 200 ms, no SA_RESTART: -1 EINTR, then -1 EAGAIN at the timeout
 *   waitall   SA_RESTART, MSG_WAITALL for 3 bytes: the 3 bytes (then end-of-file)
 *   peek      SA_RESTART, MSG_PEEK: the 3 bytes, then the same 3 again
 * Exit status 0 when it ran, 2 on a set-up error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tool_io.h"

static volatile sig_atomic_t hits;

static void on_alarm(int sig)
{
	(void)sig;
	hits++;
}

static struct sockaddr_in addr;

static void *client(void *arg)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	sigset_t set;
	char b;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (c < 0 || connect(c, (const struct sockaddr *)&addr, sizeof(addr)) < 0)
		return (void *)1;
	for (int i = 0; i < 3; i++)
		if (io_all(c, "q", 1, 0) < 0 || io_all(c, &b, 1, 1) < 0)
			return (void *)1;
	usleep(400000);
	if (io_all(c, "xyz", 3, 0) < 0)
		return (void *)1;
	usleep(200000);
	close(c);
	return NULL;
}

static void show(const char *what, ssize_t r, int err)
{
	if (r < 0)
		printf("%s=-1 %s", what, strerror(err));
	else
		printf("%s=%zd", what, r);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int restart = strcmp(mode, "eintr") && strcmp(mode, "timeo");
	int flags = !strcmp(mode, "waitall") ? MSG_WAITALL : !strcmp(mode, "peek") ? MSG_PEEK : 0;
	socklen_t al = sizeof(addr);
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };
	struct itimerval it = { { 0, 0 }, { 0, 100000 } };
	int l = socket(AF_INET, SOCK_STREAM, 0), s, err;
	char b[8];
	ssize_t r;
	pthread_t t;
	void *tr;

	if (strcmp(mode, "eintr") && strcmp(mode, "restart") && strcmp(mode, "timeo") &&
	    strcmp(mode, "waitall") && strcmp(mode, "peek")) {
		fprintf(stderr, "usage: sanlitewait eintr|restart|timeo|waitall|peek\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&addr, &al) < 0)
		return 2;
	if (pthread_create(&t, NULL, client, NULL))
		return 2;
	if ((s = accept(l, NULL, NULL)) < 0)
		return 2;
	for (int i = 0; i < 3; i++)
		if (io_all(s, b, 1, 1) < 0 || io_all(s, "r", 1, 0) < 0)
			return 2;
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		return 2;
	if (!strcmp(mode, "timeo")) {
		struct timeval tv = { 0, 200000 };

		if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
			return 2;
	}
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		return 2;
	r = recv(s, b, flags & MSG_WAITALL ? 3 : sizeof(b), flags);
	err = errno;
	printf("%s: ", mode);
	show("r", r, err);
	printf(" handler %dx; then ", (int)hits);
	r = recv(s, b, sizeof(b), 0);
	show("r", r, errno);
	printf("\n");
	close(s);
	if (pthread_join(t, &tr) || tr)
		return 2;
	return 0;
}
