/* core — logging: one line per message on stderr, filtered by SANSWITCH_LOG. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_fdtable.h"
#include "core/san_log.h"

int san_log_level = SAN_LOG_WARN;

static const char *const san_log_names[] = {
	[SAN_LOG_ERROR] = "error",
	[SAN_LOG_WARN] = "warn",
	[SAN_LOG_INFO] = "info",
	[SAN_LOG_DEBUG] = "debug",
};

/* Returns the level named by @s ("error", "warn", "info", "debug"), or -EINVAL. */
int san_log_parse_level(const char *s)
{
	int i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < (int)(sizeof(san_log_names) / sizeof(san_log_names[0])); i++)
		if (!strcasecmp(s, san_log_names[i]))
			return i;
	if (!strcasecmp(s, "warning"))
		return SAN_LOG_WARN;
	return -EINVAL;
}

void san_log_init(void)
{
	const char *s = getenv("SANSWITCH_LOG");
	int level;

	if (!s || !*s)
		return;
	level = san_log_parse_level(s);
	if (level < 0) {
		san_warn("SANSWITCH_LOG=%s not understood (error|warn|info|debug), using warn", s);
		return;
	}
	__atomic_store_n(&san_log_level, level, __ATOMIC_RELAXED);
}

/*
 * Straight to the write system call: the library interposes write(), and a
 * log line must never re-enter the wrappers (or be counted as application
 * traffic once fds can be switched).
 */
void san_log_raw(const char *buf, size_t len)
{
	int saved = errno;

	/*
	 * fd 2 may be a TCP socket the application tracks (a daemon that closed
	 * stderr and reused the number, inetd-style stdio on the connection):
	 * a log line there would land in the peer's byte stream, or raise
	 * SIGPIPE, and write() has no MSG_NOSIGNAL. Drop the line instead. Any
	 * other stderr (tty, file, pipe, journald's AF_UNIX socket) is untracked.
	 */
	if (san_fd_get(STDERR_FILENO))
		return;
	while (len > 0) {
		long n = syscall(SYS_write, STDERR_FILENO, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		buf += n;
		len -= (size_t)n;
	}
	errno = saved;
}

/* Format: "sanswitch[pid]: level: msg\n"; long messages are truncated, never split. */
void san_log(enum san_log_level level, const char *fmt, ...)
{
	char buf[512];
	int saved = errno;
	size_t len;
	va_list ap;
	int n;

	if ((unsigned int)level > SAN_LOG_DEBUG)
		level = SAN_LOG_DEBUG;
	n = snprintf(buf, sizeof(buf), "sanswitch[%d]: %s: ", (int)getpid(), san_log_names[level]);
	if (n < 0)
		goto out;
	len = (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		len += (size_t)n < sizeof(buf) - len - 1 ? (size_t)n : sizeof(buf) - len - 2;
	buf[len++] = '\n';
	san_log_raw(buf, len);
out:
	errno = saved;
}
