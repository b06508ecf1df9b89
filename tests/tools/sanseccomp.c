/*
 * tests/tools/sanseccomp — a server that confines itself with a seccomp filter mid-connection,
 * as OpenSSH's pre-authentication child does (tests/e2e/t_edge_seccomp.sh).
 *
 *   sanseccomp EXCHANGES
 *
 * The process listens on 127.0.0.1, forks a client that connects and makes EXCHANGES exchanges
 * of a 100-byte request and its echo, and accepts. The server reads the first request, then
 * installs a filter that allows read, write, close, futex, exit and exit_group and nothing else
 * (any other system call kills it with SIGSYS, as OpenSSH's does), and echoes it and the rest
 * with read() and write(): the client's second request, where the library's default policy
 * proposes the switch, comes after the filter. It prints "server: N exchanges" with write(), the client "client: N
 * exchanges, bytes checked", and the exit status tells: 0 when both got to the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 100

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int confine(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		ALLOW(__NR_read),
		ALLOW(__NR_write),
		ALLOW(__NR_close),
		ALLOW(__NR_futex),
		ALLOW(__NR_exit),
		ALLOW(__NR_exit_group),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int io_all(int fd, char *b, size_t n, int rd)
{
	size_t d = 0;

	while (d < n) {
		ssize_t r = rd ? read(fd, b + d, n - d) : write(fd, b + d, n - d);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		d += (size_t)r;
	}
	return 0;
}

static int client(int port, int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[SIZE], back[SIZE];
	int c = socket(AF_INET, SOCK_STREAM, 0), k;

	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		return 2;
	for (k = 0; k < n; k++) {
		memset(req, 'a' + k % 26, sizeof(req));
		if (io_all(c, req, SIZE, 0) < 0 || io_all(c, back, SIZE, 1) < 0 ||
		    memcmp(req, back, SIZE)) {
			printf("client: exchange %d failed\n", k);
			return 1;
		}
	}
	close(c);
	printf("client: %d exchanges, bytes checked\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int n = argc > 1 ? atoi(argv[1]) : 20, l = socket(AF_INET, SOCK_STREAM, 0), c, k, st;
	char buf[SIZE], line[64];
	pid_t pid;

	if (n < 2 || l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return 2;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(l);
		exit(client(ntohs(a.sin_port), n));
	}
	c = accept(l, NULL, NULL);
	if (pid < 0 || c < 0 || io_all(c, buf, SIZE, 1) < 0)
		return 2;
	close(l);
	if (confine() < 0) {
		perror("sanseccomp: seccomp");
		return 2;
	}
	for (k = 0; k < n; k++)
		if ((k && io_all(c, buf, SIZE, 1) < 0) || io_all(c, buf, SIZE, 0) < 0)
			break;
	close(c);
	st = snprintf(line, sizeof(line), "server: %d exchanges\n", k);
	(void)!write(STDOUT_FILENO, line, (size_t)st);
	/* (waitpid is not allowed any more: the client's own status is its line) */
	_exit(k == n ? 0 : 1);
}
