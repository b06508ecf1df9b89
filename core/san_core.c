/* core — the engine's entry points that preload/ calls around process life (load, fork, exec). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_config.h"
#include "core/san_core.h"
#include "core/san_engine.h"
#include "core/san_execpath.h"
#include "core/san_fdtable.h"
#include "core/san_inherit.h"
#include "core/san_log.h"
#include "core/san_sig.h"
#include "core/san_prov.h"
#include "core/san_sock.h"
#include "core/san_stats.h"
#include "core/san_sys.h"

void (*san_core_stdio_flush)(void);

/*
 * Once, before any wrapper can act: the policy (and with it the log level), the fd table,
 * the statistics. A disabled library allocates no table: every fd number is then beyond it,
 * so every call passes through untracked, and nothing counts or prints.
 */
void san_core_init(void)
{
	int err;

	san_config_init();
	if (san_cfg.disable)
		return;
	err = san_fdtable_init();
	if (err)
		san_warn("no fd table (%s): every socket passes through untracked", strerror(-err));
	san_stats_init();
}

/*
 * Once the wrappers can run: the TCP connections the process was handed at exec become
 * candidates (san_inherit.h).
 */
void san_core_loaded(void)
{
	if (!san_cfg.disable)
		san_inherit_scan();
}

/*
 * Runs in the child of every fork(), also the ones libc makes for itself
 * (daemon()), as a pthread_atfork() child handler. The child already holds a
 * copy of the fd table; no thread of the engine survives the fork, so the
 * engine forgets its thread here and re-creates itself lazily. The statistics start
 * over: the child's counters are its own.
 */
void san_core_atfork_child(void)
{
	san_log_atfork_child();
	san_sig_atfork_child();
	san_engine_atfork_child();
	san_sock_atfork_child();
	san_stats_atfork_child();
}

/*
 * Runs before every fork(): the kernel's counts of each connection not switched yet, taken
 * while ours are exact (san_sock_atfork_prepare).
 */
void san_core_atfork_prepare(void)
{
	san_sock_atfork_prepare();
}

/*
 * Around the application's fork() (our wrapper; not libc's own forks, as daemon()'s): the parent
 * handlers run whether or not a child was made, so what they cannot undo is settled once fork()
 * says (san_sock_fork_done). pid: what fork() returned (the child does nothing).
 */
void san_core_fork_begin(void)
{
	san_sock_fork_begin();
}

void san_core_fork_done(pid_t pid)
{
	if (pid != 0)
		san_sock_fork_done(pid < 0);
}

/*
 * Runs in the parent after every fork(): connections the child now shares switch only in a
 * process that holds them alone, with the counts still the kernel's (san_sock_atfork_parent).
 */
void san_core_atfork_parent(void)
{
	san_sock_atfork_parent();
}

/* An exec's flush is under way: sends its DISCONNECTs end wait for the exec (san_core.h). */
static _Atomic bool exec_flushing;

/*
 * Runs just before the real exec*(), with the environment the new program gets:
 * the new image may not run the switch, so switched fds must be made safe to
 * inherit here. The statistics go on in the new image if it will count them
 * (the file carries the pid, which the exec keeps), else this image's line is
 * printed now. If the exec fails the process goes on: its connections work, except
 * that over verbs, when the exec was expected to run (file, searched in PATH if
 * search, found as a regular file we may execute; NULL: fexecve's, taken to run),
 * their sends have ended (docs/verbs.md §3).
 */
void san_core_before_exec(char *const envp[], const char *file, bool search)
{
	/* verbs: queued frames out first, they do not outlive the image */
	if (!san_core_is_sandboxed() && san_prov_exec_wanted() &&
	    (!file || san_exec_may_run(file, search, getenv("PATH"))))
		san_prov_exec();
	san_sock_before_exec();
	san_stats_before_exec(envp);
}

void san_core_exec_flush_begins(void)
{
	atomic_store(&exec_flushing, true);
}

void san_core_exec_failed(void)
{
	atomic_store(&exec_flushing, false);
}

void san_core_exec_wait(void)
{
	while (atomic_load(&exec_flushing))
		(void)san_sys_poll(NULL, 0, 10);
}

/*
 * Runs in _exit()/_Exit(), which skip the atexit() handlers (exit() runs
 * san_stats_exit() as one of those). Must not deadlock: it may run in a signal
 * handler. It may wait, boundedly, for frames still queued in this process
 * (san_prov_exit), as TCP's kernel sends a socket buffer after the process.
 */
void san_core_exit(void)
{
	if (san_core_is_sandboxed())
		return;
	san_sock_exit_let_go();
	san_prov_exit();
	san_stats_exit();
	san_log_flush_suppressed();
}

/*
 * A seccomp filter is about to be installed (preload's prctl wrapper). From then on any system
 * call the filter does not allow kills the process, and the library's are not the program's own:
 * a read() it makes a recvmsg(), waits that poll and ask SO_RCVTIMEO, TCP_INFO at a close, the
 * stats file at exit (OpenSSH's pre-authentication child was killed by SIGSYS at its first read
 * of a preloaded sshd's connection, and ssh failed, even with the client not preloaded). So:
 * every connection not yet in an upgrade stays TCP (the engine, which the filter does not
 * confine, refuses proposals for it), no socket made from now on is followed, and unless a
 * connection is switched or being switched, the fd table is emptied: every later call goes to
 * libc untouched, the very system call the program made. Nothing is done at exit: no stats
 * line; the stats file is left for the next process's clean-up of dead ones.
 */
static bool sandboxed;

void san_core_sandboxed(void)
{
	bool kept;

	/* (a vfork child's prctl is its own: the parent's table and engine stay as they are) */
	if (!san_fdtable_owned())
		return;
	san_sig_sandboxed(); /* (disabled or not: our sigaction's calls would be ours) */
	if (san_cfg.disable || __atomic_exchange_n(&sandboxed, true, __ATOMIC_ACQ_REL))
		return;
	san_log_sandbox(); /* its log file opened while open() is still allowed */
	san_debug("seccomp: the process confines itself: its connections stay on TCP");
	san_cfg.disable = true; /* no new candidate, no listener's side channel */
	kept = san_sock_sandbox();
	if (!kept) {
		/*
		 * Listeners' side channels go first: a close() would not reach them once the
		 * table is empty, and their names would stay bound while this process lives.
		 */
		unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);

		for (unsigned int fd = 0; fd < hw; fd++) {
			struct san_fd *f = san_fd_slot((int)fd); /* (NULL beyond the table) */

			if (f && san_fd_state(f) == SAN_FD_LISTENER)
				san_prov_unlisten((int)fd);
		}
		__atomic_store_n(&san_fdt.size, 0, __ATOMIC_RELEASE);
	} else {
		san_debug("seccomp: a connection on the SAN (or on its way) is kept: its calls are ours");
	}
}

bool san_core_is_sandboxed(void)
{
	return __atomic_load_n(&sandboxed, __ATOMIC_ACQUIRE);
}
