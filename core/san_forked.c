/* core — what a fork() leaves of a connection not switched yet (san_forked.h). */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/san_forked.h"
#include "core/san_owner.h"
#include "core/san_sys.h"

/* The parent of @pid from /proc/<pid>/stat (its 4th field, after the name in parentheses). */
static pid_t proc_ppid(pid_t pid)
{
	char path[32], buf[512], *p;
	ssize_t n;
	int fd, ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = SAN_SYS(SYS_read, (long)fd, buf, (long)sizeof(buf) - 1);
	san_sys_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid < 0)
		return 0;
	return (pid_t)ppid;
}

/*
 * Appends @pid's children (every thread's: /proc/<pid>/task/<tid>/children) to @out: the new
 * count, or -1 when they cannot all be read (too many, or /proc will not say).
 */
static int add_children(pid_t pid, pid_t *out, int n)
{
	char path[64], buf[4096];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT || errno == ESRCH ? n : -1; /* (gone: no children) */
	while ((d = readdir(dir)) && n >= 0) {
		ssize_t len;
		char *p, *end;
		int fd;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int)pid, d->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT && errno != ESRCH)
				n = -1; /* (a thread that ended has no children to hide) */
			continue;
		}
		len = SAN_SYS(SYS_read, (long)fd, buf, (long)sizeof(buf) - 1);
		san_sys_close(fd);
		if (len < 0) {
			n = -1;
			break;
		}
		buf[len] = '\0';
		for (p = buf;; p = end) {
			long c = strtol(p, &end, 10);

			if (end == p)
				break;
			if (n >= SAN_FORKED_MAX) {
				n = -1;
				break;
			}
			if (c > 0)
				out[n++] = (pid_t)c;
		}
		/* a full page of children: there may be more than we read */
		if (len == (ssize_t)sizeof(buf) - 1)
			n = -1;
	}
	closedir(dir);
	return n;
}

/*
 * Does @pid hold @ino? 1, 0, or -1: cannot tell. A table we may not read (another user's
 * process, one that made itself non-dumpable, or, in some containers, pid 1 even to root) is
 * passed over: san_forked.h.
 */
static int holds(pid_t pid, uint64_t ino)
{
	int r = san_owner_pid_holds_inode(pid, ino);

	if (r == 0)
		return 1;
	return r == -ENOENT || r == -ESRCH || r == -EACCES ? 0 : -1;
}

int san_forked_others_hold(uint64_t ino)
{
	pid_t *fam, me = getpid(), parent = getppid(), p;
	int n = 0, r = 0, saved = errno;

	fam = malloc(SAN_FORKED_MAX * sizeof(*fam));
	if (!fam)
		return -E2BIG;
	/* ancestors, nearest first */
	for (p = parent; p > 0 && n < SAN_FORKED_MAX; p = proc_ppid(p))
		fam[n++] = p;
	n = add_children(me, fam, n);
	/* siblings; init's children are every daemon of the system, not a family */
	if (n >= 0 && parent > 1)
		n = add_children(parent, fam, n);
	if (n < 0)
		r = -E2BIG;
	for (int i = 0; i < n && !r; i++) {
		int h = fam[i] == me ? 0 : holds(fam[i], ino);

		r = h == 1 ? 1 : h < 0 ? -E2BIG : 0;
	}
	free(fam);
	errno = saved;
	return r;
}

/* TCP_INFO's two counts: 0, or -errno. */
static int tcp_counts(int fd, uint64_t *acked, uint64_t *received)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	long r;

	memset(&ti, 0, sizeof(ti));
	r = SAN_SYS(SYS_getsockopt, (long)fd, (long)IPPROTO_TCP, (long)TCP_INFO, &ti, &len);
	if (r < 0)
		return (int)r;
	/* tcpi_bytes_received is the last of the two (Linux 4.1): an older kernel leaves it out */
	if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
		return -EOPNOTSUPP;
	*acked = ti.tcpi_bytes_acked;
	*received = ti.tcpi_bytes_received;
	return 0;
}

int san_forked_kernel_counts(int fd, uint64_t *tx, uint64_t *rx)
{
	/*
	 * The queues' lengths and TCP_INFO come from separate calls, and an ACK or a segment may
	 * arrive between them (more acknowledged, less queued): read TCP_INFO before and after
	 * the queues and take the queues only if nothing arrived in between.
	 */
	for (int i = 0; i < 16; i++) {
		uint64_t acked = 0, received = 0, acked2 = 0, received2 = 0;
		int outq = 0, inq = 0;
		long r = tcp_counts(fd, &acked, &received);

		if (!r)
			r = SAN_SYS(SYS_ioctl, (long)fd, (long)SIOCOUTQ, &outq);
		if (!r)
			r = SAN_SYS(SYS_ioctl, (long)fd, (long)SIOCINQ, &inq);
		if (!r)
			r = tcp_counts(fd, &acked2, &received2);
		if (r < 0)
			return (int)r;
		if (acked == acked2 && received == received2) {
			*tx = acked + (uint64_t)outq;
			*rx = received - (uint64_t)inq;
			return 0;
		}
	}
	return -EAGAIN; /* a stream too busy to read still: taken for a mismatch */
}
