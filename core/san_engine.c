/* core — the progress thread: one private libev loop per process, started lazily. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <ev.h>

#include "core/san_engine.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"

struct san_work {
	struct san_work *next;
	void (*fn)(void *arg);
	void *arg;
};

/*
 * Everything below is guarded by eng.lock except `loop`, which only the progress thread touches
 * once it runs, and `async`, whose ev_async_send() libev makes safe from any thread.
 */
static struct {
	pthread_mutex_t lock;
	pthread_t thread;
	bool running;  /* thread created and not yet joined */
	bool stopping; /* san_engine_stop() asked the loop to end */
	struct ev_loop *loop;
	ev_async async;
	struct san_work *head, **tail;
} eng = { .lock = PTHREAD_MUTEX_INITIALIZER, .tail = &eng.head };

static __thread bool on_engine_thread;

bool san_engine_on_thread(void)
{
	return on_engine_thread;
}

struct ev_loop *san_engine_loop(void)
{
	return eng.loop;
}

/* Take the whole queue under the lock, run it outside: work may queue more work. */
static void run_queue(void)
{
	struct san_work *w, *next;
	bool stop;

	pthread_mutex_lock(&eng.lock);
	w = eng.head;
	eng.head = NULL;
	eng.tail = &eng.head;
	stop = eng.stopping;
	pthread_mutex_unlock(&eng.lock);

	for (; w; w = next) {
		next = w->next;
		w->fn(w->arg);
		free(w);
	}
	if (stop)
		ev_break(eng.loop, EVBREAK_ALL);
}

static void on_async(struct ev_loop *loop, ev_async *w, int revents)
{
	run_queue();
}

static void *engine_main(void *unused)
{
	on_engine_thread = true;
	san_fd_guard_enter(); /* for good: our own socket calls bypass the wrappers */
	ev_run(eng.loop, 0);
	run_queue(); /* work queued after the last wakeup still runs */
	return NULL;
}

static int start_locked(void)
{
	sigset_t all, old;
	int err;

	if (eng.running)
		return 0;
	san_fd_guard_enter(); /* libev's epoll_create1/eventfd are ours, not the application's */
	eng.loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	san_fd_guard_leave();
	if (!eng.loop) {
		san_err("engine: cannot create the event loop; connections stay on kernel TCP");
		return -ENOMEM;
	}
	ev_async_init(&eng.async, on_async);
	ev_async_start(eng.loop, &eng.async);

	/* The thread inherits this mask: it must never take the application's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&eng.thread, NULL, engine_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		san_err("engine: cannot start the progress thread: error %d; staying on kernel TCP",
			err);
		ev_async_stop(eng.loop, &eng.async);
		ev_loop_destroy(eng.loop);
		eng.loop = NULL;
		return -err;
	}
	eng.running = true;
	eng.stopping = false;
	san_debug("engine: progress thread started");
	return 0;
}

int san_engine_start(void)
{
	int ret;

	pthread_mutex_lock(&eng.lock);
	ret = start_locked();
	pthread_mutex_unlock(&eng.lock);
	return ret;
}

int san_engine_call(void (*fn)(void *arg), void *arg)
{
	struct san_work *w = malloc(sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->next = NULL;
	w->fn = fn;
	w->arg = arg;

	pthread_mutex_lock(&eng.lock);
	ret = eng.stopping ? -ESHUTDOWN : start_locked();
	if (ret == 0) {
		*eng.tail = w;
		eng.tail = &w->next;
	}
	pthread_mutex_unlock(&eng.lock);
	if (ret) {
		free(w);
		return ret;
	}
	ev_async_send(eng.loop, &eng.async);
	return 0;
}

void san_engine_stop(void)
{
	pthread_t t;

	pthread_mutex_lock(&eng.lock);
	if (!eng.running || eng.stopping) {
		pthread_mutex_unlock(&eng.lock);
		return;
	}
	eng.stopping = true;
	t = eng.thread;
	pthread_mutex_unlock(&eng.lock);

	ev_async_send(eng.loop, &eng.async);
	if (!on_engine_thread)
		pthread_join(t, NULL);

	pthread_mutex_lock(&eng.lock);
	ev_async_stop(eng.loop, &eng.async);
	ev_loop_destroy(eng.loop);
	eng.loop = NULL;
	eng.running = false;
	eng.stopping = false;
	pthread_mutex_unlock(&eng.lock);
}

void san_engine_atfork_child(void)
{
	struct san_work *w, *next;

	/*
	 * Another parent thread may have held the lock at fork time: in the child nobody will ever
	 * release it, so start from a fresh one. The parent's queued work belongs to the parent.
	 */
	pthread_mutex_init(&eng.lock, NULL);
	for (w = eng.head; w; w = next) {
		next = w->next;
		free(w);
	}
	eng.head = NULL;
	eng.tail = &eng.head;
	if (eng.loop) {
		/* Close our copies of the loop's epoll fd and eventfd; the parent keeps its own. */
		san_fd_guard_enter();
		ev_loop_destroy(eng.loop);
		san_fd_guard_leave();
		eng.loop = NULL;
	}
	eng.running = false;
	eng.stopping = false;
	on_engine_thread = false;
}
