/* core — libev loaded at first need: its functions in one table, filled by dlopen + dlsym. */
#ifndef SAN_EV_H
#define SAN_EV_H

#include <ev.h>

/*
 * libsanswitch.so does not link libev: a process that never starts the engine (most preloaded
 * processes: a shell, /bin/true, a build tool that makes no TCP socket) never maps libev.so.4,
 * which cost every preloaded process's start about a sixth of its plain time (docs/behaviour.md,
 * "Start-up"). Everything the engine calls of libev goes through san_ev, which san_ev_load()
 * fills when the engine first starts (san_engine.c, before ev_loop_new). The rest of libev's API
 * the code uses is macros of <ev.h> (ev_io_init, ev_timer_set, ev_is_active...), which need no
 * entry. Every call through the table is made on a loop, and a loop exists only once the table
 * is filled, in this process or in the parent it was forked from.
 */
#define SAN_EV_FUNCS(X)           \
	X(ev_async_send)          \
	X(ev_async_start)         \
	X(ev_async_stop)          \
	X(ev_break)               \
	X(ev_io_start)            \
	X(ev_io_stop)             \
	X(ev_loop_destroy)        \
	X(ev_loop_new)            \
	X(ev_now)                 \
	X(ev_run)                 \
	X(ev_set_loop_release_cb) \
	X(ev_timer_start)         \
	X(ev_timer_stop)

/* One pointer per function, of the type <ev.h> declares it with. */
#define SAN_EV_MEMBER(name) __typeof__(name) *name;
struct san_ev_syms {
	SAN_EV_FUNCS(SAN_EV_MEMBER)
};
#undef SAN_EV_MEMBER

/* Filled by the first successful san_ev_load(); read-only after it. */
extern struct san_ev_syms san_ev;

/*
 * Make san_ev usable: 0, or -ENOSYS when it never will be in this process (libev.so.4 or one of
 * its functions cannot be loaded: an error line says which, once; the engine does not start and
 * connections stay on kernel TCP). Decided once per process; once decided, a call costs one load.
 * The library calls it with none of its locks held at a process's first connect, accept and
 * listen (san_sock.c), so that the engine's first start, under its lock and often under a
 * connection's, finds it done; and no thread ever waits for another's dlopen() (san_ev.c): one
 * inside a library constructor holds the loader's lock, which that dlopen() may wait for. A
 * process whose first need comes another way (a connection adopted at exec) loads it there.
 */
int san_ev_load(void);

#endif /* SAN_EV_H */
