/* core — whether the host's CPUs are all taken (san_cpuload.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/san_core.h"
#include "core/san_cpuload.h"
#include "core/san_sys.h"

int san_cpuload_parse(const char *line)
{
	const char *p = line;
	char *end;
	long r;

	/* three load averages, then "R/T" */
	for (int field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	r = strtol(p, &end, 10);
	if (end == p || *end != '/' || r < 0 || r > 1000000)
		return -1;
	return (int)r;
}

bool san_cpuload_fold(int runnable, int cpus, bool *prev)
{
	bool now = runnable > 0 && cpus > 0 && runnable > cpus;
	bool both = now && *prev;

	*prev = now;
	return both;
}

bool san_cpuload_parse_wait(const char *line, uint64_t *wait_ns)
{
	const char *p = strchr(line, ' ');
	char *end;
	unsigned long long w;

	if (!p || p[1] < '0' || p[1] > '9')
		return false;
	w = strtoull(p + 1, &end, 10);
	if (*end != ' ' && *end != '\n' && *end != '\0')
		return false;
	*wait_ns = (uint64_t)w;
	return true;
}

bool san_cpuload_waited(uint64_t waited_ns, uint64_t elapsed_ns)
{
	return elapsed_ns && waited_ns >= elapsed_ns / 8;
}

/*
 * A small /proc file, read with raw calls (not through our wrappers; errno left alone), into
 * buf as a string: false if it cannot be.
 */
static bool read_proc(const char *path, char *buf, size_t size)
{
	long fd = SAN_SYS(SYS_openat, (long)AT_FDCWD, path, (long)(O_RDONLY | O_CLOEXEC));
	long n;

	if (fd < 0)
		return false;
	n = SAN_SYS(SYS_read, fd, buf, (long)size - 1);
	(void)san_sys_close((int)fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

static int read_runnable(void)
{
	char buf[128];

	return read_proc("/proc/loadavg", buf, sizeof(buf)) ? san_cpuload_parse(buf) : -1;
}

/* This thread's samples: when, and its run-queue wait then. */
static __thread uint64_t me_at, me_wait;
static __thread bool me_waits;

static bool thread_waits(uint64_t now_ns)
{
	char buf[128];
	uint64_t w;

	if (me_at && (int64_t)(now_ns - me_at) < (int64_t)SAN_CPULOAD_SAMPLE_NS)
		return me_waits;
	if (!read_proc("/proc/thread-self/schedstat", buf, sizeof(buf)) ||
	    !san_cpuload_parse_wait(buf, &w)) {
		me_at = now_ns ? now_ns : 1;
		return me_waits = false;
	}
	me_waits = me_at && w >= me_wait && san_cpuload_waited(w - me_wait, now_ns - me_at);
	me_at = now_ns ? now_ns : 1;
	me_wait = w;
	return me_waits;
}

static uint64_t sampled_at; /* 0: never */
static bool last_sample;    /* the last sample's own verdict */
static bool crowded;
static int cpus;

static bool host_crowded(uint64_t now_ns)
{
	uint64_t at = __atomic_load_n(&sampled_at, __ATOMIC_RELAXED);

	/*
	 * (Signed: another thread may have stamped a later clock than ours.) The sample is the
	 * thread's that moves the stamp: no flag that a fork or a signal handler's longjmp in
	 * the middle of a sample could leave set, nothing waited for.
	 */
	if ((at && (int64_t)(now_ns - at) < (int64_t)SAN_CPULOAD_SAMPLE_NS) ||
	    !__atomic_compare_exchange_n(&sampled_at, &at, now_ns ? now_ns : 1, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return __atomic_load_n(&crowded, __ATOMIC_RELAXED);
	if (!cpus) {
		int e = errno; /* (glibc's count may set it: the application's call is not ours) */

		cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
		errno = e;
	}
	__atomic_store_n(&crowded, san_cpuload_fold(read_runnable(), cpus, &last_sample),
			 __ATOMIC_RELAXED);
	return __atomic_load_n(&crowded, __ATOMIC_RELAXED);
}

bool san_cpuload_crowded(uint64_t now_ns)
{
	/*
	 * (the thread's sample is taken only while the host looks crowded). A process confined
	 * by seccomp may not open files: it is never crowded, it spins as before.
	 */
	if (san_core_is_sandboxed())
		return false;
	return host_crowded(now_ns) && thread_waits(now_ns);
}
