/* core — will an exec find a program to run? (san_execpath.h) */
#include "core/san_execpath.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_ok(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

bool san_exec_may_run(const char *file, bool search, const char *path_env)
{
	size_t fl;
	char buf[PATH_MAX];

	if (!file || !*file)
		return false;
	if (!search || strchr(file, '/'))
		return file_ok(file);
	fl = strlen(file);
	for (const char *p = path_env ? path_env : "/bin:/usr/bin";; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = end > p ? (size_t)(end - p) : 1;

		if (dl + 1 + fl < sizeof(buf)) {
			memcpy(buf, end > p ? p : ".", dl);
			buf[dl] = '/';
			memcpy(buf + dl + 1, file, fl + 1);
			if (file_ok(buf))
				return true;
		}
		if (!*end)
			return false;
		p = end;
	}
}
