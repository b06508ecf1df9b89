/* core — how a blocking call the library sleeps in answers a signal (san_sig.h). */
#include "core/san_sig.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/san_fdtable.h"
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
 * Per signal, what our entry in the kernel calls and how the kernel was told to deliver it.
 * Written by one sigaction at a time per signal (lock_sig), fn before the kernel's action
 * points at the entry, so a signal an entry takes finds one. Read by the entries without the
 * lock: fn, and kflags for the count, one word each.
 */
struct app_action {
	void *fn;   /* the application's handler (sa_handler or sa_sigaction) */
	int flags;  /* the application's sa_flags for it (what it reads back: SA_SIGINFO) */
	int kflags; /* the flags the kernel's action has, as last set through us or synced */
	bool ours;  /* the kernel's action is, as far as we set it, one of our entries */
};
static struct app_action app[NSIG];

/* The process confined itself (seccomp): our sigaction is then libc's, and nothing more. */
static bool sandboxed;

/*
 * The lock: 0 free, 1 taken, 2 taken with a waiter (a futex, so a waiter sleeps: a spinning
 * one of a higher real-time priority would never let the holder on its CPU finish). Taken
 * with every signal blocked, so that a handler that calls sigaction on the same thread cannot
 * find it held. Private futexes: the threads and a vfork child share our memory.
 */
static int app_lock[NSIG];

static void lock_sig(int sig, unsigned long *saved)
{
	unsigned long all = ~0UL;
	int c = 0;

	(void)SAN_SYS(SYS_rt_sigprocmask, (long)SIG_SETMASK, &all, saved, (long)sizeof(all));
	if (__atomic_compare_exchange_n(&app_lock[sig], &c, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return;
	if (c != 2)
		c = __atomic_exchange_n(&app_lock[sig], 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		(void)SAN_SYS(SYS_futex, &app_lock[sig], (long)FUTEX_WAIT_PRIVATE, 2L, NULL);
		c = __atomic_exchange_n(&app_lock[sig], 2, __ATOMIC_ACQUIRE);
	}
}

static void unlock_sig(int sig, const unsigned long *saved)
{
	if (__atomic_exchange_n(&app_lock[sig], 0, __ATOMIC_RELEASE) == 2)
		(void)SAN_SYS(SYS_futex, &app_lock[sig], (long)FUTEX_WAKE_PRIVATE, 1L);
	(void)SAN_SYS(SYS_rt_sigprocmask, (long)SIG_SETMASK, saved, NULL, (long)sizeof(*saved));
}

/*
 * Cannot be (fn is written before the kernel's action names the entry): as SIG_DFL, the
 * signal raised again is delivered so once the entry returns.
 */
static __attribute__((noinline)) void no_handler(int sig)
{
	struct k_sigaction dfl = { (void *)SIG_DFL, 0, NULL, 0 };

	(void)SAN_SYS(SYS_rt_sigaction, (long)sig, &dfl, NULL, (long)sizeof(dfl.mask));
	(void)SAN_SYS(SYS_tgkill, (long)SAN_SYS(SYS_getpid), (long)SAN_SYS(SYS_gettid), (long)sig);
}

/*
 * A run of a handler for @sig, counted on this thread: with or without SA_RESTART, as the
 * kernel's action for @sig was set (no system call here: a process that confined itself with
 * seccomp may be allowed none). Plain increments: only this thread writes its counters, and
 * a nested handler adds its own.
 */
static __attribute__((noinline)) void count_run(int sig)
{
	runs++;
	if (!(__atomic_load_n(&app[sig].kflags, __ATOMIC_RELAXED) & SA_RESTART))
		no_restart++;
}

/*
 * The handler is called with the three arguments the kernel passed, SA_SIGINFO or not: the
 * kernel itself puts all three in registers for every handler on Linux's ABIs, so a one-argument
 * handler sees what it would have seen, and no flag read alongside fn can be out of step with
 * it. Called last, with nothing of ours kept on the stack: optimised, the call is a jump, and
 * a backtrace taken in the handler reads as without us. @from: the signal whose handler this
 * is, @sig the one delivered (the same, unless the program copied an action read with the raw
 * system call to another signal: then, as without us, the copied handler runs for it).
 */
static void trampoline(int from, int sig, siginfo_t *si, void *uc)
{
	void *fn = __atomic_load_n(&app[from].fn, __ATOMIC_ACQUIRE);

	if (!fn) {
		no_handler(sig);
		return;
	}
	count_run(sig);
	((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
}

/* One entry per signal, so that the kernel's action names whose handler it calls. */
#define SAN_SIG_TRAMP(n)                                             \
	static void trampoline_##n(int sig, siginfo_t *si, void *uc) \
	{                                                            \
		trampoline(n, sig, si, uc);                          \
	}
/* clang-format off */
#define SAN_SIGS(X)                                                                               \
	X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)    \
	X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30)       \
	X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44)       \
	X(45) X(46) X(47) X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58)       \
	X(59) X(60) X(61) X(62) X(63) X(64)
/* clang-format on */
SAN_SIGS(SAN_SIG_TRAMP)
#define SAN_SIG_ENTRY(n) [n] = trampoline_##n,
static void (*const entries[NSIG])(int, siginfo_t *, void *) = { SAN_SIGS(SAN_SIG_ENTRY) };
_Static_assert(NSIG == 65, "one trampoline entry per signal, 1 to 64");

/* The signal whose entry @fn is, or 0. */
static int entry_of(const void *fn)
{
	for (int n = 1; n < NSIG; n++)
		if ((const void *)entries[n] == fn)
			return n;
	return 0;
}

static bool is_handler(const void *fn)
{
	return fn != (void *)SIG_DFL && fn != (void *)SIG_IGN && fn != (void *)SIG_ERR &&
	       !entry_of(fn);
}

static void *handler_of(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
}

/*
 * @o, an action the kernel gave for @sig, as the application reads it: where the kernel holds
 * an entry of ours, the handler and SA_SIGINFO it set (@prev: @sig's record as that action was
 * read); after the kernel's SA_RESETHAND reset of our entry, without the SA_SIGINFO we added.
 */
static void app_view(int sig, struct sigaction *o, const struct app_action *prev)
{
	int from = entry_of(handler_of(o));
	void *fn = prev->fn;
	int flags = prev->flags;

	if (from && from != sig) {
		/* an entry copied from another signal (read raw): that signal's handler */
		fn = __atomic_load_n(&app[from].fn, __ATOMIC_ACQUIRE);
		flags = app[from].flags;
	}
	if (from && fn) {
		o->sa_flags = (o->sa_flags & ~SA_SIGINFO) | (flags & SA_SIGINFO);
		if (flags & SA_SIGINFO)
			o->sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
		else
			o->sa_handler = (void (*)(int))fn;
	} else if (!from && o->sa_handler == SIG_DFL && prev->ours &&
		   (o->sa_flags & SA_RESETHAND) && (flags & SA_RESETHAND) &&
		   !(flags & SA_SIGINFO)) {
		o->sa_flags &= ~SA_SIGINFO;
	}
}

int san_sig_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
		      int (*real)(int, const struct sigaction *, struct sigaction *))
{
	struct sigaction a, o, k;
	struct app_action prev;
	unsigned long saved;
	bool wrap, owned;
	int r;

	if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return real(sig, act, old); /* (the kernel's answer: EINVAL, or the action read) */
	if (sandboxed) {
		/* confined (seccomp): the call alone; what it reads back still as it set it */
		r = real(sig, act, old);
		prev = app[sig];
		if (r == 0 && old)
			app_view(sig, old, &prev);
		return r;
	}
	/*
	 * The caller's structs are read and written outside the lock, where every signal is
	 * blocked: a fault on them is then the caller's, and its handler runs (a garbage
	 * collector's write barrier), where inside the kernel would have forced the default.
	 */
	if (act)
		a = *act;
	/*
	 * A vfork() child shares our memory, not our actions: what it installs goes to the
	 * kernel as it is, and the parent's record stays the parent's.
	 */
	owned = san_fdtable_owned();
	wrap = act && is_handler(handler_of(&a)) && owned;
	lock_sig(sig, &saved);
	prev = app[sig];
	if (wrap) {
		k = a;
		k.sa_sigaction = entries[sig];
		k.sa_flags |= SA_SIGINFO;
		app[sig].flags = a.sa_flags;
		__atomic_store_n(&app[sig].kflags, k.sa_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&app[sig].fn, handler_of(&a), __ATOMIC_RELEASE);
	}
	r = real(sig, wrap ? &k : act ? &a : NULL, old ? &o : NULL);
	if (r != 0 && wrap) {
		/* refused (EINVAL for glibc's own signals): as it was */
		app[sig].flags = prev.flags;
		__atomic_store_n(&app[sig].kflags, prev.kflags, __ATOMIC_RELAXED);
		__atomic_store_n(&app[sig].fn, prev.fn, __ATOMIC_RELEASE);
	} else if (r == 0 && act && owned) {
		app[sig].ours = wrap || entry_of(handler_of(&a));
		if (!wrap)
			__atomic_store_n(&app[sig].kflags, a.sa_flags, __ATOMIC_RELAXED);
	}
	unlock_sig(sig, &saved);
	if (r == 0 && old) {
		app_view(sig, &o, &prev);
		*old = o;
	}
	return r;
}

void san_sig_sync_flags(int sig, int (*real)(int, const struct sigaction *, struct sigaction *))
{
	struct sigaction cur;
	unsigned long saved;

	if (sig <= 0 || sig >= NSIG || sandboxed)
		return;
	lock_sig(sig, &saved);
	if (real(sig, NULL, &cur) == 0 && entry_of(handler_of(&cur)))
		__atomic_store_n(&app[sig].kflags, cur.sa_flags, __ATOMIC_RELAXED);
	unlock_sig(sig, &saved);
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

void san_sig_sandboxed(void)
{
	__atomic_store_n(&sandboxed, true, __ATOMIC_RELEASE);
}

void san_sig_atfork_child(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		__atomic_store_n(&app_lock[sig], 0, __ATOMIC_RELEASE);
}

void *san_sig_app_handler(void *fn)
{
	int from = entry_of(fn);

	return from ? __atomic_load_n(&app[from].fn, __ATOMIC_ACQUIRE) : fn;
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
