/*
 * core — logging: one line per message on stderr or in SANSWITCH_LOG_FILE, filtered by
 * SANSWITCH_LOG, at most SANSWITCH_LOG_RATE lines a second from one call site.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/san_fdtable.h"
#include "core/san_log.h"
#include "core/san_logfile.h"

int san_log_level = SAN_LOG_WARN;
uint32_t san_log_rate = SAN_LOG_RATE_DEFAULT;

/* Lines the rate limit held back since the last report of them (san_log_report_held). */
static unsigned long san_log_held;

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

/*
 * SANSWITCH_LOG and SANSWITCH_LOG_FILE, before anything else is read, so that every warning
 * goes by the level and to the file (SANSWITCH_LOG_RATE is one of san_config.c's variables).
 * The file is named before a bad level is told, so that this warning goes there too; nothing
 * is opened yet (san_logfile.h).
 */
void san_log_init(void)
{
	const char *level_s = getenv("SANSWITCH_LOG");
	int level = -EINVAL;

	if (level_s && *level_s) {
		level = san_log_parse_level(level_s);
		if (level >= 0)
			__atomic_store_n(&san_log_level, level, __ATOMIC_RELAXED);
	}
	san_logfile_init(getenv("SANSWITCH_LOG_FILE"));
	if (level_s && *level_s && level < 0)
		san_warn("SANSWITCH_LOG=%s not understood (error|warn|info|debug), using warn",
			 level_s);
	/* Lines held back just before the exit are told then (_exit: san_core_exit). */
	atexit(san_log_flush_suppressed);
}

/* Straight to the write system call: the library interposes write(). */
static void san_log_write(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		long n = syscall(SYS_write, fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/*
 * A log line must never re-enter the wrappers (or be counted as application traffic once fds
 * can be switched): hence the system call.
 */
void san_log_stderr(const char *buf, size_t len)
{
	int saved = errno;

	/*
	 * fd 2 may be a TCP socket the application tracks (a daemon that closed
	 * stderr and reused the number, inetd-style stdio on the connection):
	 * a log line there would land in the peer's byte stream, or raise
	 * SIGPIPE, and write() has no MSG_NOSIGNAL. Drop the line instead. Any
	 * other stderr (tty, file, pipe, journald's AF_UNIX socket) is untracked.
	 */
	if (!san_fd_get(STDERR_FILENO))
		san_log_write(STDERR_FILENO, buf, len);
	errno = saved;
}

/*
 * The log file's fd, or -1 for stderr; says so once on stderr if the file cannot be opened (or
 * is standard output: log lines never go there).
 */
static int san_log_file_fd(void)
{
	int open_err = 0, fd = san_logfile_fd(&open_err);
	char line[512];
	int n;

	if (open_err) {
		bool out = open_err == SAN_LOGFILE_IS_STDOUT;

		n = snprintf(
			line, sizeof(line),
			"sanswitch[%d]: warn: SANSWITCH_LOG_FILE=%s: %s%s%s: logging to stderr\n",
			(int)getpid(), getenv("SANSWITCH_LOG_FILE") ?: "",
			out ? "the program's standard output" : "cannot open (",
			out ? "" : strerror(open_err), out ? "" : ")");
		if (n > 0)
			san_log_stderr(line,
				       (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
	return fd;
}

void san_log_raw(const char *buf, size_t len)
{
	int saved = errno;
	int fd = san_log_file_fd();

	if (fd >= 0)
		san_log_write(fd, buf, len);
	else
		san_log_stderr(buf, len);
	errno = saved;
}

/* Format: "sanswitch[pid]: level: msg\n"; long messages are truncated, never split. */
static void san_logv(enum san_log_level level, const char *fmt, va_list ap)
{
	char buf[512];
	size_t len;
	int n;

	if ((unsigned int)level > SAN_LOG_DEBUG)
		level = SAN_LOG_DEBUG;
	n = snprintf(buf, sizeof(buf), "sanswitch[%d]: %s: ", (int)getpid(), san_log_names[level]);
	if (n < 0)
		return;
	len = (size_t)n;
	n = vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
	if (n > 0)
		len += (size_t)n < sizeof(buf) - len - 1 ? (size_t)n : sizeof(buf) - len - 2;
	buf[len++] = '\n';
	san_log_raw(buf, len);
}

void san_log(enum san_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	san_logv(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

/* The lines held back so far, as one line, before the next that goes out (or at exit). */
static void san_log_report_held(void)
{
	unsigned long n = __atomic_exchange_n(&san_log_held, 0, __ATOMIC_RELAXED);

	if (n)
		san_log(SAN_LOG_WARN,
			"%lu messages suppressed (more than %u a second from one place; "
			"SANSWITCH_LOG_RATE)",
			n, __atomic_load_n(&san_log_rate, __ATOMIC_RELAXED));
}

void san_log_flush_suppressed(void)
{
	san_log_report_held();
}

/* Seconds on a clock that only goes forward; the coarse clock is read without a system call. */
static uint32_t san_log_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts))
		return 0;
	return (uint32_t)ts.tv_sec;
}

void san_log_limited(struct san_ratelimit *site, enum san_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!san_ratelimit_pass(site, san_log_now(),
				__atomic_load_n(&san_log_rate, __ATOMIC_RELAXED))) {
		__atomic_fetch_add(&san_log_held, 1, __ATOMIC_RELAXED);
		return;
	}
	san_log_report_held();
	va_start(ap, fmt);
	san_logv(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

void san_log_atfork_child(void)
{
	/* what the parent held back is the parent's to report */
	__atomic_store_n(&san_log_held, 0, __ATOMIC_RELAXED);
	san_logfile_atfork_child();
}

void san_log_sandbox(void)
{
	(void)san_log_file_fd();
	san_logfile_sandbox();
}
