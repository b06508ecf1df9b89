/* core — libev loaded at first need: dlopen + dlsym of libev.so.4 (san_ev.h). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/san_ev.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"

struct san_ev_syms san_ev;

static int load_rc = -ENOSYS;

static void load_once(void)
{
	const char *missing = NULL;
	void *h;

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
		san_err("engine: cannot load libev (%s): connections stay on kernel TCP",
			dlerror());
		return;
	}
#define SAN_EV_GET(name)                                                      \
	if (!missing && !(san_ev.name = (__typeof__(name) *)dlsym(h, #name))) \
		missing = #name;
	SAN_EV_FUNCS(SAN_EV_GET)
#undef SAN_EV_GET
	if (missing) {
		san_err("engine: libev.so.4 lacks %s: connections stay on kernel TCP", missing);
		memset(&san_ev, 0, sizeof(san_ev));
		return;
	}
	load_rc = 0;
}

int san_ev_load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_once);
	return load_rc;
}
