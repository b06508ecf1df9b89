/*
 * preload — sigaction() and the signal() family: the application's handlers run through the
 * trampoline of core/san_sig.c, which tells the library's sleeps that a handler ran on their
 * thread and whether it asked for restart (san_sig.h). What the application reads back is what
 * it set.
 */
#include "core/san_sig.h"
#include "preload/san_preload.h"

SAN_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return san_sig_sigaction(sig, act, old, SAN_REAL(sigaction));
}

/*
 * The signal() family: libc's own first, so that the flags are the ones it chooses (signal():
 * SA_RESTART unless siginterrupt() said otherwise; sysv_signal(): SA_RESETHAND | SA_NODEFER;
 * sigset(): SIG_HOLD), then the handler it installed is put behind the trampoline; the handler
 * returned is the application's. Between the two a signal runs the handler directly: only not
 * counted.
 */
static sighandler_t behind_trampoline(int sig, sighandler_t handler, sighandler_t prev)
{
	struct sigaction cur;

	if (prev == SIG_ERR)
		return prev;
	if (handler != SIG_DFL && handler != SIG_IGN && handler != SIG_HOLD &&
	    SAN_REAL(sigaction)(sig, NULL, &cur) == 0 && cur.sa_handler == handler &&
	    !(cur.sa_flags & SA_SIGINFO))
		(void)san_sig_sigaction(sig, &cur, NULL, SAN_REAL(sigaction));
	return (sighandler_t)san_sig_app_handler(sig, (void *)prev);
}

SAN_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return behind_trampoline(sig, handler, SAN_REAL(signal)(sig, handler));
}

sighandler_t bsd_signal(int sig, sighandler_t handler); /* (not in glibc's headers now) */

SAN_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler); /* (glibc's is the same function) */
}

/* An optional one of libc's (NULL: not in this libc), then behind the trampoline. */
static sighandler_t optional(sighandler_t (*fn)(int, sighandler_t), int sig, sighandler_t handler)
{
	if (!fn) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return behind_trampoline(sig, handler, fn(sig, handler));
}

SAN_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return optional(SAN_REAL(sysv_signal), sig, handler);
}

/* (what signal() is in a program built for strict ISO C: glibc's headers name it so) */
sighandler_t __sysv_signal(int sig, sighandler_t handler);

SAN_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return optional(SAN_REAL(__sysv_signal), sig, handler);
}

SAN_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	return optional(SAN_REAL(sigset), sig, disp);
}
