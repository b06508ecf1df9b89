/*
 * tests/tools/fdops — fd life the wrappers see only in part, for tests/e2e/t_fdtable.sh.
 *
 * Connects a TCP socket to a listener of its own on 127.0.0.1, wraps it in a
 * FILE with fdopen() and fclose()s it (libc closes the fd inside, without
 * calling close()), then makes a pipe, which usually gets the same fd number,
 * and close()s it. Markers on stderr, between the library's debug lines,
 * tell the test which step a line belongs to.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int l, c, p[2];
	FILE *f;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sin, &len))
		die("listener");
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect");
	/* Unbuffered stderr: each marker lands between the library's lines in order. */
	fprintf(stderr, "fdops: tcp fd %d\n", c);
	f = fdopen(c, "r+");
	if (!f)
		die("fdopen");
	if (fclose(f))
		die("fclose");
	fprintf(stderr, "fdops: fclose done\n");
	if (pipe(p))
		die("pipe");
	fprintf(stderr, "fdops: pipe fds %d %d\n", p[0], p[1]);
	close(p[0]);
	close(p[1]);
	fprintf(stderr, "fdops: pipe closed\n");
	close(l);
	return 0;
}
