/* core — the engine's entry points that preload/ calls around process life (fork, exec). */
#include "core/san_core.h"

/*
 * Runs in the child of every fork(), also the ones libc makes for itself
 * (daemon()), as a pthread_atfork() child handler. The child already holds a
 * copy of the fd table; no thread of the engine survives the fork, so this
 * is where the engine will re-create itself lazily. Nothing to do while the
 * library only passes through.
 */
void san_core_atfork_child(void)
{
}

/*
 * Runs just before the real exec*(): the new image may not run the switch, so
 * switched fds must be made safe to inherit here. Nothing to do while the
 * library only passes through. If the exec fails the process goes on as is.
 */
void san_core_before_exec(void)
{
}
