/* core — how a blocking call the library sleeps in answers a signal (san_sig.h). */
#include "core/san_sig.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_sys.h"

/* The kernel's struct sigaction for rt_sigaction (x86-64 and the generic layout). */
struct k_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

/*
 * What the trampoline counts, per thread (san_sig_mark). Initial-exec: read in a signal
 * handler, where the general model's first touch may allocate.
 */
static __thread unsigned long runs __attribute__((tls_model("initial-exec")));
static __thread unsigned long no_restart __attribute__((tls_model("initial-exec")));

/* A handler ran during this thread's upgrade, seen by a sleep (san_sig_note_eintr)... */
static __thread bool noted;
/* ...or counted by the trampoline since the upgrade began (san_sig_forget). */
static __thread struct san_sig_mark upgrade_mark;

/*
 * The application's handler for each signal, for the trampoline to call. Written before the
 * kernel's action points at the trampoline, so a signal the trampoline takes always finds one.
 * Read in signal handlers: atomics only. (Two threads installing handlers for the same signal
 * at once may each read the other's as their @old: the kernel's own order between them is
 * unknown to us too.)
 */
struct app_action {
	void *fn;  /* sa_handler or sa_sigaction */
	int flags; /* the application's sa_flags (SA_SIGINFO: fn takes three arguments) */
};
static struct app_action app[NSIG];

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void *fn;
	int flags;

	if (sig <= 0 || sig >= NSIG)
		return;
	fn = __atomic_load_n(&app[sig].fn, __ATOMIC_ACQUIRE);
	flags = __atomic_load_n(&app[sig].flags, __ATOMIC_ACQUIRE);
	/* (plain increments: only this thread writes its counters; a nested handler adds its own)
	 */
	if (!fn)
		return; /* (cannot be: written before the kernel's action) */
	runs++;
	if (!(flags & SA_RESTART))
		no_restart++;
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
}

static bool is_handler(const void *fn)
{
	return fn != (void *)SIG_DFL && fn != (void *)SIG_IGN && fn != (void *)SIG_ERR &&
	       fn != (void *)trampoline;
}

int san_sig_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
		      int (*real)(int, const struct sigaction *, struct sigaction *))
{
	struct app_action prev = { NULL, 0 };
	struct sigaction k;
	bool ours = false;
	int r;

	if (sig > 0 && sig < NSIG) {
		prev.fn = __atomic_load_n(&app[sig].fn, __ATOMIC_ACQUIRE);
		prev.flags = __atomic_load_n(&app[sig].flags, __ATOMIC_ACQUIRE);
	}
	if (act && sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP &&
	    is_handler((act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
						    : (void *)act->sa_handler)) {
		k = *act;
		__atomic_store_n(&app[sig].flags, act->sa_flags, __ATOMIC_RELEASE);
		__atomic_store_n(&app[sig].fn,
				 (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
							      : (void *)act->sa_handler,
				 __ATOMIC_RELEASE);
		k.sa_sigaction = trampoline;
		k.sa_flags |= SA_SIGINFO;
		act = &k;
		ours = true;
	}
	r = real(sig, act, old);
	if (r == 0 && old && old->sa_sigaction == trampoline && prev.fn) {
		/* the action replaced (or read) was the trampoline: the application's, as set */
		old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (prev.flags & SA_SIGINFO);
		if (prev.flags & SA_SIGINFO)
			old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev.fn;
		else
			old->sa_handler = (void (*)(int))prev.fn;
	}
	else if (r == 0 && old && old->sa_handler == SIG_DFL && (old->sa_flags & SA_RESETHAND) &&
		 (prev.flags & SA_RESETHAND) && !(prev.flags & SA_SIGINFO))
		old->sa_flags &= ~SA_SIGINFO; /* the kernel's reset of ours keeps our flags */
	if (r != 0 && ours && sig > 0 && sig < NSIG) {
		/* refused (EINVAL for glibc's own signals): as it was */
		__atomic_store_n(&app[sig].fn, prev.fn, __ATOMIC_RELEASE);
		__atomic_store_n(&app[sig].flags, prev.flags, __ATOMIC_RELEASE);
	}
	return r;
}

bool san_sig_restarts(bool has_timeout)
{
	if (has_timeout)
		return false;
	for (int sig = 1; sig < NSIG; sig++) {
		struct k_sigaction ka;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		/* the raw call: glibc's sigaction would be the application's if it wraps it */
		if (SAN_SYS(SYS_rt_sigaction, (long)sig, NULL, &ka, (long)sizeof(ka.mask)) < 0)
			continue;
		if (ka.handler == (void *)SIG_DFL || ka.handler == (void *)SIG_IGN)
			continue;
		if (!(ka.flags & SA_RESTART))
			return false;
	}
	return true;
}

void *san_sig_app_handler(int sig, void *fn)
{
	if (fn != (void *)trampoline || sig <= 0 || sig >= NSIG)
		return fn;
	return __atomic_load_n(&app[sig].fn, __ATOMIC_ACQUIRE);
}

void san_sig_mark(struct san_sig_mark *m)
{
	m->runs = runs;
	m->no_restart = no_restart;
}

bool san_sig_restarts_since(const struct san_sig_mark *m, bool has_timeout)
{
	if (runs == m->runs)
		return san_sig_restarts(has_timeout); /* a handler we did not install */
	return !has_timeout && no_restart == m->no_restart;
}

void san_sig_note_eintr(void)
{
	noted = true;
}

void san_sig_forget(void)
{
	noted = false;
	san_sig_mark(&upgrade_mark);
}

int san_sig_take_noted(bool has_timeout)
{
	bool n = noted;
	struct san_sig_mark m = upgrade_mark;

	noted = false;
	san_sig_mark(&upgrade_mark);
	if (runs != m.runs)
		return san_sig_restarts_since(&m, has_timeout) ? 1 : -EINTR;
	if (!n)
		return 0;
	return san_sig_restarts(has_timeout) ? 1 : -EINTR;
}
