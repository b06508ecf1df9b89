/* core — the progress thread: one private libev loop per process, started lazily. */
#ifndef SAN_ENGINE_H
#define SAN_ENGINE_H

#include <stdbool.h>

struct ev_loop;

/*
 * The engine's work (side channels, upgrade handshakes, timers, doorbells) runs on one thread
 * with a private ev_loop_new(EVBACKEND_EPOLL) loop: never libev's default loop and no signal or
 * child watchers, because those belong to the application (which may use libev itself).
 *
 * The thread holds the reentrancy guard for its whole life, so every socket call it makes goes
 * straight to libc, and it blocks every signal, so the application's handlers run on the
 * application's threads as they would without us.
 */

/* Start the thread if it is not running. Idempotent and thread-safe; 0 or -errno. */
int san_engine_start(void);

/*
 * Run fn(arg) on the progress thread, soon, in call order. Starts the engine if needed.
 * 0, or -errno (then fn will never run and arg is still the caller's).
 */
int san_engine_call(void (*fn)(void *arg), void *arg);

/* The loop; only to be used on the progress thread (from a function run by san_engine_call). */
struct ev_loop *san_engine_loop(void);

/* True on the progress thread. */
bool san_engine_on_thread(void);

/*
 * fork() child: no thread survived. Forget the parent's engine (its queued work is dropped, its
 * loop's fds closed) so that the next san_engine_start() builds a fresh one in this process.
 */
void san_engine_atfork_child(void);

/* Stop and join the thread, running the work already queued first. For tests and exit. */
void san_engine_stop(void);

#endif /* SAN_ENGINE_H */
