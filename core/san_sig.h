/* core — how a blocking call the library sleeps in answers a signal, as the kernel's would. */
#ifndef SAN_SIG_H
#define SAN_SIG_H

#include <signal.h>
#include <stdbool.h>

/*
 * A sleep inside one of our blocking calls (a send waiting for room, a receive waiting for
 * data) was cut short by a signal handler. The kernel restarts an interrupted socket call
 * when the handler was installed with SA_RESTART and the socket has no timeout
 * (SO_RCVTIMEO / SO_SNDTIMEO: has_timeout); otherwise the call returns what it moved, or
 * fails with EINTR (signal(7)). Our sleeps are poll() calls, which the kernel never restarts,
 * and by the time poll returns the handler has run and which signal it was is lost: the
 * trampoline below counts the handlers installed through us. For one installed otherwise this
 * is the rule: the call restarts only when every handler the process has installed asks for
 * restart, which differs from the kernel only for a process that mixes both kinds, where a
 * restarting signal may end the call early too: always a result the kernel may give for a
 * signal, never a sleep the kernel would have ended.
 */
bool san_sig_restarts(bool has_timeout);

/*
 * The application's handlers run through a trampoline of ours: the preload's sigaction() and
 * signal() family install, for each signal, an entry of ours in the kernel in their place
 * (san_sig_sigaction), which calls the handler with the kernel's arguments. It counts, per
 * thread, each run, and each run whose action has no SA_RESTART (as set through us, or as
 * siginterrupt() changed it inside libc: san_sig_sync_flags; no system call in the entry). So
 * a call of ours learns that a handler ran on its thread even while it was not asleep in a
 * system call (the verbs upgrade computes for hundreds of ms under emulation: registrations,
 * the QP) or slept on a condition, and which kind it was: the kernel restarts a call for a handler with SA_RESTART and ends it for one
 * without, and so do we, in a process that installs both kinds too. A handler installed
 * another way (the raw rt_sigaction system call, as Go's runtime does) is not counted: a sleep
 * it cuts short falls back on san_sig_restarts.
 */
struct san_sig_mark {
	unsigned long runs;	  /* the application's handlers run on this thread */
	unsigned long no_restart; /* those of them installed without SA_RESTART */
};

/* What this thread's handlers have run so far, to compare with after a sleep. */
void san_sig_mark(struct san_sig_mark *m);

/*
 * A sleep that began at @m was cut short by a signal handler (poll: EINTR). True when the call
 * sleeps again: every handler counted since @m asks for restart and the socket has no timeout;
 * none counted (a handler not installed through us), san_sig_restarts.
 */
bool san_sig_restarts_since(const struct san_sig_mark *m, bool has_timeout);

/*
 * sigaction(2) for the preload's wrappers, through @real (libc's): a handler in @act is
 * installed as our entry for @sig, with @act's mask and flags (and SA_SIGINFO, for the
 * entry's three arguments); @old reads as if none of this were there: the application's
 * handler and flags. SIG_DFL, SIG_IGN and an entry of ours (an action read with the raw system
 * call, put back, or copied to another signal: it calls the handler it was made for) are
 * installed as they are; so is everything a vfork() child installs (its actions are its own,
 * our record is its parent's). One call per signal at a time, all signals blocked meanwhile
 * (so still async-signal-safe, as sigaction is): the record and the kernel's action go
 * together.
 */
int san_sig_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
		      int (*real)(int, const struct sigaction *, struct sigaction *));

/*
 * @sig's action changed inside libc, past our wrappers (glibc's siginterrupt() clears or sets
 * SA_RESTART with its own sigaction): the record takes the kernel's flags, through @real.
 */
void san_sig_sync_flags(int sig, int (*real)(int, const struct sigaction *, struct sigaction *));

/*
 * The process confined itself with seccomp (san_core_sandboxed): from now on sigaction is
 * libc's alone (the handlers it installs are not counted: the library's own calls are
 * pass-through by then), only what it reads back still translated.
 */
void san_sig_sandboxed(void);

/*
 * fork(), in the child: a sigaction another thread was making when the fork came never ends
 * here, so its signal's lock is let go. (Its record may then be that call's or the one before,
 * as may the kernel's action the child inherited: a sigaction racing a fork, either way.)
 */
void san_sig_atfork_child(void);

/* The handler the application installed, when @fn (read from the kernel) is ours; else @fn. */
void *san_sig_app_handler(void *fn);

/*
 * A's upgrade runs inside the application's first data call (a blocking receive, say) and may
 * take long there: it sleeps for its peer's answer on the side channel (shm), for rdma_cm and
 * B's SWITCH, and computes (verbs: registrations, the QP; hundreds of ms under emulation). The
 * kernel's call would have been asleep waiting for data all that time, and a signal handler
 * would have ended it. So a handler that runs during the upgrade is noted, per thread, and the
 * call's first sleep after it (or the call itself, when it falls back to the kernel's) ends as
 * that sleep would have.
 *
 * The handlers counted by the trampoline (san_sig_mark) are noted wherever the upgrade was;
 * a sleep of the upgrade that a handler not installed through us cut short (poll: EINTR)
 * calls san_sig_note_eintr. Either way the upgrade goes on (it cannot stop half-way) and the
 * handler has run at once, as the kernel's would.
 */
void san_sig_note_eintr(void);

/* Forget what was noted: an upgrade begins. */
void san_sig_forget(void);

/*
 * Take what was noted since the upgrade began (only a call that ran one asks): 0, no handler
 * ran; 1, the call sleeps again (restart: san_sig_restarts_since); -EINTR, it ends as
 * interrupted.
 */
int san_sig_take_noted(bool has_timeout);

#endif /* SAN_SIG_H */
