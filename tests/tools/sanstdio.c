/*
 * sanstdio — a server that speaks through C stdio (fread, fwrite, fflush), as many small C
 * servers and inetd services do. glibc's stdio makes its read(2) and write(2) system calls
 * inside libc, where no preload sees them: the switch must notice that bytes moved behind its
 * wrappers and leave such a connection on TCP (docs/protocol.md §9.8), never switch it under
 * the program (a hang or the MARK read as data, seen before).
 *
 *   sanstdio serve                     serve stdin/stdout (an inetd child): each request's
 *                                      length with read(2), the rest through unbuffered stdio
 *                                      (so the switch sees the connection used, and is asked)
 *   sanstdio late exit|fclose          serve stdin/stdout: the first exchange with read(2) and
 *                                      write(2), the rest through stdio (see serve_late)
 *   sanstdio glibc big|closed|thread   serve stdin/stdout: four exchanges as late's, then one
 *   sanstdio glibc kept|writer         (pointers taken before fclose; a writer thread at exit)
 *   sanstdio glibc freopen|gone|keptreopen|errno|daemon PATH   glibc behaviour the bridge must keep
 *                                      (see serve_glibc)
 *   sanstdio listen PORTFILE CONNS     listen on 127.0.0.1, write the port to PORTFILE, serve
 *                                      CONNS connections in turn through fdopen()
 *
 * The protocol is shapes.py's: an 8-byte big-endian length and the bytes; the reply is the
 * bytes reversed; served until EOF. Exit 0, or 1 on a short request or a failed write.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The 8-byte length: through stdio, or with read(2) on in's number (in then unbuffered). */
static int read_head(FILE *in, bool sys, uint64_t *be)
{
	size_t got = 0;

	if (!sys)
		return fread(be, 1, sizeof(*be), in) == sizeof(*be) ? 1 : ferror(in) || !feof(in) ? -1 : 0;
	while (got < sizeof(*be)) {
		ssize_t r = read(fileno(in), (char *)be + got, sizeof(*be) - got);

		if (r <= 0)
			return r == 0 && got == 0 ? 0 : -1;
		got += (size_t)r;
	}
	return 1;
}

static int serve(FILE *in, FILE *out, bool sys_head)
{
	for (;;) {
		uint64_t be, n;
		char *buf;
		int h = read_head(in, sys_head, &be);

		if (h <= 0)
			return h < 0;
		n = be64toh(be);
		if (n > (64u << 20) || !(buf = malloc(n ? n : 1)))
			return 1;
		if (fread(buf, 1, n, in) != n) {
			free(buf);
			return 1;
		}
		for (uint64_t i = 0; i < n / 2; i++) {
			char t = buf[i];

			buf[i] = buf[n - 1 - i];
			buf[n - 1 - i] = t;
		}
		if (fwrite(buf, 1, n, out) != n || fflush(out)) {
			free(buf);
			return 1;
		}
		free(buf);
	}
}

static int listen_and_serve(const char *portfile, int conns)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, bad = 0;
	char tmp[4096];
	FILE *pf;

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 64) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("sanstdio: listen");
		return 2;
	}
	printf("# pid %d listener\n", (int)getpid());
	fflush(stdout);
	snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
	if (!(pf = fopen(tmp, "w")) || fprintf(pf, "%d\n", ntohs(a.sin_port)) < 0 || fclose(pf) ||
	    rename(tmp, portfile)) {
		perror("sanstdio: portfile");
		return 2;
	}
	for (int i = 0; i < conns; i++) {
		int c = accept(l, NULL, NULL);
		FILE *in, *out;

		/* two streams on one number (a dup would keep the connection on TCP by itself) */
		if (c < 0 || !(in = fdopen(c, "r")) || !(out = fdopen(c, "w"))) {
			perror("sanstdio: accept");
			return 2;
		}
		bad |= serve(in, out, false);
		/* out flushed, never closed: one close of the number (a second one could hit a
		 * number the preload's engine has just been given) */
		fflush(out);
		fclose(in);
	}
	return bad;
}

/*
 * One exchange of late's on stdin/stdout: with read(2) and write(2) (sys), or through stdio.
 * 1 done, 0 the client's EOF before a request, -1 a short request or a failed write.
 */
static int late_exchange(bool sys)
{
	uint64_t be, n;
	char *buf;
	size_t got = 0;
	int h = read_head(stdin, sys, &be);

	if (h <= 0)
		return h;
	n = be64toh(be);
	if (n > (64u << 20) || !(buf = malloc(n ? n : 1)))
		return -1;
	while (got < n) {
		ssize_t r = sys ? read(0, buf + got, n - got) : (ssize_t)fread(buf + got, 1, n - got, stdin);

		if (r <= 0) {
			free(buf);
			return -1;
		}
		got += (size_t)r;
	}
	for (uint64_t i = 0; i < n / 2; i++) {
		char t = buf[i];

		buf[i] = buf[n - 1 - i];
		buf[n - 1 - i] = t;
	}
	h = sys ? write(1, buf, n) != (ssize_t)n : fwrite(buf, 1, n, stdout) != n || fflush(stdout);
	free(buf);
	return h ? -1 : 1;
}

/*
 * late: git upload-pack's shape. The first exchange with read(2) and write(2) (the connection
 * switches at the client's second), every later one through stdio on stdin and stdout; at the
 * end of the requests a line on stderr (unbuffered) and one on stdout left in its buffer, which
 * only the exit's flush (END exit) or an fclose(stdout) (END fclose) sends. Checks that fileno()
 * of the streams still answers 0, 1 and 2.
 */
static int serve_late(const char *end)
{
	uint64_t n_done = 0;
	bool sys = true;

	if (fileno(stdin) != 0 || fileno(stdout) != 1 || fileno(stderr) != 2) {
		fprintf(stderr, "sanstdio: fileno() of the standard streams: %d %d %d\n", fileno(stdin),
			fileno(stdout), fileno(stderr));
		return 1;
	}
	for (;; sys = false) {
		int h = late_exchange(sys);

		if (h < 0)
			return 1;
		if (h == 0)
			break;
		n_done++;
	}
	fprintf(stderr, "err %llu\n", (unsigned long long)n_done);
	printf("bye %llu\n", (unsigned long long)n_done);
	if (!strcmp(end, "fclose") && fclose(stdout))
		return 1;
	return 0;
}

/* A writer of numbered lines through stdout, for as long as the process lives. */
static void *write_lines(void *arg)
{
	for (unsigned long i = 0;; i++)
		if (printf("line %09lu\n", i) < 0)
			return arg;
}

/* A reader that blocks in fgets(stdin), holding the stream's lock, while the program exits. */
static void *read_stdin(void *arg)
{
	char line[64];

	return fgets(line, sizeof(line), stdin) ? arg : NULL;
}

/*
 * glibc: after four exchanges (the first with read(2)/write(2), the others through stdio, after
 * the switch), one behaviour of glibc's standard streams that a bridged stream must keep:
 *   big      5000 bytes through putchar and no fflush, then wait for the client's EOF: glibc's
 *            stream on a socket has st_blksize's buffer, so 4096 go at once, 904 at the fflush
 *   closed   fclose(stdout), then printf (EOF, EBADF) and fclose again (EOF): glibc never frees
 *            its standard streams; the answer goes on stderr
 *   freopen  freopen(PATH, "w", stdout), a line to the file, fclose; the answer on stderr
 *   thread   a thread blocked in fgets(stdin); "bye" on stdout and exit(): the exit's flush must
 *            not wait for stdin's lock
 *   gone     at the client's EOF (it has closed), with SIGPIPE ignored and stdout unbuffered,
 *            fwrite() four times: glibc answers 100, then 0 with EPIPE; each answer to PATH
 */
static int serve_glibc(const char *what, const char *path)
{
	/* (three through stdio: the client proposes at each until one is taken) */
	if (late_exchange(true) != 1 || late_exchange(false) != 1 || late_exchange(false) != 1 ||
	    late_exchange(false) != 1)
		return 1;
	if (!strcmp(what, "big")) {
		uint64_t be;

		for (int i = 0; i < 5000; i++)
			putchar('x');
		return read_head(stdin, false, &be) != 0 || fflush(stdout);
	}
	if (!strcmp(what, "closed")) {
		int c1 = fclose(stdout), p, e, c2;

		errno = 0;
		p = printf("after fclose\n");
		e = errno;
		c2 = fclose(stdout);
		fprintf(stderr, "closed %d printf %d %s again %d\n", c1, p, e == EBADF ? "EBADF" : "?", c2);
		return 0;
	}
	if (!strcmp(what, "freopen") && path) {
		FILE *f = freopen(path, "w", stdout);
		int p = printf("to the file\n"), c = fclose(stdout);

		fprintf(stderr, "freopen %s printf %d fclose %d\n", f == stdout ? "same" : "other", p, c);
		return 0;
	}
	if (!strcmp(what, "gone") && path) {
		FILE *rep = fopen(path, "w");
		char line[100];
		uint64_t be;

		if (!rep || read_head(stdin, false, &be) != 0)
			return 1;
		usleep(200000); /* (the client's close, then its RST's way back) */
		signal(SIGPIPE, SIG_IGN);
		setvbuf(stdout, NULL, _IONBF, 0);
		memset(line, 'x', sizeof(line));
		for (int i = 0; i < 4; i++) {
			size_t w;

			errno = 0;
			w = fwrite(line, 1, sizeof(line), stdout);
			fprintf(rep, "fwrite %zu %s\n", w, ferror(stdout) ? strerror(errno) : "");
			clearerr(stdout);
			usleep(50000);
		}
		return fclose(rep) != 0;
	}
	if (!strcmp(what, "daemon") && path) {
		/*
		 * daemon(): its child's 0, 1 and 2 are /dev/null, so its output goes nowhere and
		 * the connection ends with the parent's exit (glibc's dup2s were unseen: the
		 * child's stdout still went to the peer)
		 */
		struct stat st;
		FILE *rep;
		int p;

		if (daemon(1, 0) != 0)
			return 1;
		p = printf("after daemon\n");
		fflush(stdout);
		if (!(rep = fopen(path, "w")))
			return 1;
		fprintf(rep, "daemon: printf %d, 1 is %s\n", p,
			!fstat(1, &st) && S_ISCHR(st.st_mode) ? "a character device" : "other");
		return fclose(rep) != 0;
	}
	if (!strcmp(what, "kept")) {
		/*
		 * pointers taken before fclose (glibc's: the same closed FILE; EOF and EBADF). glibc
		 * never frees its standard streams; the compiler, which cannot know that, would warn.
		 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free"
		FILE *o = stdout, *i = stdin;
		int c1 = fclose(stdout), p, pe, c2 = fclose(stdin), g, ge;

		errno = 0;
		p = fprintf(o, "after fclose\n");
		pe = errno;
		errno = 0;
		g = getc(i);
		ge = errno;
		fprintf(stderr, "kept: fclose %d fprintf %d %s fclose(stdin) %d getc %d %s\n", c1, p,
			pe == EBADF ? "EBADF" : "?", c2, g, ge == EBADF ? "EBADF" : "?");
#pragma GCC diagnostic pop
		return 0;
	}
	if (!strcmp(what, "keptreopen") && path) {
		/* a pointer taken before freopen (std::cout's): glibc's is the same FILE, now the file */
		FILE *o = stdout, *f = freopen(path, "w", stdout);
		int p = fprintf(o, "kept pointer to the file\n"), fl = fflush(o);

		fprintf(stderr, "keptreopen: freopen %s fprintf %d fflush %d\n", f ? "ok" : "failed", p, fl);
		return fclose(stdout) != 0;
	}
	if (!strcmp(what, "errno") && path) {
		/* a failed flush in fclose: its errno is fclose's (EPIPE once our side is shut; the
		 * answer to PATH: stderr is the same socket) */
		FILE *rep = fopen(path, "w");
		int c, e;

		if (!rep)
			return 1;
		signal(SIGPIPE, SIG_IGN);
		if (shutdown(1, SHUT_WR))
			return 1;
		printf("never sent\n");
		errno = 0;
		c = fclose(stdout);
		e = errno;
		fprintf(rep, "errno: fclose %d %s\n", c, strerror(e));
		return fclose(rep) != 0;
	}
	if (!strcmp(what, "writer")) {
		/*
		 * a thread writes lines through stdout (the client does not read yet: the thread
		 * waits, in its write, holding the stream) while the program exits: the peer must
		 * get a clean prefix of the lines, never a piece twice (glibc's flush at exit
		 * wrote the buffer the thread was writing)
		 */
		pthread_t t;

		if (pthread_create(&t, NULL, write_lines, NULL))
			return 1;
		usleep(300000);
		exit(0);
	}
	if (!strcmp(what, "thread")) {
		pthread_t t;

		if (pthread_create(&t, NULL, read_stdin, NULL))
			return 1;
		usleep(100000); /* (the reader is in its read by now) */
		printf("bye\n");
		exit(0);
	}
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "serve")) {
		setvbuf(stdin, NULL, _IONBF, 0); /* no read-ahead past what read(2) must find */
		return serve(stdin, stdout, true);
	}
	if (argc == 3 && !strcmp(argv[1], "late")) {
		setvbuf(stdin, NULL, _IONBF, 0); /* no read-ahead past the first exchange */
		return serve_late(argv[2]);
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "glibc")) {
		setvbuf(stdin, NULL, _IONBF, 0); /* no read-ahead past the first exchange */
		return serve_glibc(argv[2], argc == 4 ? argv[3] : NULL);
	}
	if (argc == 4 && !strcmp(argv[1], "listen"))
		return listen_and_serve(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: sanstdio serve | sanstdio late exit|fclose | sanstdio glibc CASE [PATH] | "
			"sanstdio listen PORTFILE CONNS\n");
	return 2;
}
