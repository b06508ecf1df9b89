/* tests/unit: what a call printed on stderr (unit_stderr.h). */
#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/unit_stderr.h"

char *unit_stderr_of(void (*fn)(void))
{
	static char buf[8192];
	char p[] = "/tmp/check_unit_err.XXXXXX";
	int fd = mkstemp(p), saved = dup(2);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	unlink(p);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	fn();
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

int unit_count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}
