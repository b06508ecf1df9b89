/* core — the progress thread: one private libev loop per process, started lazily. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "core/san_engine.h"
#include "core/san_ev.h"
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

/*
 * fork() and the loop. The child cannot destroy its copy of the loop (to close its epoll fd and
 * eventfd) if the progress thread was changing it at the fork: an array libev had just
 * reallocated would be freed a second time (ASan found that in a fork_child_close case of
 * t_edge_endings). So the progress thread holds loop_lock whenever it runs libev's code, all
 * but the poll itself (libev's release/acquire callbacks), and whoever creates or destroys the
 * loop holds it too; fork's prepare handler takes it, so the child gets a whole loop. The wait is
 * bounded (the thread may be waiting for a lock the forking thread holds): past FORK_WAIT_MS the
 * child leaves its copy alone, its memory and its two fds (both close-on-exec).
 *
 * loop_lock also covers the thread's birth. A new thread runs code of the C library and of a
 * sanitizer runtime before engine_main: ASan's thread setup allocates (pthread_getattr_np's
 * realloc) and may hold a size class's lock of its allocator while it maps more memory, and
 * gcc 12's libasan has no fork handler for those locks. A fork then (nginx's master forks its
 * workers right after its listen() started us) gave a child that hung in its first malloc of that
 * size. So start_locked() keeps loop_lock from before pthread_create() until the thread has
 * reached engine_main (san_engine_start returns only then, and another thread's fork waits in
 * fork_prepare), and the thread takes it from there.
 */
static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool fork_quiet; /* this thread holds loop_lock across its fork() */
static struct ev_loop *volatile abandoned_loop; /* a child's copy left alone (not a leak) */
#define FORK_WAIT_MS 100

static void loop_release(struct ev_loop *loop) EV_NOEXCEPT
{
	pthread_mutex_unlock(&loop_lock);
}

static void loop_acquire(struct ev_loop *loop) EV_NOEXCEPT
{
	pthread_mutex_lock(&loop_lock);
}

static void fork_prepare(void)
{
	struct timespec ts;

	fork_quiet = false;
	if (on_engine_thread) /* it holds loop_lock itself (and never forks) */
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += FORK_WAIT_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	fork_quiet = pthread_mutex_clocklock(&loop_lock, CLOCK_MONOTONIC, &ts) == 0;
}

static void fork_parent(void)
{
	if (fork_quiet)
		pthread_mutex_unlock(&loop_lock);
	fork_quiet = false;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The child's side is san_engine_atfork_child(), which san_core_atfork_child() calls. */
static void fork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, NULL);
}

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
		san_ev.ev_break(eng.loop, EVBREAK_ALL);
}

static void on_async(struct ev_loop *loop, ev_async *w, int revents)
{
	run_queue();
}

static void *engine_main(void *arg)
{
	sem_post(arg); /* the runtime's setup of this thread is over: start_locked lets loop_lock go */
	on_engine_thread = true;
	san_fd_guard_enter(); /* for good: our own socket calls bypass the wrappers */
	pthread_mutex_lock(&loop_lock);
	san_ev.ev_run(eng.loop, 0);
	run_queue(); /* work queued after the last wakeup still runs */
	pthread_mutex_unlock(&loop_lock);
	return NULL;
}

static int start_locked(void)
{
	sigset_t all, old;
	sem_t up;
	int err;

	if (eng.running)
		return 0;
	/* libev is loaded here, at the first start, not with the library (san_ev.h) */
	if (san_ev_load())
		return -ENOSYS;
	pthread_once(&fork_once, fork_register);
	pthread_mutex_lock(&loop_lock);
	/*
	 * libev's epoll_create1 (in ev_loop_new) and eventfd (in ev_async_start) are ours, not the
	 * application's: in the guard, the wrappers give them numbers above the program's.
	 */
	san_fd_guard_enter();
	eng.loop = san_ev.ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!eng.loop) {
		san_fd_guard_leave();
		pthread_mutex_unlock(&loop_lock);
		san_err("engine: cannot create the event loop; connections stay on kernel TCP");
		return -ENOMEM;
	}
	san_ev.ev_set_loop_release_cb(eng.loop, loop_release, loop_acquire);
	ev_async_init(&eng.async, on_async);
	san_ev.ev_async_start(eng.loop, &eng.async);
	san_fd_guard_leave();

	/*
	 * The thread inherits this mask: it must never take the application's signals. loop_lock
	 * stays held until the thread is in engine_main (the comment on loop_lock).
	 */
	sem_init(&up, 0, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&eng.thread, NULL, engine_main, &up);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		while (sem_wait(&up) < 0 && errno == EINTR)
			;
	sem_destroy(&up);
	if (err) {
		san_err("engine: cannot start the progress thread: error %d; staying on kernel TCP",
			err);
		san_ev.ev_async_stop(eng.loop, &eng.async);
		san_ev.ev_loop_destroy(eng.loop);
		eng.loop = NULL;
		pthread_mutex_unlock(&loop_lock);
		return -err;
	}
	pthread_mutex_unlock(&loop_lock);
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
	san_ev.ev_async_send(eng.loop, &eng.async);
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

	san_ev.ev_async_send(eng.loop, &eng.async);
	if (!on_engine_thread)
		pthread_join(t, NULL);

	pthread_mutex_lock(&eng.lock);
	if (!on_engine_thread) /* (the engine thread holds loop_lock already) */
		pthread_mutex_lock(&loop_lock);
	san_ev.ev_async_stop(eng.loop, &eng.async);
	san_ev.ev_loop_destroy(eng.loop);
	eng.loop = NULL;
	if (!on_engine_thread)
		pthread_mutex_unlock(&loop_lock);
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
		if (fork_quiet) {
			/* Close our copies of the loop's epoll fd and eventfd; the parent keeps its own. */
			san_fd_guard_enter();
			san_ev.ev_loop_destroy(eng.loop);
			san_fd_guard_leave();
		} else {
			abandoned_loop = eng.loop;
			san_debug("engine: forked while the progress thread was busy: the child "
				  "leaves its copy of the loop alone");
		}
		eng.loop = NULL;
	}
	/* Held across the fork by this thread (fork_quiet), or by a thread that is gone. */
	pthread_mutex_init(&loop_lock, NULL);
	fork_quiet = false;
	eng.running = false;
	eng.stopping = false;
	on_engine_thread = false;
}
