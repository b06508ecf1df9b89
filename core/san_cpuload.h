/* core — whether the host's CPUs are all taken: a wait's spin would take time its peer needs. */
#ifndef SAN_CPULOAD_H
#define SAN_CPULOAD_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A spin pays when the peer runs on another CPU and answers within the spin: then the wait
 * never sleeps and is never woken. When more threads want the CPUs than there are, some thread
 * waits for one, perhaps the very peer the spin waits for, and every microsecond spun is one
 * the others did not get: nginx's 2 workers and wrk's 2 threads on 2 CPUs served about 5 %
 * more requests than over kernel TCP with no spin, none more with it (same runs).
 *
 * san_cpuload_crowded() says so when both of these hold:
 *  - the host: more threads runnable than CPUs online, in two samples in a row (one is a blip:
 *    a kworker, a timer), from the kernel's count (the fourth field of /proc/loadavg, "R/T",
 *    the caller included);
 *  - this thread: it waited for a CPU (runnable, not running) at least 1/8 of the time since
 *    its last sample (/proc/thread-self/schedstat, second field). The host's count alone
 *    takes a niced batch job for a rival, which the scheduler hardly lets run beside us, and
 *    a spin there still pays.
 * A sample at most every SAN_CPULOAD_SAMPLE_NS, the host's by whichever wait comes first, the
 * thread's by the thread (three system calls each: a few microseconds every 10 ms). now_ns:
 * CLOCK_MONOTONIC. Where /proc cannot be read nothing is crowded (the spin's own shrinking
 * still applies). Two processes that take turns on one CPU (each yields to the other: the spin
 * policy, san_watch.c) make no count above the CPUs, and are not crowded.
 */
#define SAN_CPULOAD_SAMPLE_NS 10000000ull

bool san_cpuload_crowded(uint64_t now_ns);

/* The runnable count of a /proc/loadavg line ("0.52 0.58 0.59 3/228 12345"); -1 if malformed. */
int san_cpuload_parse(const char *line);

/*
 * One sample's verdict folded into the last: crowded when this sample and the one before both
 * saw more runnable threads than CPUs. *prev holds the last sample's own verdict.
 */
bool san_cpuload_fold(int runnable, int cpus, bool *prev);

/* The run-queue wait (ns) of a schedstat line ("cpu_ns wait_ns slices"); false if malformed. */
bool san_cpuload_parse_wait(const char *line, uint64_t *wait_ns);

/* A thread that waited waited_ns for a CPU in elapsed_ns: is that 1/8 or more? */
bool san_cpuload_waited(uint64_t waited_ns, uint64_t elapsed_ns);

#endif /* SAN_CPULOAD_H */
