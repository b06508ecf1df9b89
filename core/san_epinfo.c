/* core — an epoll registration's events, from the epoll set's fdinfo (san_epinfo.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/san_epinfo.h"
#include "core/san_sys.h"

bool san_epinfo_parse(const char *line, int *tfd, uint32_t *events, unsigned long *ino)
{
	unsigned int ev;

	/* "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x" (fs/eventpoll.c); a
	 * suppressed conversion stores nothing, so a 64-bit data needs no wider one */
	if (sscanf(line, "tfd: %d events: %x data: %*x pos:%*d ino:%lx", tfd, &ev, ino) != 3)
		return false;
	*events = ev;
	return true;
}

int san_epinfo_events(int epfd, int fd, unsigned long ino, uint32_t *events)
{
	char path[48], buf[4096];
	size_t have = 0;
	int r = -ENOENT, pfd;

	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", epfd);
	pfd = (int)SAN_SYS(SYS_openat, (long)AT_FDCWD, path, (long)(O_RDONLY | O_CLOEXEC));
	if (pfd < 0)
		return pfd;
	/* A set of many registrations is a long file: read it a buffer at a time, by lines. */
	for (;;) {
		long n = SAN_SYS(SYS_read, (long)pfd, buf + have, sizeof(buf) - 1 - have);
		char *p = buf, *nl;

		if (n == -EINTR)
			continue;
		if (n < 0) {
			r = (int)n;
			break;
		}
		have += (size_t)n;
		buf[have] = '\0';
		while ((nl = memchr(p, '\n', (size_t)(buf + have - p))) || (n == 0 && *p)) {
			int tfd;
			uint32_t ev;
			unsigned long i;

			if (nl)
				*nl = '\0';
			if (san_epinfo_parse(p, &tfd, &ev, &i) && tfd == fd && i == ino) {
				*events = ev;
				r = 0;
			}
			p = nl ? nl + 1 : buf + have;
		}
		if (n == 0 || r == 0)
			break;
		have = (size_t)(buf + have - p);
		memmove(buf, p, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* no line is that long: not a registration's */
	}
	san_sys_close(pfd);
	return r;
}
