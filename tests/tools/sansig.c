/*
 * tests/tools/sansig — how a call that sleeps ends when a signal handler runs
 * (tests/e2e/t_edge_signals.sh).
 *
 *   sansig CASE [--accept]     run one case, print "# pid P" and one result line
 *   sansig list                the case names, one a line
 *
 * The process forks: the child is the peer. The child listens on 127.0.0.1 (or SANSIG_ADDR)
 * port 0 and the parent connects to it (--accept: the parent listens and accepts, the child
 * connects; a listener is
 * always the accepting process's own: under the preload, a connection accepted by a process other
 * than the listener's creator stays TCP) and one byte goes each way (the parent's first), so that
 * under the preload the connection has switched before the case starts (the parent's stats line,
 * SANSWITCH_STATS=1, must say switched=1). Then the parent installs a SIGUSR1 handler with
 * sigaction (flags SA_RESTART or 0; "mixed" cases also install a SIGUSR2 handler without
 * SA_RESTART, a signal never sent), tells the child to start its part (a pipe), starts a timer
 * thread that sends SIGUSR1 to the parent's main thread with pthread_kill 200, 400 and 600 ms
 * later (until the call has returned), and makes the call. The child, timed from the same start,
 * acts at PEER_MS (1000 ms unless said otherwise): sends a byte, reads everything, connects,
 * accepts, or exits. So a call the kernel ends at the first signal returns after 1 handler run,
 * one the kernel restarts returns after 3, when the peer acts.
 *
 * The result line, normalized (the same over kernel TCP and the switch when the library behaves
 * as the kernel does): "<call>: <result>, handler <N>x", where result is "all" / "partial" (a
 * send: every byte, or fewer), "N bytes" / "EOF" (a receive), "N ready" / "timeout" (a wait),
 * "0" (connect, close), "fd" (accept), or "-1 <errno name>"; cases whose point is a time (a
 * socket timeout, a linger) add ", ~S.Ss" (the call's duration rounded to 0.5 s); a handler that
 * ran more than 150 ms after its signal was sent adds ", handler late (N ms)", one that ran
 * before the call began (the thread had no CPU for 200 ms) ", signal before the call". A connect that
 * failed EINTR is made again: "; again: <result>". Then "# took N ms" (the call's duration, shown
 * by the test, not compared).
 *
 * Cases ("full": the socket's send buffer filled first with nonblocking sends until they move
 * nothing for 150 ms, so the call moves no byte before it sleeps; "big": one call of 16 MiB to a
 * peer that does not read, so the call moves some bytes and then sleeps):
 *   send_block, send_block_restart, send_block_mixed: big send; the peer exits at 1500 ms.
 *   send_full, send_full_restart, send_full_mixed: 64 KiB send, full; the peer drains at 1000.
 *   write_full, writev_full_restart, sendmsg_full_restart: the same through other calls.
 *   recv_block, recv_block_restart, recv_block_mixed: recv of 100; the peer sends 1 byte at 1000.
 *   recv_block_siginterrupt: the same, the handler installed with signal() (SA_RESTART), then
 *     siginterrupt(SIGUSR1, 1) (which clears it inside libc, unseen by a sigaction wrapper).
 *   read_block, readv_block_restart, recvmsg_block_restart: the same through other calls.
 *   recv_first, recv_first_restart: the same as the connection's first data call (no exchange
 *     before: the parent reads the byte and sends one afterwards, so the connection switches).
 *   recv_waitall, recv_waitall_restart: recv of 100 with MSG_WAITALL; the peer sends 10 bytes at
 *     once and 90 at 1000.
 *   recv_timeo_restart: SO_RCVTIMEO 2 s; recv_sndtimeo_restart: SO_SNDTIMEO 2 s (not the one a
 *     receive obeys); send_timeo_restart, send_rcvtimeo_restart: the same for a full send.
 *   recv_timeo, send_full_timeo, send_block_timeo: SO_RCVTIMEO / SO_SNDTIMEO 500 ms, no signal;
 *     the peer acts at 1500.
 *   poll, poll_restart, ppoll_restart, select_restart, pselect_restart, epoll_restart,
 *     epoll_pwait_restart: wait for input (no timeout); the peer sends 1 byte at 1000.
 *   poll_out_restart, epoll_out_restart: wait for room, full; the peer drains at 1000.
 *   sendfile_block, sendfile_block_restart: big sendfile (from a memfd); the peer exits at 1500.
 *   sendfile_full, sendfile_full_restart: 64 KiB sendfile, full; the peer drains at 1000.
 *   sendfile_block_timeo, sendfile_full_timeo: big / full, SO_SNDTIMEO 500 ms, no signal.
 *   connect, connect_restart: a second listener (backlog 1) whose accept queue two connections
 *     fill: the kernel drops the SYN, the connect sleeps until the peer accepts them at 700 ms
 *     and the SYN is sent again (1 s).
 *   accept, accept_restart: accept on a second listener; the peer connects at 1000.
 *   close_linger, close_linger_restart: SO_LINGER {1, 3}, full, close(); the peer drains at 1500.
 *   close_linger_timeout: SO_LINGER {1, 1}, full, close(), no signal; the peer drains at 2500.
 *   close_linger_wait: SO_LINGER {1, 5}, full, close(), no signal; the peer drains at 1000.
 * With its line printed, the parent kills the peer (SIGKILL; the first-call cases wait for it to
 * read their byte and end) and exits.
 * Exit status 0 when the case ran (whatever its result), 2 on a set-up error. Every process ends
 * within 10 s (alarm: a call that never returns ends the parent by SIGALRM, no result line).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG (16u << 20)
#define SMALL (64u << 10)

enum call {
	C_SEND,
	C_WRITE,
	C_WRITEV,
	C_SENDMSG,
	C_RECV,
	C_READ,
	C_READV,
	C_RECVMSG,
	C_POLL,
	C_PPOLL,
	C_SELECT,
	C_PSELECT,
	C_EPOLL,
	C_EPOLL_PWAIT,
	C_SENDFILE,
	C_CONNECT,
	C_ACCEPT,
	C_CLOSE,
};

enum peer {
	P_EXIT,	   /* exit at ms without reading */
	P_SEND,	   /* send 1 byte at ms, then read until the end */
	P_SPLIT,   /* send 10 bytes at once, 90 at ms, then read until the end */
	P_DRAIN,   /* read until the end from ms on */
	P_ACCEPT,  /* accept the second listener's 3 connections from ms on */
	P_CONNECT, /* connect to the second listener at ms */
};

struct kase {
	const char *name;
	enum call call;
	int flags; /* SA_RESTART or 0, or BY_SIGINTERRUPT */
	int mixed; /* a SIGUSR2 handler without SA_RESTART too */
	int big;   /* a send of BIG bytes (else SMALL, after a fill) */
	int full;  /* fill the send buffer first */
	int first; /* no exchange before the case */
	int out;   /* a wait for room (else for input) */
	int waitall;
	int rcvtimeo_ms, sndtimeo_ms;
	int linger_s;
	int nsig;  /* signals sent (200 ms apart from 200 ms on) */
	int timed; /* print the duration */
	enum peer peer;
	int peer_ms;
};

#define R SA_RESTART
#define BY_SIGINTERRUPT (-1) /* flags: signal(), then siginterrupt(sig, 1) */
static const struct kase kases[] = {
	{ "send_block", C_SEND, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_EXIT, 1500 },
	{ "send_block_restart", C_SEND, R, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_EXIT, 1500 },
	{ "send_block_mixed", C_SEND, R, 1, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_EXIT, 1500 },
	{ "send_full", C_SEND, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "send_full_restart", C_SEND, R, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "send_full_mixed", C_SEND, R, 1, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "write_full", C_WRITE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "writev_full_restart", C_WRITEV, R, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "sendmsg_full_restart", C_SENDMSG, R, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "recv_block", C_RECV, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_block_restart", C_RECV, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_block_mixed", C_RECV, R, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_block_siginterrupt", C_RECV, BY_SIGINTERRUPT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0,
	  P_SEND, 1000 },
	{ "read_block", C_READ, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "readv_block_restart", C_READV, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recvmsg_block_restart", C_RECVMSG, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_first", C_RECV, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_first_restart", C_RECV, R, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_waitall", C_RECV, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, P_SPLIT, 1000 },
	{ "recv_waitall_restart", C_RECV, R, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, P_SPLIT, 1000 },
	{ "recv_timeo_restart", C_RECV, R, 0, 0, 0, 0, 0, 0, 2000, 0, 0, 3, 0, P_SEND, 1000 },
	{ "recv_sndtimeo_restart", C_RECV, R, 0, 0, 0, 0, 0, 0, 0, 2000, 0, 3, 0, P_SEND, 1000 },
	{ "send_timeo_restart", C_SEND, R, 0, 0, 1, 0, 0, 0, 0, 2000, 0, 3, 0, P_DRAIN, 1000 },
	{ "send_rcvtimeo_restart", C_SEND, R, 0, 0, 1, 0, 0, 0, 2000, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "recv_timeo", C_RECV, R, 0, 0, 0, 0, 0, 0, 500, 0, 0, 0, 1, P_SEND, 1500 },
	{ "send_full_timeo", C_SEND, R, 0, 0, 1, 0, 0, 0, 0, 500, 0, 0, 1, P_DRAIN, 1500 },
	{ "send_block_timeo", C_SEND, R, 0, 1, 0, 0, 0, 0, 0, 500, 0, 0, 1, P_EXIT, 1500 },
	{ "poll", C_POLL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "poll_restart", C_POLL, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "ppoll_restart", C_PPOLL, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "select_restart", C_SELECT, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "pselect_restart", C_PSELECT, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "epoll_restart", C_EPOLL, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "epoll_pwait_restart", C_EPOLL_PWAIT, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_SEND, 1000 },
	{ "poll_out_restart", C_POLL, R, 0, 0, 1, 0, 1, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "epoll_out_restart", C_EPOLL, R, 0, 0, 1, 0, 1, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "sendfile_block", C_SENDFILE, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_EXIT, 1500 },
	{ "sendfile_block_restart", C_SENDFILE, R, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_EXIT, 1500 },
	{ "sendfile_full", C_SENDFILE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "sendfile_full_restart", C_SENDFILE, R, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, P_DRAIN, 1000 },
	{ "sendfile_block_timeo", C_SENDFILE, R, 0, 1, 0, 0, 0, 0, 0, 500, 0, 0, 1, P_EXIT, 1500 },
	{ "sendfile_full_timeo", C_SENDFILE, R, 0, 0, 1, 0, 0, 0, 0, 500, 0, 0, 1, P_DRAIN, 1500 },
	{ "connect", C_CONNECT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_ACCEPT, 700 },
	{ "connect_restart", C_CONNECT, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_ACCEPT, 700 },
	{ "accept", C_ACCEPT, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_CONNECT, 1000 },
	{ "accept_restart", C_ACCEPT, R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, P_CONNECT, 1000 },
	{ "close_linger", C_CLOSE, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3, 3, 0, P_DRAIN, 1500 },
	{ "close_linger_restart", C_CLOSE, R, 0, 0, 1, 0, 0, 0, 0, 0, 3, 3, 0, P_DRAIN, 1500 },
	{ "close_linger_timeout", C_CLOSE, R, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, P_DRAIN, 2500 },
	{ "close_linger_wait", C_CLOSE, R, 0, 0, 1, 0, 0, 0, 0, 0, 5, 0, 1, P_DRAIN, 1000 },
};
#undef R

static pthread_t main_thr;
static volatile sig_atomic_t hits;
static _Atomic long long sent_ns, late_ns;
static _Atomic int done;
static int nsig;

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "sansig: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void on_sig(int sig)
{
	int e = errno;
	long long s = atomic_load(&sent_ns), d = now_ns() - s;

	(void)sig;
	if (s && d > atomic_load(&late_ns))
		atomic_store(&late_ns, d);
	hits++;
	errno = e;
}

static void sleep_until(long long t)
{
	struct timespec ts = { (time_t)(t / 1000000000LL), (long)(t % 1000000000LL) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static long long t_start;

static void *timer_main(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (int i = 0; i < nsig; i++) {
		sleep_until(t_start + (200LL + 200LL * i) * 1000000LL);
		if (atomic_load(&done))
			break;
		atomic_store(&sent_ns, now_ns());
		pthread_kill(main_thr, SIGUSR1);
	}
	return NULL;
}

static void handler(int sig, int flags)
{
	struct sigaction sa;

	if (flags == BY_SIGINTERRUPT) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		if (signal(sig, on_sig) == SIG_ERR || siginterrupt(sig, 1) < 0)
			die("signal");
#pragma GCC diagnostic pop
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) < 0)
		die("sigaction");
}

static const char *ename(int e)
{
	switch (e) {
	case EINTR:
		return "EINTR";
	case EAGAIN:
		return "EAGAIN";
	case ECONNRESET:
		return "ECONNRESET";
	case EPIPE:
		return "EPIPE";
	case EALREADY:
		return "EALREADY";
	case EINPROGRESS:
		return "EINPROGRESS";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case EISCONN:
		return "EISCONN";
	case ENOTCONN:
		return "ENOTCONN";
	default:
		return strerrorname_np(e) ? strerrorname_np(e) : "E?";
	}
}

/* 127.0.0.1, or SANSIG_ADDR (an IPv4 address of this host: tests/rxe runs the cases over verbs) */
static struct sockaddr_in loop_addr(int port)
{
	const char *env = getenv("SANSIG_ADDR");
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (env && *env && inet_pton(AF_INET, env, &a.sin_addr) != 1) {
		fprintf(stderr, "sansig: SANSIG_ADDR=%s is not an IPv4 address\n", env);
		exit(2);
	}
	return a;
}

static int listener(int backlog, int *port)
{
	struct sockaddr_in a = loop_addr(0);
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		die("listener");
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_to(int port)
{
	struct sockaddr_in a = loop_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		if (errno != EINTR)
			die("connect");
	return fd;
}

static int accept_on(int l)
{
	int fd;

	while ((fd = accept(l, NULL, NULL)) < 0)
		if (errno != EINTR)
			die("accept");
	return fd;
}

static void put1(int fd)
{
	char c = 'x';

	while (send(fd, &c, 1, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			die("send of one byte");
}

static void get1(int fd)
{
	char c;
	ssize_t n;

	while ((n = recv(fd, &c, 1, 0)) < 0)
		if (errno != EINTR)
			die("recv of one byte");
	if (n != 1) {
		fprintf(stderr, "sansig: EOF where one byte was due\n");
		exit(2);
	}
}

/* Read until the end (EOF or an error). */
static void drain(int fd)
{
	static char buf[1 << 16];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) != 0)
		if (n < 0 && errno != EINTR)
			break;
}

/* Fill the send buffer: nonblocking sends until three rounds 50 ms apart move nothing. */
static void fill(int fd)
{
	static char buf[1 << 16];
	int quiet = 0;

	while (quiet < 3) {
		long moved = 0;
		ssize_t n;

		while ((n = send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
			moved += n;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			die("fill");
		quiet = moved ? 0 : quiet + 1;
		usleep(50000);
	}
}

static void peer(const struct kase *k, int fd, int go, int l2, int port2)
{
	char c;
	long long t0;
	int a[3], i;

	alarm(10);
	signal(SIGPIPE, SIG_IGN);
	if (read(go, &c, 1) != 1)
		_exit(0); /* the parent failed before the case */
	t0 = now_ns();
	if (k->peer == P_SPLIT) {
		static const char ten[10];

		if (send(fd, ten, sizeof(ten), MSG_NOSIGNAL) < 0)
			die("peer send");
	}
	sleep_until(t0 + k->peer_ms * 1000000LL);
	switch (k->peer) {
	case P_EXIT:
		_exit(0);
	case P_SEND:
		(void)send(fd, "y", 1, MSG_NOSIGNAL);
		break;
	case P_SPLIT: {
		static const char ninety[90];

		(void)send(fd, ninety, sizeof(ninety), MSG_NOSIGNAL);
		break;
	}
	case P_DRAIN:
		break;
	case P_ACCEPT:
		for (i = 0; i < 3; i++)
			a[i] = accept_on(l2);
		break;
	case P_CONNECT: {
		struct sockaddr_in sa = loop_addr(port2);
		int s = socket(AF_INET, SOCK_STREAM, 0);

		(void)connect(s, (struct sockaddr *)&sa, sizeof(sa));
		break;
	}
	}
	(void)a;
	drain(fd);
	_exit(0);
}

static void line(const struct kase *k, const char *call, const char *res, long long t0,
		 long long t1, int h, long long late, int early)
{
	printf("%s: %s, handler %dx", call, res, h);
	if (k->timed) {
		long long half = (t1 - t0 + 250000000LL) / 500000000LL; /* in 0.5 s, rounded */

		printf(", ~%lld.%llds", half / 2, half % 2 * 5);
	}
	if (late > 150000000LL)
		printf(", handler late (%lld ms)", late / 1000000LL);
	if (early)
		printf(", signal before the call");
}

static void sent(char *res, size_t n, ssize_t r, size_t want)
{
	if (r < 0)
		snprintf(res, n, "-1 %s", ename(errno));
	else
		snprintf(res, n, "%s", (size_t)r == want ? "all" : r ? "partial" : "0");
}

static void got(char *res, size_t n, ssize_t r)
{
	if (r < 0)
		snprintf(res, n, "-1 %s", ename(errno));
	else if (r == 0)
		snprintf(res, n, "EOF");
	else
		snprintf(res, n, "%zd byte%s", r, r == 1 ? "" : "s");
}

static void ready(char *res, size_t n, int r)
{
	if (r < 0)
		snprintf(res, n, "-1 %s", ename(errno));
	else if (r == 0)
		snprintf(res, n, "timeout");
	else
		snprintf(res, n, "%d ready", r);
}

static int run(const struct kase *k, int accept_role)
{
	static char buf[BIG];
	int port, port2 = 0, l2 = -1, lst, gop[2], pp[2], fd, ep = -1, mfd = -1,
		  fill_c[2] = { -1, -1 };
	size_t want = k->big ? BIG : SMALL;
	char res[160], again[80] = "";
	const char *call = "";
	long long t0, t1 = 0, late;
	pthread_t th;
	pid_t child;
	int h = 0, st, captured = 0, early;
	ssize_t r = 0;

	signal(SIGPIPE, SIG_IGN);
	/*
	 * Each listener belongs to the process that accepts on it (under the preload, a listener's
	 * side channel is its creator's, and a connection another process accepted stays TCP).
	 */
	lst = accept_role ? listener(16, &port) : -1;
	if (k->call == C_ACCEPT)
		l2 = listener(16, &port2);
	if (pipe(gop) < 0 || pipe(pp) < 0)
		die("pipe");
	printf("# pid %d\n", (int)getpid());
	fflush(stdout);
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(gop[1]);
		close(pp[0]);
		{
			int ports[2] = { 0, 0 };

			if (!accept_role)
				lst = listener(16, &ports[0]);
			if (k->call == C_CONNECT)
				l2 = listener(1, &ports[1]);
			if (write(pp[1], ports, sizeof(ports)) != (ssize_t)sizeof(ports))
				die("write of the ports");
		}
		if (accept_role)
			fd = connect_to(port);
		else
			fd = accept_on(lst);
		close(lst);
		if (k->call == C_ACCEPT)
			close(l2);
		if (!k->first) {
			get1(fd);
			put1(fd);
		}
		peer(k, fd, gop[0], l2, port2);
	}
	close(gop[0]);
	close(pp[1]);
	alarm(10);
	{
		int ports[2];

		if (read(pp[0], ports, sizeof(ports)) != (ssize_t)sizeof(ports))
			die("read of the ports");
		if (!accept_role)
			port = ports[0];
		if (k->call == C_CONNECT)
			port2 = ports[1];
	}
	close(pp[0]);
	if (accept_role) {
		fd = accept_on(lst);
		close(lst);
	} else {
		fd = connect_to(port);
	}
	if (!k->first) {
		put1(fd);
		get1(fd);
	}
	if (k->rcvtimeo_ms) {
		struct timeval tv = { k->rcvtimeo_ms / 1000, k->rcvtimeo_ms % 1000 * 1000 };

		if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
			die("SO_RCVTIMEO");
	}
	if (k->sndtimeo_ms) {
		struct timeval tv = { k->sndtimeo_ms / 1000, k->sndtimeo_ms % 1000 * 1000 };

		if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
			die("SO_SNDTIMEO");
	}
	if (k->full)
		fill(fd);
	if (k->linger_s) {
		struct linger lg = { 1, k->linger_s };

		if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
			die("SO_LINGER");
	}
	if (k->call == C_SENDFILE) {
		mfd = memfd_create("sansig", 0);
		if (mfd < 0 || ftruncate(mfd, (off_t)want) < 0)
			die("memfd");
	}
	if (k->call == C_EPOLL || k->call == C_EPOLL_PWAIT) {
		struct epoll_event ev = { .events = k->out ? EPOLLOUT : EPOLLIN };

		ev.data.fd = fd;
		ep = epoll_create1(0);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			die("epoll");
	}
	if (k->call == C_CONNECT) {
		/* two connections fill a backlog of 1's accept queue: the next SYN is dropped */
		fill_c[0] = connect_to(port2);
		fill_c[1] = connect_to(port2);
	}
	handler(SIGUSR1, k->flags);
	if (k->mixed)
		handler(SIGUSR2, 0);
	main_thr = pthread_self();
	nsig = k->nsig;
	t_start = t0 = now_ns();
	if (write(gop[1], "g", 1) != 1)
		die("write to the peer");
	if (pthread_create(&th, NULL, timer_main, NULL) != 0)
		die("pthread_create");

	/*
	 * A handler already run: the thread got no CPU for the 200 ms to the first signal (a loaded
	 * machine), and the call meets none; the line says so, and the test runs the case again.
	 */
	early = hits;
	switch (k->call) {
	case C_SEND:
		call = "send";
		r = send(fd, buf, want, MSG_NOSIGNAL);
		break;
	case C_WRITE:
		call = "write";
		r = write(fd, buf, want);
		break;
	case C_WRITEV: {
		struct iovec v[2] = { { buf, want / 2 }, { buf + want / 2, want - want / 2 } };

		call = "writev";
		r = writev(fd, v, 2);
		break;
	}
	case C_SENDMSG: {
		struct iovec v = { buf, want };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };

		call = "sendmsg";
		r = sendmsg(fd, &m, MSG_NOSIGNAL);
		break;
	}
	case C_RECV:
		call = "recv";
		r = recv(fd, buf, 100, k->waitall ? MSG_WAITALL : 0);
		break;
	case C_READ:
		call = "read";
		r = read(fd, buf, 100);
		break;
	case C_READV: {
		struct iovec v = { buf, 100 };

		call = "readv";
		r = readv(fd, &v, 1);
		break;
	}
	case C_RECVMSG: {
		struct iovec v = { buf, 100 };
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };

		call = "recvmsg";
		r = recvmsg(fd, &m, 0);
		break;
	}
	case C_POLL:
	case C_PPOLL: {
		struct pollfd p = { fd, k->out ? POLLOUT : POLLIN, 0 };
		sigset_t none;

		sigemptyset(&none);
		call = k->call == C_POLL ? "poll" : "ppoll";
		r = k->call == C_POLL ? poll(&p, 1, -1) : ppoll(&p, 1, NULL, &none);
		break;
	}
	case C_SELECT:
	case C_PSELECT: {
		fd_set rs;
		sigset_t none;

		FD_ZERO(&rs);
		FD_SET(fd, &rs);
		sigemptyset(&none);
		call = k->call == C_SELECT ? "select" : "pselect";
		r = k->call == C_SELECT ? select(fd + 1, &rs, NULL, NULL, NULL)
					: pselect(fd + 1, &rs, NULL, NULL, NULL, &none);
		break;
	}
	case C_EPOLL:
	case C_EPOLL_PWAIT: {
		struct epoll_event ev;
		sigset_t none;

		sigemptyset(&none);
		call = k->call == C_EPOLL ? "epoll_wait" : "epoll_pwait";
		r = k->call == C_EPOLL ? epoll_wait(ep, &ev, 1, -1)
				       : epoll_pwait(ep, &ev, 1, -1, &none);
		break;
	}
	case C_SENDFILE: {
		off_t off = 0;

		call = "sendfile";
		r = sendfile(fd, mfd, &off, want);
		break;
	}
	case C_CONNECT: {
		struct sockaddr_in a = loop_addr(port2);
		int c = socket(AF_INET, SOCK_STREAM, 0);

		if (c < 0)
			die("socket");
		call = "connect";
		r = connect(c, (struct sockaddr *)&a, sizeof(a));
		if (r < 0 && errno == EINTR) {
			/* what the application does next: the same connect, which waits on */
			int e = errno;
			int r2;

			h = hits;
			atomic_store(&done, 1);
			t1 = now_ns();
			captured = 1;
			r2 = connect(c, (struct sockaddr *)&a, sizeof(a));
			snprintf(again, sizeof(again), "; again: %s", r2 < 0 ? ename(errno) : "0");
			errno = e;
		}
		break;
	}
	case C_ACCEPT:
		call = "accept";
		r = accept(l2, NULL, NULL);
		break;
	case C_CLOSE:
		call = "close";
		r = close(fd);
		fd = -1;
		break;
	}
	{
		int e = errno;

		if (!captured) {
			h = hits; /* before anything else can run a handler */
			atomic_store(&done, 1);
			t1 = now_ns();
		}
		late = atomic_load(&late_ns);
		errno = e;
	}
	switch (k->call) {
	case C_SEND:
	case C_WRITE:
	case C_WRITEV:
	case C_SENDMSG:
	case C_SENDFILE:
		sent(res, sizeof(res), r, want);
		break;
	case C_RECV:
	case C_READ:
	case C_READV:
	case C_RECVMSG:
		got(res, sizeof(res), r);
		break;
	case C_POLL:
	case C_PPOLL:
	case C_SELECT:
	case C_PSELECT:
	case C_EPOLL:
	case C_EPOLL_PWAIT:
		ready(res, sizeof(res), (int)r);
		break;
	case C_CONNECT:
	case C_CLOSE:
		if (r < 0)
			snprintf(res, sizeof(res), "-1 %s", ename(errno));
		else
			snprintf(res, sizeof(res), "%zd", r);
		break;
	case C_ACCEPT:
		if (r < 0)
			snprintf(res, sizeof(res), "-1 %s", ename(errno));
		else
			snprintf(res, sizeof(res), "fd");
		break;
	}
	pthread_join(th, NULL);
	line(k, call, res, t0, t1, h, late, early);
	printf("%s\n", again);
	printf("# took %lld ms\n", (t1 - t0) / 1000000LL); /* informative, not compared */
	fflush(stdout);

	if (k->first && fd >= 0) {
		/* the peer's byte (at 1000 ms), then one of ours: the connection carries data */
		if (r <= 0)
			get1(fd);
		put1(fd);
	}
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 2; i++)
		if (fill_c[i] >= 0)
			close(fill_c[i]);
	close(gop[1]);
	/* the result is in: the peer's part is over (the first-call cases let it read our byte) */
	if (!k->first)
		kill(child, SIGKILL);
	if (waitpid(child, &st, 0) < 0)
		die("waitpid");
	return 0;
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc >= 2 && !strcmp(argv[1], "list")) {
		for (i = 0; i < sizeof(kases) / sizeof(kases[0]); i++)
			printf("%s\n", kases[i].name);
		return 0;
	}
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--accept"))) {
		fprintf(stderr, "usage: sansig CASE [--accept] | sansig list\n");
		return 2;
	}
	for (i = 0; i < sizeof(kases) / sizeof(kases[0]); i++)
		if (!strcmp(argv[1], kases[i].name))
			return run(&kases[i], argc == 3);
	fprintf(stderr, "sansig: no case '%s' (sansig list)\n", argv[1]);
	return 2;
}
