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

#endif /* SAN_SIG_H */
