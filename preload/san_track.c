/* preload — keeps the fd table in step with the socket calls the wrappers see. */
#include "preload/san_preload.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/san_epoll_early.h"
#include "core/san_epshadow.h"
#include "core/san_lite.h"
#include "core/san_stats.h"
#include "core/san_stats_conn.h"
#include "core/san_sys.h"

/*
 * Every helper runs after the real call and must leave errno as the real
 * call set it: the fd table never touches errno and san_log() restores it.
 */

/*
 * A new fd on a number whose entry a close we never saw left behind: that connection's stats
 * slot goes with it, before the number is taken again (one load otherwise).
 */
static void san_track_stale_slot(int fd)
{
	struct san_fd *f = san_fd_get(fd);

	/* a lite candidate's gate it left open too (not a vfork child's: the table is the parent's) */
	if (san_fdtable_owned())
		(void)san_lite_forget_stale(fd);

	if (unlikely(f && (san_fd_flags(f) & SAN_FDF_STATSLOT)))
		san_stats_conn_release(fd);
}

/*
 * A new fd number we did not record (pipe-like, UNIX, UDP, epoll, or made by
 * the library itself): drop whatever a close we never saw (raw syscall,
 * fclose() of an fdopen()ed socket) may have left in its slot.
 */
void san_track_new(int fd, const char *call)
{
	enum san_fd_state old;

	san_track_stale_slot(fd);
	san_epshadow_forget(fd); /* a number a close we never saw left in a copy of a set */
	old = san_fd_clear(fd);
	if (unlikely(old != SAN_FD_UNTRACKED))
		san_debug("fd %d: stale %s entry dropped by %s", fd, san_fd_state_name(old), call);
}

void san_track_socket(int fd, int domain, int type, int protocol)
{
	uint32_t flags;

	if (san_fd_guarded() || !san_fd_tcp_candidate(domain, type, protocol)) {
		san_track_new(fd, "socket");
		return;
	}
	flags = (type & SOCK_NONBLOCK ? SAN_FDF_NONBLOCK : 0) |
		(domain == AF_INET6 ? SAN_FDF_INET6 : 0);
	san_track_stale_slot(fd);
	san_ep_early_forget(fd); /* a number a close we never saw left registered */
	if (san_fd_track(fd, SAN_FD_TCP, flags)) {
		san_debug("fd %d: tcp socket beyond the fd table, untracked", fd);
		return;
	}
	san_stats_track();
	san_debug("fd %d: tracked tcp socket (%s%s)", fd, domain == AF_INET6 ? "inet6" : "inet",
		  type & SOCK_NONBLOCK ? ", nonblocking" : "");
}

void san_track_listen(int fd)
{
	san_ep_early_forget(fd); /* no connect will take them */
	if (san_fd_set_state(fd, SAN_FD_LISTENER) >= 0)
		san_debug("fd %d: listener", fd);
}

/*
 * A connect() that returns 0, or that goes on in the background (nonblocking,
 * or a blocking one interrupted by a signal), makes the socket the active
 * side. Any other failure leaves it as it was: it may be retried.
 */
void san_track_connect(int fd, int ret)
{
	int old;

	if (ret != 0 && errno != EINPROGRESS && errno != EINTR)
		return;
	old = san_fd_set_state(fd, SAN_FD_ACTIVE);
	if (old < 0)
		return;
	/* A connect() retried after EINTR is still the one active open. */
	if (old != SAN_FD_ACTIVE) {
		san_stats_add(SAN_STAT_CONNECTS, 1);
		(void)san_stats_conn_claim(fd, SAN_ROLE_CLIENT);
	}
	san_debug("fd %d: active (connect %s)", fd, ret == 0 ? "done" : "in progress");
}

/*
 * A TCP listener this process never saw made: received over SCM_RIGHTS, or inherited through
 * exec (systemd's socket activation hands them over so). Adopted at its first accept(), after
 * the accepted socket says it is IPv4 or IPv6 (one getsockopt, the only cost an accept on a UNIX
 * listener pays) and the listener that it listens and speaks TCP; then served as ours: its side
 * channel's name, if no other process has it, or a name per connection (san_up_name_conn).
 */
static pthread_mutex_t san_track_adopt_lock = PTHREAD_MUTEX_INITIALIZER;

static bool san_track_adopt(int lfd, int fd)
{
	int e = errno, dom = san_sys_getsockopt_int(fd, SOL_SOCKET, SO_DOMAIN);
	bool ok = false;

	if (dom != AF_INET && dom != AF_INET6) {
		errno = e;
		return false;
	}
	/* Two threads accepting on it at once adopt it once (the loser finds it a listener). */
	pthread_mutex_lock(&san_track_adopt_lock);
	if (!san_fd_get(lfd) && san_sys_getsockopt_int(lfd, SOL_SOCKET, SO_ACCEPTCONN) == 1 &&
	    san_sys_getsockopt_int(lfd, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP &&
	    !san_fd_track(lfd, SAN_FD_TCP, dom == AF_INET6 ? SAN_FDF_INET6 : 0)) {
		san_stats_track();
		san_debug("fd %d: a TCP listener made elsewhere, adopted", lfd);
		san_track_listen(lfd);
		san_sock_on_listen(lfd);
		ok = true;
	}
	pthread_mutex_unlock(&san_track_adopt_lock);
	errno = e;
	return ok;
}

/* Only a tracked listener's connections are recorded; O_NONBLOCK is not inherited on Linux. */
void san_track_accept(int lfd, int fd, int flags)
{
	struct san_fd *l = san_fd_get(lfd);
	uint32_t fl;

	if (!l && san_fd_slot(lfd) && !san_fd_guarded() && !san_cfg.disable) {
		(void)san_track_adopt(lfd, fd);
		l = san_fd_get(lfd);
	}
	if (!l || san_fd_state(l) != SAN_FD_LISTENER || san_fd_guarded()) {
		san_track_new(fd, "accept");
		return;
	}
	/* the kernel gives the connection the listener's buffer sizes, and their locks */
	fl = (flags & SOCK_NONBLOCK ? SAN_FDF_NONBLOCK : 0) |
	     (san_fd_flags(l) & (SAN_FDF_INET6 | SAN_FDF_SNDBUF | SAN_FDF_RCVBUF));
	san_track_stale_slot(fd);
	if (san_fd_track(fd, SAN_FD_PASSIVE, fl)) {
		san_debug("fd %d: accepted beyond the fd table, untracked", fd);
		return;
	}
	san_stats_add(SAN_STAT_ACCEPTS, 1);
	(void)san_stats_conn_claim(fd, SAN_ROLE_SERVER);
	san_debug("fd %d: passive (accepted on listener %d)", fd, lfd);
}

/*
 * The entry goes before the real close(), never after. The number cannot be
 * handed out again until close() returns, so:
 *  - after would race: once the kernel frees the number, another thread's
 *    socket() may get it and record its entry, which we would then wipe;
 *  - before, the only window is another thread still using the old fd while
 *    it closes (already undefined for the program): it sees an untracked fd
 *    and passes through to the kernel socket, which is the safe fallback.
 * A failed close() loses nothing: Linux releases the number even on EINTR,
 * and on EBADF there was nothing to forget.
 *
 * Before the number goes, the statistics take the connection's counts (the
 * fd must still be open for that); an untracked fd costs one load, as before.
 */
void san_track_close(int fd)
{
	enum san_fd_state old;

	/* an epoll set (untracked), or a member of sets: the copies go (not a vfork child's) */
	if (unlikely(san_epshadow_any()) && san_fdtable_owned())
		san_epshadow_forget(fd);
	if (likely(!san_fd_get(fd)))
		return;
	/* A vfork child's close is its own: the parent's entry and counts stay (san_fdtable.c). */
	if (unlikely(!san_fdtable_owned()))
		return;
	san_ep_early_forget(fd);
	old = san_stats_fd_close(fd);
	/* fd 2 is still that socket until the real close: the log would write into it. */
	if (old != SAN_FD_UNTRACKED && fd != STDERR_FILENO)
		san_debug("fd %d: untracked (close of %s)", fd, san_fd_state_name(old));
}

/* Each tracked fd in the range is closed like one close(); then the range is forgotten. */
void san_track_close_range(unsigned int first, unsigned int last)
{
	unsigned int hw = __atomic_load_n(&san_fdt.hiwater, __ATOMIC_RELAXED);
	unsigned int fd;
	bool quiet;

	/* Not in a vfork child: the table and the counts are the parent's. */
	if (!san_fdtable_owned())
		return;
	/* A tracked fd 2 in the range stays that socket until the real call: no log into it. */
	quiet = first <= STDERR_FILENO && last >= STDERR_FILENO && san_fd_get(STDERR_FILENO);
	san_epshadow_forget_range(first, last);
	for (fd = first; fd < hw && fd <= last; fd++) {
		struct san_fd *f = san_fd_get((int)fd);

		if (!f)
			continue;
		/* Each managed fd ends as in close(): DISCONNECT, side channels. */
		if (san_fd_managed_state(san_fd_state(f)) && !san_fd_guarded())
			san_sock_on_close((int)fd);
		else if (san_fd_state(f) == SAN_FD_LISTENER && !san_fd_guarded())
			san_prov_unlisten((int)fd);
		san_ep_early_forget((int)fd);
		san_stats_fd_close((int)fd);
	}
	san_fd_clear_range(first, last);
	if (!quiet)
		san_debug("fds %u..%u: untracked (close_range)", first, last);
}

/* dup(), F_DUPFD: the new number is a fresh fd (nothing to clear first). */
void san_track_dup(int oldfd, int newfd)
{
	int state;

	/* an epoll set with two numbers: its copy is not used (not a vfork child's dup) */
	if (san_fdtable_owned())
		san_epshadow_dup(oldfd, newfd);
	/* Two fds, one connection from now on: the statistics must count it once (san_stats.c). */
	san_fd_set_flags(oldfd, SAN_FDF_DUP, 0);
	state = san_fd_copy(oldfd, newfd);

	if (state > SAN_FD_UNTRACKED)
		san_debug("fd %d: %s, dup of fd %d", newfd,
			  san_fd_state_name((enum san_fd_state)state), oldfd);
}

/*
 * dup2()/dup3() close @newfd as part of the call, so its entry goes first,
 * for the same reason as in close(). The old entry is handed back so that a
 * failed call (which leaves @newfd open and unchanged) can restore it.
 * dup2(fd, fd) changes nothing and must not clear anything.
 *
 * The connection @newfd held ends here for the statistics, as in close(),
 * unless @oldfd is no open fd: then the call is bound to fail with EBADF and
 * leave @newfd as it was. (Any other failure, rare, counts it early; its
 * later close may then count it again.)
 */
struct san_fd san_track_dup_onto_begin(int oldfd, int newfd)
{
	struct san_fd saved = { 0, 0 };
	struct san_fd *f;
	int err = errno;

	if (oldfd != newfd && san_fdtable_owned()) {
		san_epshadow_forget(newfd);
	}
	if (oldfd == newfd || !(f = san_fd_get(newfd)) || !san_fdtable_owned())
		return saved;
	saved.flags = san_fd_flags(f);
	saved.state = san_fd_state(f);
	if (SAN_REAL(fcntl)(oldfd, F_GETFD) >= 0)
		san_stats_fd_close(newfd);
	else
		san_fd_clear(newfd);
	errno = err;
	return saved;
}

void san_track_dup_onto_end(int oldfd, int newfd, int ret, struct san_fd saved)
{
	if (oldfd == newfd)
		return;
	if (ret < 0) {
		if (saved.state != SAN_FD_UNTRACKED && !san_fd_get(newfd))
			san_fd_track(newfd, (enum san_fd_state)saved.state, saved.flags);
		return;
	}
	if (saved.state != SAN_FD_UNTRACKED)
		san_debug("fd %d: %s entry replaced by dup2 of fd %d", newfd,
			  san_fd_state_name((enum san_fd_state)saved.state), oldfd);
	san_track_dup(oldfd, newfd);
}

/*
 * O_NONBLOCK belongs to the open file description, which dup()ed fds share;
 * the table records it on the fd it was set through. Good enough while it is
 * informational; the engine will need it per connection.
 */
void san_track_nonblock(int fd, bool on)
{
	if (san_fd_set_flags(fd, on ? SAN_FDF_NONBLOCK : 0, on ? 0 : SAN_FDF_NONBLOCK) == 0)
		san_debug("fd %d: %s", fd, on ? "nonblocking" : "blocking");
}
