/* core — the engine's entry points that preload/ calls around process life (load, fork, exec). */
#ifndef SAN_CORE_H
#define SAN_CORE_H

#include <stdbool.h>
#include <sys/types.h>

void san_core_init(void);
void san_core_loaded(void);
void san_core_atfork_child(void);
void san_core_atfork_prepare(void);
void san_core_atfork_parent(void);
void san_core_fork_begin(void);
void san_core_fork_done(pid_t pid);
/* Before an exec, with the environment the new program gets. */
void san_core_before_exec(char *const envp[], const char *file, bool search);
/*
 * A provider's exec flush ends this process's connections (verbs, in the process that runs
 * them: never a vfork child, whose memory is its parent's): from then until the exec returns
 * (it failed), a send that fails EPIPE (another thread's, its connection ended by the flush)
 * waits in san_core_exec_wait: over TCP the exec would end that thread first, and its SIGPIPE
 * must not end the process instead.
 */
void san_core_exec_flush_begins(void);
void san_core_exec_failed(void);
void san_core_exec_wait(void);
void san_core_exit(void);
/*
 * Set by preload/ when it bridged a standard stream (san_stdio.c): flushes those streams at
 * exit, before the connections end (san_prov_verbs.c v_exit_flush). NULL: nothing to flush.
 */
extern void (*san_core_stdio_flush)(void);
/* The process is about to confine itself with seccomp: the library steps aside. */
void san_core_sandboxed(void);
/* ... and has: nothing more to do at exit. */
bool san_core_is_sandboxed(void);

#endif /* SAN_CORE_H */
