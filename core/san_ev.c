/* core — libev loaded at first need: dlopen + dlsym of libev.so.4 (san_ev.h). */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "core/san_ev.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"

struct san_ev_syms san_ev;

/* 0: not known yet; 1: san_ev is filled; 2: a thread is filling it; -1: cannot be had */
static int state;

/*
 * No thread waits for another's dlopen(): each first caller loads on its own (dlopen counts
 * its references, and is re-entrant for a thread that holds the loader's lock already, as one
 * inside a library constructor does), and the first to finish fills the table. A wait for
 * another thread's dlopen, as pthread_once made it, could deadlock: that thread may wait for
 * the loader's lock, which this one holds from a constructor. Only the copy of a few pointers is
 * waited for.
 */
/* This thread could not load it: so be it for the process, unless another thread already did. */
static int failed(void)
{
	int z = 0;

	(void)__atomic_compare_exchange_n(&state, &z, -1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 1 ? 0 : -ENOSYS;
}

static int load_fresh(void)
{
	static int said; /* the error line goes once per process */
	struct san_ev_syms t;
	const char *missing = NULL;
	void *h;
	int want = 0;

	/*
	 * Never closed: the engine's loop lives as long as the process. RTLD_LOCAL: nothing of
	 * libev joins the application's global scope, and our table holds libev.so.4's own
	 * functions even when the program exports ev_* names of its own (an embedded libev). A
	 * program linked with libev.so.4 already has it: dlopen hands back that copy.
	 */
	san_fd_guard_enter(); /* (its fds, were it to open any, are not the application's) */
	h = dlopen("libev.so.4", RTLD_NOW | RTLD_LOCAL);
	san_fd_guard_leave();
	if (!h) {
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			san_err("engine: cannot load libev (%s): connections stay on kernel TCP",
				dlerror());
		return failed();
	}
#define SAN_EV_GET(name)                                                    \
	if (!missing && !(t.name = (__typeof__(name) *)dlsym(h, #name))) \
		missing = #name;
	SAN_EV_FUNCS(SAN_EV_GET)
#undef SAN_EV_GET
	if (missing) {
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			san_err("engine: libev.so.4 lacks %s: connections stay on kernel TCP",
				missing);
		return failed();
	}
	if (__atomic_compare_exchange_n(&state, &want, 2, false, __ATOMIC_ACQUIRE,
					__ATOMIC_ACQUIRE)) {
		san_ev = t;
		__atomic_store_n(&state, 1, __ATOMIC_RELEASE);
		return 0;
	}
	/* another thread got there first: its table is ours (the same library, the same symbols) */
	while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2)
		sched_yield();
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 1 ? 0 : -ENOSYS;
}

int san_ev_load(void)
{
	int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

	if (st == 1)
		return 0;
	if (st == -1)
		return -ENOSYS;
	if (st == 2) {
		while ((st = __atomic_load_n(&state, __ATOMIC_ACQUIRE)) == 2)
			sched_yield();
		return st == 1 ? 0 : -ENOSYS;
	}
	return load_fresh();
}
