/* core — how a blocking call the library sleeps in answers a signal, as the kernel's would. */
#ifndef SAN_SIG_H
#define SAN_SIG_H

#include <stdbool.h>

/*
 * A sleep inside one of our blocking calls (a send waiting for room, a receive waiting for
 * data) was cut short by a signal handler. The kernel restarts an interrupted socket call
 * when the handler was installed with SA_RESTART and the socket has no timeout
 * (SO_RCVTIMEO / SO_SNDTIMEO: has_timeout); otherwise the call returns what it moved, or
 * fails with EINTR (signal(7)). Our sleeps are poll() calls, which the kernel never restarts,
 * and by the time poll returns the handler has run and which signal it was is lost. So the
 * call restarts only when every handler the process has installed asks for restart: a
 * process that installs any handler without SA_RESTART (as CPython does for all of its own)
 * sees EINTR from every signal. That differs from the kernel only for a process that mixes
 * both kinds, where a restarting signal may end the call early too: always a result the
 * kernel may give for a signal, never a sleep the kernel would have ended.
 */
bool san_sig_restarts(bool has_timeout);

/*
 * A's upgrade runs inside the application's first data call (a blocking receive, say) and may
 * sleep there: for its peer's answer on the side channel (shm), for rdma_cm, the QP and B's
 * SWITCH (verbs: hundreds of ms under emulation). The kernel's call would have been asleep
 * waiting for data all that time, and a signal handler would have ended it. So a handler that
 * runs during the upgrade is noted, per thread, and the call's first sleep after it (or the
 * call itself, when it falls back to the kernel's) ends as that sleep would have.
 *
 * A sleep of the upgrade that a handler cut short (poll: EINTR) calls san_sig_note_eintr and
 * sleeps on: the upgrade cannot stop half-way, but the handler runs at once, as the kernel's
 * would. Not seen: a handler that ran while the upgrade waited on a condition (verbs: B's
 * SWITCH, one round trip after the commit), which no signal interrupts.
 */
void san_sig_note_eintr(void);

/* Forget what was noted: an upgrade begins. */
void san_sig_forget(void);

/*
 * Take what was noted since the upgrade began (only a call that ran one asks): 0, no handler
 * ran; 1, the call sleeps again (restart, san_sig_restarts); -EINTR, it ends as interrupted.
 */
int san_sig_take_noted(bool has_timeout);

#endif /* SAN_SIG_H */
