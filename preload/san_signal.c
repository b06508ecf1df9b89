/*
 * preload — sigaction() and the signal() family: the application's handlers run through the
 * trampoline of core/san_sig.c, which tells the library's sleeps that a handler ran on their
 * thread and whether it asked for restart (san_sig.h). What the application reads back is what
 * it set.
 *
 * The real functions are found with dlsym alone, never through SAN_REAL: the ASan runtime
 * installs its own handlers from its initialisation, through us, and the library's start-up
 * that SAN_REAL's first use runs (atexit among others) may not run inside it. They are looked
 * up at load too (resolve_early), so that a first call from a signal handler runs no dlsym.
 */
#include <dlfcn.h>

#include "core/san_sig.h"
#include "preload/san_preload.h"

enum { R_SIGACTION, R_SIGNAL, R_SYSV_SIGNAL, R___SYSV_SIGNAL, R_SIGSET, R_SIGINTERRUPT, R_N };
static const char *const real_names[R_N] = { "sigaction",     "signal", "sysv_signal",
					     "__sysv_signal", "sigset", "siginterrupt" };
static void *real_fns[R_N];

/* libc's function @i, looked up once (NULL: this libc has none). */
static void *next(int i)
{
	void *fn = __atomic_load_n(&real_fns[i], __ATOMIC_ACQUIRE);

	if (!fn) {
		int e = errno;

		fn = dlsym(RTLD_NEXT, real_names[i]);
		errno = e;
		__atomic_store_n(&real_fns[i], fn, __ATOMIC_RELEASE);
	}
	return fn;
}

__attribute__((constructor)) static void resolve_early(void)
{
	for (int i = 0; i < R_N; i++)
		(void)next(i);
}

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

SAN_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn real = (sigaction_fn)next(R_SIGACTION);

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
static sighandler_t family(int i, int sig, sighandler_t handler)
{
	signal_fn real = (signal_fn)next(i);
	sigaction_fn sa = (sigaction_fn)next(R_SIGACTION);
	sighandler_t prev;
	struct sigaction cur;

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
	return family(R_SIGNAL, sig, handler);
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
	return family(R_SYSV_SIGNAL, sig, handler);
}

/* (what signal() is in a program built for strict ISO C: glibc's headers name it so) */
sighandler_t __sysv_signal(int sig, sighandler_t handler);

SAN_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return family(R___SYSV_SIGNAL, sig, handler);
}

SAN_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	return family(R_SIGSET, sig, disp);
}

/*
 * siginterrupt(): glibc's sets or clears SA_RESTART with its own sigaction, inside libc, and
 * remembers the choice for its later signal() calls; then our record takes the kernel's flags,
 * which a handler's run is counted by (san_sig.h).
 */
SAN_EXPORT int siginterrupt(int sig, int flag)
{
	int (*real)(int, int) = (int (*)(int, int))next(R_SIGINTERRUPT);
	sigaction_fn sa = (sigaction_fn)next(R_SIGACTION);
	int r;

	if (!real || !sa)
		return san_enosys();
	r = real(sig, flag);
	if (r == 0)
		san_sig_sync_flags(sig, sa);
	return r;
}
