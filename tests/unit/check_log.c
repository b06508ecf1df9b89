/*
 * tests/unit: core/san_log, san_logfile, san_ratelimit — the per-second budget, the file's name
 * ("%p"), opening it at the first line and again when the program took its fd, the fork child's
 * own file, the "suppressed" line.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_log.h"
#include "core/san_logfile.h"
#include "core/san_ratelimit.h"
#include "tests/unit/suites.h"

static char dir[64];
static int saved_level;
static uint32_t saved_rate;

static void log_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_log.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	saved_level = san_log_level;
	saved_rate = san_log_rate;
}

static void log_teardown(void)
{
	char cmd[128];

	san_logfile_init(NULL);
	san_log_level = saved_level;
	san_log_rate = saved_rate;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The whole of file @path (at most 64 KiB), NUL-terminated; "" if there is none. */
static char *slurp(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

/* ---- the budget ------------------------------------------------------------ */

START_TEST(test_rate_budget)
{
	struct san_ratelimit rl = { 0 };
	int i, passed = 0;

	for (i = 0; i < 3; i++)
		ck_assert(san_ratelimit_pass(&rl, 100, 3));
	for (i = 0; i < 1000; i++)
		passed += san_ratelimit_pass(&rl, 100, 3);
	ck_assert_int_eq(passed, 0);
	/* saturated at the limit, not counting on (a flood writes nothing) */
	ck_assert_uint_eq((uint32_t)rl.word, 3);
	/* the next second has a fresh budget; so has any other second, earlier ones too */
	ck_assert(san_ratelimit_pass(&rl, 101, 3));
	ck_assert(san_ratelimit_pass(&rl, 101, 3));
	ck_assert(san_ratelimit_pass(&rl, 101, 3));
	ck_assert(!san_ratelimit_pass(&rl, 101, 3));
	ck_assert(san_ratelimit_pass(&rl, 7, 3));
	/* second 0 of a zeroed budget is a second like any other */
	rl.word = 0;
	ck_assert(san_ratelimit_pass(&rl, 0, 1));
	ck_assert(!san_ratelimit_pass(&rl, 0, 1));
	/* 0: no limit */
	for (i = 0; i < 1000; i++)
		ck_assert(san_ratelimit_pass(&rl, 0, 0));
}
END_TEST

struct racer {
	struct san_ratelimit *rl;
	int passed;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	int i;

	for (i = 0; i < 100000; i++)
		r->passed += san_ratelimit_pass(r->rl, 42, 50);
	return NULL;
}

/* Four threads on one budget in one second: exactly the limit gets through, no lock. */
START_TEST(test_rate_threads)
{
	struct san_ratelimit rl = { 0 };
	struct racer r[4];
	pthread_t t[4];
	int i, total = 0;

	for (i = 0; i < 4; i++) {
		r[i] = (struct racer){ &rl, 0 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		total += r[i].passed;
	}
	ck_assert_int_eq(total, 50);
}
END_TEST

/* ---- the file's name --------------------------------------------------------- */

START_TEST(test_expand)
{
	static const struct {
		const char *pattern;
		const char *want;
	} cases[] = {
		{ "/var/log/s.log", "/var/log/s.log" },
		{ "/tmp/s.%p.log", "/tmp/s.4242.log" },
		{ "%p%p", "42424242" },
		{ "a%%p", "a%p" },
		{ "a%%%p", "a%4242" },
		{ "100%", "100%" },
		{ "%q%", "%q%" },
		{ "", "" },
	};
	char out[64];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(san_logfile_expand(cases[i].pattern, 4242, out, sizeof(out)), 0);
		ck_assert_str_eq(out, cases[i].want);
	}
	/* exactly fitting, and one byte short (the NUL counts) */
	ck_assert_int_eq(san_logfile_expand("x%p", 12, out, 4), 0);
	ck_assert_str_eq(out, "x12");
	ck_assert_int_eq(san_logfile_expand("x%p", 12, out, 3), -ENAMETOOLONG);
	ck_assert_int_eq(san_logfile_expand("abc", 12, out, 3), -ENAMETOOLONG);
	ck_assert_int_eq(san_logfile_expand("", 12, out, 1), 0);
}
END_TEST

START_TEST(test_per_process)
{
	ck_assert(san_logfile_per_process("/tmp/x.%p"));
	ck_assert(san_logfile_per_process("%p"));
	ck_assert(san_logfile_per_process("a%%%p"));
	ck_assert(!san_logfile_per_process("a%%p"));
	ck_assert(!san_logfile_per_process("/tmp/x.log"));
	ck_assert(!san_logfile_per_process("%"));
	ck_assert(!san_logfile_per_process(""));
}
END_TEST

/* ---- the file ------------------------------------------------------------------ */

/* Opened at the first line only, 0600, appended to; the program's reuse of its fd is noticed. */
START_TEST(test_file_open_and_taken)
{
	char pattern[128], path[128];
	struct stat st;
	int err = 0, fd, fd2, other;

	snprintf(pattern, sizeof(pattern), "%s/s.%%p.log", dir);
	snprintf(path, sizeof(path), "%s/s.%d.log", dir, (int)getpid());
	san_logfile_init(pattern);
	ck_assert_int_ne(access(path, F_OK), 0); /* nothing logged, no file */
	fd = san_logfile_fd(&err);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0077, 0); /* private: no bits for group or others */
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ck_assert_int_eq(san_logfile_fd(&err), fd);
	san_log_raw("one\n", 4);

	/* The program closes our fd and opens something of its own on the number. */
	other = open("/dev/null", O_WRONLY);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(dup2(other, fd), fd);
	fd2 = san_logfile_fd(&err);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_ne(fd2, fd);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD) >= 0, 1); /* the program's fd left open */
	san_log_raw("two\n", 4);
	ck_assert_str_eq(slurp(path), "one\ntwo\n");
	close(other);
	close(fd);
}
END_TEST

/* A file that cannot be opened: -1 (stderr), the error said once, never tried again. */
START_TEST(test_file_cannot_open)
{
	char pattern[128];
	int err = 0;

	snprintf(pattern, sizeof(pattern), "%s/no/such/dir/%%p.log", dir);
	san_logfile_init(pattern);
	ck_assert_int_eq(san_logfile_fd(&err), -1);
	ck_assert_int_eq(err, ENOENT);
	err = 0;
	ck_assert_int_eq(san_logfile_fd(&err), -1);
	ck_assert_int_eq(err, 0);
	/* no file at all: -1, no error */
	san_logfile_init(NULL);
	ck_assert_int_eq(san_logfile_fd(&err), -1);
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_null(san_logfile_pattern());
}
END_TEST

/* A name that is where standard output goes is not used: log lines never go there. */
START_TEST(test_file_not_stdout)
{
	char path[128];
	int err = 0, fd, saved = dup(STDOUT_FILENO);

	snprintf(path, sizeof(path), "%s/out", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
	san_logfile_init(path);
	ck_assert_int_eq(san_logfile_fd(&err), -1);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(fd);
	ck_assert_int_eq(err, SAN_LOGFILE_IS_STDOUT);
	/* the same name, once stdout is elsewhere, is a log file like any other */
	san_logfile_init(path);
	err = 0;
	ck_assert_int_ge(san_logfile_fd(&err), 0);
	ck_assert_int_eq(err, 0);
}
END_TEST

/*
 * A program that closed its stdout (git clone does) has the file opened on a number above 2,
 * not on 1, where it would be taken for standard output (and the program's next file would
 * not get the number it expects). Before, the lines went to stderr with a warning.
 */
START_TEST(test_file_stdout_closed)
{
	char path[128];
	int err = 0, fd, saved = dup(STDOUT_FILENO);

	ck_assert_int_ge(saved, 0);
	snprintf(path, sizeof(path), "%s/closed-out", dir);
	ck_assert_int_eq(close(STDOUT_FILENO), 0);
	san_logfile_init(path);
	fd = san_logfile_fd(&err);
	ck_assert_int_eq(fcntl(STDOUT_FILENO, F_GETFD), -1); /* 1 still free */
	ck_assert_int_eq(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	ck_assert_int_eq(err, 0);
	ck_assert_int_gt(fd, STDERR_FILENO);
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	san_log_raw("line\n", 5);
	ck_assert_str_eq(slurp(path), "line\n");
}
END_TEST

/* A fork child with "%p" logs to a file of its own; without, to the parent's. */
START_TEST(test_file_fork)
{
	char pattern[128], mine[128], its[128];
	const char *name[] = { "s.%p.log", "one.log" };
	int k, st;

	for (k = 0; k < 2; k++) {
		pid_t pid;

		snprintf(pattern, sizeof(pattern), "%s/%s", dir, name[k]);
		san_logfile_init(pattern);
		san_log_raw("parent\n", 7);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (!pid) {
			san_log_atfork_child();
			san_log_raw("child\n", 6);
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		ck_assert_int_eq(san_logfile_expand(pattern, getpid(), mine, sizeof(mine)), 0);
		ck_assert_int_eq(san_logfile_expand(pattern, pid, its, sizeof(its)), 0);
		if (k == 0) {
			ck_assert_str_eq(slurp(mine), "parent\n");
			ck_assert_str_eq(slurp(its), "child\n");
		} else {
			ck_assert_str_eq(slurp(mine), "parent\nchild\n");
		}
	}
}
END_TEST

/* ---- lines through the budget ------------------------------------------------------ */

/*
 * One call site, 10 lines at 3 a second: 3 go out (up to 6 if a second turns meanwhile), the
 * rest are told as one "suppressed" line, in the log file, with the pid; stdout gets nothing.
 */
START_TEST(test_limited_lines)
{
	char pattern[128], path[128], *text;
	const char *p;
	int i, lines, held;

	snprintf(pattern, sizeof(pattern), "%s/lim.log", dir);
	snprintf(path, sizeof(path), "%s", pattern);
	san_logfile_init(pattern);
	san_log_level = SAN_LOG_INFO;
	san_log_rate = 3;
	for (i = 0; i < 10; i++)
		san_info("fd %d: line %d", 7, i);
	san_debug("not at this level");
	san_log_flush_suppressed();
	san_log_flush_suppressed(); /* (told once) */
	text = slurp(path);
	lines = count(text, ": info: fd 7: line ");
	p = strstr(text, ": warn: ");
	ck_assert_ptr_nonnull(p);
	held = atoi(p + strlen(": warn: "));
	ck_assert_int_ge(lines, 3);
	ck_assert_int_le(lines, 6);
	ck_assert_int_eq(lines + held, 10);
	ck_assert_int_eq(count(text, "messages suppressed (more than 3 a second"), 1);
	ck_assert_int_eq(count(text, "not at this level"), 0);
	{
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "sanswitch[%d]: ", (int)getpid());
		ck_assert_int_eq(count(text, prefix), lines + 1);
	}
	/* no limit: all of them */
	san_log_rate = 0;
	for (i = 0; i < 50; i++)
		san_info("unlimited %d", i);
	ck_assert_int_eq(count(slurp(path), "unlimited "), 50);
}
END_TEST

/*
 * The variables, through the library's init: a bad level and a bad rate are told, in the file
 * already (it is named first); a good rate is taken.
 */
START_TEST(test_init_env)
{
	char pattern[128], *text;

	snprintf(pattern, sizeof(pattern), "%s/env.log", dir);
	setenv("SANSWITCH_CONF", "none", 1);
	setenv("SANSWITCH_LOG_FILE", pattern, 1);
	setenv("SANSWITCH_LOG", "loud", 1);
	setenv("SANSWITCH_LOG_RATE", "-3", 1);
	san_log_level = SAN_LOG_WARN;
	san_config_init();
	text = slurp(pattern);
	ck_assert_int_eq(count(text, "SANSWITCH_LOG=loud not understood"), 1);
	ck_assert_int_eq(count(text, "SANSWITCH_LOG_RATE=-3 not understood (accepted: 0..1000000 "
				     "lines a second, 0: no limit), using 20"),
			 1);
	ck_assert_int_eq(san_log_level, SAN_LOG_WARN);
	ck_assert_uint_eq(san_log_rate, SAN_LOG_RATE_DEFAULT);
	setenv("SANSWITCH_LOG", "debug", 1);
	setenv("SANSWITCH_LOG_RATE", "5", 1);
	san_config_init();
	ck_assert_int_eq(san_log_level, SAN_LOG_DEBUG);
	ck_assert_uint_eq(san_log_rate, 5);
	unsetenv("SANSWITCH_LOG_FILE");
	unsetenv("SANSWITCH_LOG");
	unsetenv("SANSWITCH_LOG_RATE");
	unsetenv("SANSWITCH_CONF");
	san_cfg = san_config_defaults;
}
END_TEST

Suite *make_log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_checked_fixture(tc, log_setup, log_teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_rate_budget);
	tcase_add_test(tc, test_rate_threads);
	tcase_add_test(tc, test_expand);
	tcase_add_test(tc, test_per_process);
	tcase_add_test(tc, test_file_open_and_taken);
	tcase_add_test(tc, test_file_cannot_open);
	tcase_add_test(tc, test_file_not_stdout);
	tcase_add_test(tc, test_file_stdout_closed);
	tcase_add_test(tc, test_file_fork);
	tcase_add_test(tc, test_limited_lines);
	tcase_add_test(tc, test_init_env);
	suite_add_tcase(s, tc);
	return s;
}
