/* core — the log file (SANSWITCH_LOG_FILE): its name, opened at the first line, kept ours. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_logfile.h"

/*
 * The state is a handful of atomics, no lock: lines are written from any thread and from
 * signal handlers. Only the opener (who took busy) writes fd, dev and ino; a reader that loses
 * a race with it sends that one line to stderr.
 */
static char lf_pattern[PATH_MAX]; /* empty: no file */
static int lf_fd = -1;		  /* the open file, or -1 */
static uint64_t lf_dev, lf_ino;	  /* its identity, to tell it from a number the program reused */
static bool lf_busy;		  /* someone is opening it */
static bool lf_failed;		  /* an open failed: stderr for good (warned once) */
static bool lf_frozen;		  /* sandboxed: write() only */
static bool lf_too_long;	  /* the pattern did not fit lf_pattern: its open fails */

int san_logfile_expand(const char *pattern, pid_t pid, char *out, size_t size)
{
	size_t len = 0;
	const char *s;

	for (s = pattern; *s; s++) {
		char num[24];
		const char *add = s;
		size_t n = 1;

		if (s[0] == '%' && s[1] == 'p') {
			n = (size_t)snprintf(num, sizeof(num), "%d", (int)pid);
			add = num;
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			s++;
		}
		if (len + n >= size)
			return -ENAMETOOLONG;
		memcpy(out + len, add, n);
		len += n;
	}
	if (len >= size)
		return -ENAMETOOLONG;
	out[len] = '\0';
	return 0;
}

bool san_logfile_per_process(const char *pattern)
{
	const char *s;

	for (s = pattern; *s; s++) {
		if (*s != '%')
			continue;
		if (s[1] == 'p')
			return true;
		if (s[1] == '%')
			s++; /* "%%p" is a '%' and a 'p' */
	}
	return false;
}

/* Is @fd still the file we opened? (The program may have closed it and reused the number.) */
static bool san_logfile_is_ours(int fd)
{
	struct stat st;

	return !fstat(fd, &st) &&
	       (uint64_t)st.st_dev == __atomic_load_n(&lf_dev, __ATOMIC_RELAXED) &&
	       (uint64_t)st.st_ino == __atomic_load_n(&lf_ino, __ATOMIC_RELAXED);
}

void san_logfile_init(const char *pattern)
{
	int fd = __atomic_exchange_n(&lf_fd, -1, __ATOMIC_ACQ_REL);

	if (fd >= 0 && san_logfile_is_ours(fd))
		syscall(SYS_close, fd);
	lf_pattern[0] = '\0';
	lf_too_long = pattern && strlen(pattern) >= sizeof(lf_pattern);
	if (lf_too_long)
		strcpy(lf_pattern, "?"); /* (not a name: never opened, see san_logfile_open) */
	else if (pattern)
		strcpy(lf_pattern, pattern);
	__atomic_store_n(&lf_failed, false, __ATOMIC_RELAXED);
	__atomic_store_n(&lf_frozen, false, __ATOMIC_RELAXED);
	__atomic_store_n(&lf_busy, false, __ATOMIC_RELEASE);
}

const char *san_logfile_pattern(void)
{
	return lf_pattern[0] ? lf_pattern : NULL;
}

/* Log lines never go into the program's output, even when asked to by name. */
static bool san_logfile_is_stdout(const struct stat *st)
{
	struct stat out;

	return !fstat(STDOUT_FILENO, &out) && out.st_dev == st->st_dev && out.st_ino == st->st_ino;
}

/*
 * Open the file (the caller holds busy). Straight system calls: the library interposes open
 * and close, and the log must not go through its own wrappers.
 */
static int san_logfile_open(int *open_err)
{
	char path[PATH_MAX];
	struct stat st;
	int fd = -1, err;

	err = lf_too_long ? -ENAMETOOLONG
			  : san_logfile_expand(lf_pattern, getpid(), path, sizeof(path));
	if (!err) {
		fd = (int)syscall(SYS_openat, AT_FDCWD, path,
				  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
		err = fd < 0 ? -errno : 0;
	}
	if (!err && fd <= STDERR_FILENO) {
		/*
		 * The program closed a standard number (git clone closes its stdout): the file got
		 * it, and would be taken for that stream, by us and by the program, which may open
		 * something else there next. Above 2.
		 */
		int up = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

		err = up < 0 ? -errno : 0;
		syscall(SYS_close, fd);
		fd = up;
	}
	if (!err && fstat(fd, &st))
		err = -errno;
	else if (!err && san_logfile_is_stdout(&st))
		err = -SAN_LOGFILE_IS_STDOUT;
	if (err && fd >= 0)
		syscall(SYS_close, fd);
	if (err) {
		if (!__atomic_exchange_n(&lf_failed, true, __ATOMIC_RELAXED))
			*open_err = -err;
		return -1;
	}
	__atomic_store_n(&lf_dev, (uint64_t)st.st_dev, __ATOMIC_RELAXED);
	__atomic_store_n(&lf_ino, (uint64_t)st.st_ino, __ATOMIC_RELAXED);
	__atomic_store_n(&lf_fd, fd, __ATOMIC_RELEASE);
	return fd;
}

int san_logfile_fd(int *open_err)
{
	int fd;

	if (!lf_pattern[0] || __atomic_load_n(&lf_failed, __ATOMIC_RELAXED))
		return -1;
	fd = __atomic_load_n(&lf_fd, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&lf_frozen, __ATOMIC_RELAXED))
		return fd;
	if (fd >= 0 && san_logfile_is_ours(fd))
		return fd;
	if (__atomic_exchange_n(&lf_busy, true, __ATOMIC_ACQUIRE))
		return -1;
	/* Another thread may have (re)opened it between our look and the flag. */
	fd = __atomic_load_n(&lf_fd, __ATOMIC_ACQUIRE);
	if (fd < 0 || !san_logfile_is_ours(fd)) {
		/* Never closed here: a number that is not our file any more is the program's. */
		__atomic_store_n(&lf_fd, -1, __ATOMIC_RELAXED);
		fd = san_logfile_open(open_err);
	}
	__atomic_store_n(&lf_busy, false, __ATOMIC_RELEASE);
	return fd;
}

void san_logfile_atfork_child(void)
{
	int fd = __atomic_load_n(&lf_fd, __ATOMIC_ACQUIRE);

	/* An opener in the parent was another thread: it does not run in this child. */
	__atomic_store_n(&lf_busy, false, __ATOMIC_RELEASE);
	if (!lf_pattern[0] || __atomic_load_n(&lf_frozen, __ATOMIC_RELAXED) ||
	    !san_logfile_per_process(lf_pattern))
		return; /* one file for all: the inherited fd appends to it as the parent's does */
	if (fd >= 0 && san_logfile_is_ours(fd))
		syscall(SYS_close, fd);
	__atomic_store_n(&lf_fd, -1, __ATOMIC_RELEASE);
}

void san_logfile_sandbox(void)
{
	__atomic_store_n(&lf_frozen, true, __ATOMIC_RELEASE);
}
