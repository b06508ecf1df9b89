/*
 * preload — the stdio bridge: stdin, stdout and stderr of a process handed a connection on 0, 1
 * or 2 at exec (inetd's shape) move their bytes through the wrappers.
 *
 * glibc's stdio makes its read(2) and write(2) inside libc, where no wrapper sees them. Before a
 * connection switches, the counts check catches that and keeps it on TCP; but a program may talk
 * through read(2)/write(2) first and through stdio only later (git's upload-pack with protocol
 * v2: its ls-refs reply is an fflush(stdout)), after the switch, when the number is the
 * notification socket: those bytes never reached the peer and the exchange hung. So, at load,
 * each of the three standard streams whose number is an adopted connection is replaced by an
 * fopencookie() stream whose read, write and close are the same calls on the same number, made
 * through the wrappers: the program's stdio moves the same bytes at the same moments, only
 * visibly. Buffering as glibc gives a socket (full; stderr none). Its fd is set, so fileno()
 * answers as before; setvbuf(), fclose() and the exit's flush work on it as on any stream (the
 * library's exit handler flushes every stream before it ends a connection: san_prov_verbs.c).
 * What differs, and docs/behaviour.md says: such a stream has no wide orientation (fwprintf
 * fails), and a FILE * taken before our constructor ran (none in a C or C++ program of Debian
 * 12) would still be glibc's. SANSWITCH_STDIO=0 leaves the streams alone.
 */
#include "preload/san_preload.h"

#include <stdint.h>
#include <string.h>

#include "core/san_config.h"

/* The bridged streams by number; a slot is cleared when its stream closes (bridge_close). */
static FILE *bridged[3];

static int cookie_fd(void *cookie)
{
	return (int)(intptr_t)cookie;
}

static ssize_t bridge_read(void *cookie, char *buf, size_t len)
{
	return read(cookie_fd(cookie), buf, len);
}

/*
 * All of it or an error, as glibc's own file write loops over short writes (a cookie stream
 * takes a short count for an error). With part written, the count, as glibc's does.
 */
static ssize_t bridge_write(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = write(cookie_fd(cookie), buf + done, len - done);

		if (w <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
	}
	return (ssize_t)done;
}

/* As glibc's file streams: the number's own lseek (ESPIPE on a socket). */
static int bridge_seek(void *cookie, off64_t *off, int whence)
{
	off64_t r = lseek64(cookie_fd(cookie), *off, whence);

	if (r < 0)
		return -1;
	*off = r;
	return 0;
}

static int bridge_close(void *cookie)
{
	int fd = cookie_fd(cookie);

	__atomic_store_n(&bridged[fd], NULL, __ATOMIC_RELEASE);
	return close(fd);
}

bool san_stdio_bridged(FILE *fp)
{
	for (int fd = 0; fd < 3; fd++)
		if (fp && __atomic_load_n(&bridged[fd], __ATOMIC_ACQUIRE) == fp)
			return true;
	return false;
}

void san_stdio_bridge(void)
{
	static const cookie_io_functions_t io = {
		.read = bridge_read,
		.write = bridge_write,
		.seek = bridge_seek,
		.close = bridge_close,
	};
	FILE **const std[3] = { &stdin, &stdout, &stderr };

	if (!san_cfg.stdio)
		return;
	for (int fd = 0; fd < 3; fd++) {
		FILE *fp;

		if (!san_managed(fd))
			continue;
		if (!(fp = fopencookie((void *)(intptr_t)fd, fd ? "w" : "r", io))) {
			/* (at load, only out of memory) as before the bridge: stdio before the switch
			 * keeps the connection on TCP, stdio after it does not reach the peer */
			san_warn("fd %d: no stdio bridge (%s): the program's std%s is glibc's own",
				 fd, strerror(errno), fd == 0 ? "in" : fd == 1 ? "out" : "err");
			continue;
		}
		fp->_fileno = fd; /* fileno(); the cookie's calls never use it */
		if (fd == 2)
			(void)setvbuf(fp, NULL, _IONBF, 0);
		__atomic_store_n(&bridged[fd], fp, __ATOMIC_RELEASE);
		*std[fd] = fp;
		san_debug("fd %d: the program's std%s goes through the library (stdio bridge)", fd,
			  fd == 0 ? "in" : fd == 1 ? "out" : "err");
	}
}
