/* core — TCP connections a process was handed at exec, found once at load (san_inherit.h). */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/san_fdtable.h"
#include "core/san_inherit.h"
#include "core/san_sock.h"
#include "core/san_sys.h"

/* More inherited TCP sockets than this: none is adopted (they stay plain TCP). A load-time bound. */
#define SAN_INHERIT_MAX 64

struct inherited {
	int fd;
	uint32_t flags; /* SAN_FDF_INET6, SAN_FDF_NONBLOCK */
	uint64_t ino;
};

/* An established TCP connection (not a listener, not one still connecting or closing)? */
static bool established_tcp(int fd, uint32_t *flags)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	int dom = san_sys_getsockopt_int(fd, SOL_SOCKET, SO_DOMAIN), fl;

	if ((dom != AF_INET && dom != AF_INET6) ||
	    san_sys_getsockopt_int(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM ||
	    san_sys_getsockopt_int(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP ||
	    SAN_SYS(SYS_getsockopt, (long)fd, (long)IPPROTO_TCP, (long)TCP_INFO, &ti, &l) < 0 ||
	    ti.tcpi_state != TCP_ESTABLISHED)
		return false;
	fl = san_sys_fcntl(fd, F_GETFL, 0);
	*flags = (dom == AF_INET6 ? SAN_FDF_INET6 : 0) |
		 (fl >= 0 && (fl & O_NONBLOCK) ? SAN_FDF_NONBLOCK : 0);
	return true;
}

static int by_inode_then_fd(const void *a, const void *b)
{
	const struct inherited *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->fd < y->fd ? -1 : x->fd > y->fd;
}

/*
 * The inode of a socket, which names the connection whatever number it has here; 0 if it cannot
 * be had. Asked only of a socket: fstat of the file behind any other fd could wait on a dead NFS
 * or FUSE server.
 */
static uint64_t socket_inode(int fd)
{
	struct stat st;

	if (SAN_SYS(SYS_fstat, (long)fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	return (uint64_t)st.st_ino;
}

void san_inherit_scan(void)
{
	struct inherited found[SAN_INHERIT_MAX];
	char buf[2048];
	bool complete = true;
	int n = 0, dfd;
	long got;

	if (!san_fdt.size)
		return; /* no fd table (disabled): nothing is tracked */
	dfd = (int)SAN_SYS(SYS_openat, (long)AT_FDCWD, "/proc/self/fd",
			   (long)(O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (dfd < 0)
		return;
	while ((got = SAN_SYS(SYS_getdents64, (long)dfd, buf, (long)sizeof(buf))) > 0) {
		for (long off = 0; off < got;) {
			/* struct linux_dirent64: ino, off, reclen, type, name */
			unsigned short reclen;
			const char *name = buf + off + 19;
			uint32_t flags;
			uint64_t ino;
			char *end;
			long fd;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			off += reclen;
			fd = strtol(name, &end, 10);
			if (*end || end == name || fd < 0 || fd == dfd)
				continue;
			/*
			 * The socket options first: on any fd that is no socket they fail at
			 * once (ENOTSOCK), never touching the file, and cost less than the
			 * readlink of its /proc entry did (the scan runs in every process).
			 */
			if (!established_tcp((int)fd, &flags) || !(ino = socket_inode((int)fd)))
				continue;
			if (fd >= (long)san_fdt.size || n == SAN_INHERIT_MAX) {
				/* a number we could not follow might be another of a connection's */
				complete = false;
				continue;
			}
			found[n].flags = flags;
			found[n].fd = (int)fd;
			found[n].ino = ino;
			n++;
		}
	}
	san_sys_close(dfd);
	/*
	 * A connection switched with one of its numbers left out would have that number still
	 * the TCP socket: the program's bytes through it would land behind the MARK. Past the
	 * bounds (or if /proc would not list them all), none is adopted.
	 */
	if (!n || !complete || got < 0)
		return;
	qsort(found, (size_t)n, sizeof(found[0]), by_inode_then_fd);
	for (int i = 0, j; i < n; i = j) {
		int fds[SAN_INHERIT_MAX], k = 0;

		for (j = i; j < n && found[j].ino == found[i].ino; j++)
			fds[k++] = found[j].fd;
		san_sock_adopt(fds, k, found[i].flags);
	}
}
