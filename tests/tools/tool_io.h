/*
 * tool_io.h — what the stream tools share (sanconnrate, sanidle, sanref, sansigstale): the
 * whole-buffer send/receive (a stream may move fewer bytes than asked in one call, and a signal
 * may interrupt it), and the monotonic clock in seconds.
 */
#ifndef SAN_TOOL_IO_H
#define SAN_TOOL_IO_H

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

static inline double tool_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Receive (rd) or send all N bytes at B on FD; -1 at an error or end of stream. A send to a
 * closed peer fails with EPIPE instead of raising SIGPIPE. */
static inline int io_all(int fd, char *b, size_t n, int rd)
{
	size_t d = 0;

	while (d < n) {
		ssize_t r = rd ? recv(fd, b + d, n - d, 0) : send(fd, b + d, n - d, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		d += (size_t)r;
	}
	return 0;
}

#endif
