/*
 * preload — sigaction() and the signal() family: the application's handlers run through the
 * trampoline of core/san_sig.c, which tells the library's sleeps that a handler ran on their
 * thread and whether it asked for restart (san_sig.h). What the application reads back is what
 * it set.
 *
 * The real functions are found with dlsym alone, never through SAN_REAL: the ASan runtime
 * installs its own handlers from its initialisation, through us, and the library's start-up
 * that SAN_REAL's first use runs (atexit among others) may not run inside it.
 */
#include <dlfcn.h>

#include "core/san_sig.h"
#include "preload/san_preload.h"

/* libc's @name, looked up once (NULL: this libc has none). */
static void *next(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!fn) {
		int e = errno;

		fn = dlsym(RTLD_NEXT, name);
		errno = e;
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static sigaction_fn real_sigaction(void)
{
	static void *fn;

	return (sigaction_fn)next(&fn, "sigaction");
}

SAN_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn real = real_sigaction();

	if (!real)
		return san_enosys();
	return san_sig_sigaction(sig, act, old, real);
}

/* (glibc exports it too, and some programs call it by that name) */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

SAN_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigaction(sig, act, old);
}

/*
 * The signal() family: libc's own first, so that the flags are the ones it chooses (signal():
 * SA_RESTART unless siginterrupt() said otherwise; sysv_signal(): SA_RESETHAND | SA_NODEFER;
 * sigset(): SIG_HOLD), then the handler it installed is put behind the trampoline; the handler
 * returned is the application's, read before ours is replaced. Between the two a signal runs
 * the handler directly, uncounted, and another thread's sigaction for the same signal may come
 * between them (docs/engine.md §9, "Signals").
 */
static sighandler_t family(void **slot, const char *name, int sig, sighandler_t handler)
{
	signal_fn real = (signal_fn)next(slot, name);
	sighandler_t prev;
	struct sigaction cur;
	sigaction_fn sa = real_sigaction();

	if (!real || !sa) {
		(void)san_enosys();
		return SIG_ERR;
	}
	prev = real(sig, handler);
	if (prev == SIG_ERR)
		return prev;
	prev = (sighandler_t)san_sig_app_handler((void *)prev);
	if (handler != SIG_DFL && handler != SIG_IGN && handler != SIG_HOLD &&
	    sa(sig, NULL, &cur) == 0 && cur.sa_handler == handler && !(cur.sa_flags & SA_SIGINFO))
		(void)san_sig_sigaction(sig, &cur, NULL, sa);
	return prev;
}

SAN_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	static void *fn;

	return family(&fn, "signal", sig, handler);
}

/* (not in glibc's headers now; glibc's are the same function as its signal()) */
sighandler_t bsd_signal(int sig, sighandler_t handler);
sighandler_t ssignal(int sig, sighandler_t handler);

SAN_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

SAN_EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

SAN_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	static void *fn;

	return family(&fn, "sysv_signal", sig, handler);
}

/* (what signal() is in a program built for strict ISO C: glibc's headers name it so) */
sighandler_t __sysv_signal(int sig, sighandler_t handler);

SAN_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	static void *fn;

	return family(&fn, "__sysv_signal", sig, handler);
}

SAN_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	static void *fn;

	return family(&fn, "sigset", sig, disp);
}
