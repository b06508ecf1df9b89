/* tests/unit: the list of Check suites; one line here adds a suite to the runner. */
#ifndef SAN_UNIT_SUITES_H
#define SAN_UNIT_SUITES_H

#include <check.h>

/*
 * Each X(name) is a file tests/unit/check_<name>.c exporting Suite *make_<name>_suite(void).
 * check_main.c expands this list to declare and run them all.
 */
#define SAN_UNIT_SUITES(X) \
	X(err)             \
	X(wire)            \
	X(msg)             \
	X(hash)            \
	X(frame)           \
	X(credit)          \
	X(window)          \
	X(rcvwin)          \
	X(ahead)           \
	X(bulk)            \
	X(stage)           \
	X(slab)            \
	X(regcache)        \
	X(memhook)         \
	X(vpool)           \
	X(linkrate)        \
	X(cpuload)         \
	X(upgrade)         \
	X(shm_ring)        \
	X(shm_cma)         \
	X(shm_switch)      \
	X(fdtable)          \
	X(owner)            \
	X(forked)           \
	X(vredir)           \
	X(sidechan)         \
	X(log)              \
	X(config)           \
	X(conf)             \
	X(stats)            \
	X(stats_conn)       \
	X(epoll_early)      \
	X(epinfo)           \
	X(epshadow)         \
	X(engine)           \
	X(sig)              \
	X(execpath)         \
	X(lite)

#define SAN_UNIT_DECLARE(name) Suite *make_##name##_suite(void);
SAN_UNIT_SUITES(SAN_UNIT_DECLARE)
#undef SAN_UNIT_DECLARE

/* Per-test-case timeout, seconds; exhaustive model checks get a larger one. */
#define SAN_UNIT_TIMEOUT 10
#define SAN_UNIT_TIMEOUT_MODEL 120

#endif /* SAN_UNIT_SUITES_H */
