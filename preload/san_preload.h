/* preload — internal header: the real-function table, the export macro, the switch point. */
#ifndef SAN_PRELOAD_H
#define SAN_PRELOAD_H

/*
 * Include this header first in every preload/ file. The wrappers must be
 * plain definitions of the libc names: with _FORTIFY_SOURCE, read() or
 * recv() would be inline header functions, and with _FILE_OFFSET_BITS=64
 * fcntl() and sendfile() would be renamed to fcntl64()/sendfile64() by the
 * headers, so a packager's CFLAGS could silently change what we export.
 */
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS
#undef _TIME_BITS

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/san_core.h"
#include "core/san_fdtable.h"
#include "core/san_log.h"
#include "core/san_sock.h"

/*
 * The FORTIFY entry points: glibc declares them only when _FORTIFY_SOURCE is
 * on. Signatures as in glibc 2.36 bits/unistd.h, bits/socket2.h, bits/poll2.h.
 */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t n, size_t buflen, int flags,
		       __SOCKADDR_ARG addr, socklen_t *__restrict addr_len);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *ss,
		size_t fdslen);

/*
 * Everything below is internal. The version script (libsanswitch.map) is
 * what limits the exports to the interposed names; hidden visibility also
 * lets the compiler reach internal symbols without the GOT.
 */
#pragma GCC visibility push(hidden)

/* Marks a wrapper: the only kind of symbol this library exports. */
#define SAN_EXPORT __attribute__((visibility("default")))

/*
 * X(name, return type, parameter list, required)
 *
 * required: the library aborts at load time if it cannot find the real
 * function (POSIX names every libc has). Optional ones may be missing from
 * an older or non-GNU libc; their wrappers then fail with ENOSYS, which a
 * program linked against that libc cannot call anyway.
 */
#define SAN_REAL_FUNCS(X)                                                                          \
	X(socket, int, (int, int, int), true)                                                      \
	X(socketpair, int, (int, int, int, int[2]), true)                                          \
	X(bind, int, (int, __CONST_SOCKADDR_ARG, socklen_t), true)                                 \
	X(listen, int, (int, int), true)                                                           \
	X(accept, int, (int, __SOCKADDR_ARG, socklen_t *__restrict), true)                         \
	X(accept4, int, (int, __SOCKADDR_ARG, socklen_t *__restrict, int), false)                  \
	X(connect, int, (int, __CONST_SOCKADDR_ARG, socklen_t), true)                              \
	X(shutdown, int, (int, int), true)                                                         \
	X(getsockopt, int, (int, int, int, void *__restrict, socklen_t *__restrict), true)         \
	X(setsockopt, int, (int, int, int, const void *, socklen_t), true)                         \
	X(getsockname, int, (int, __SOCKADDR_ARG, socklen_t *__restrict), true)                    \
	X(getpeername, int, (int, __SOCKADDR_ARG, socklen_t *__restrict), true)                    \
	X(send, ssize_t, (int, const void *, size_t, int), true)                                   \
	X(sendto, ssize_t, (int, const void *, size_t, int, __CONST_SOCKADDR_ARG, socklen_t),      \
	  true)                                                                                    \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int), true)                               \
	X(sendmmsg, int, (int, struct mmsghdr *, unsigned int, int), false)                        \
	X(write, ssize_t, (int, const void *, size_t), true)                                       \
	X(writev, ssize_t, (int, const struct iovec *, int), true)                                 \
	X(sendfile, ssize_t, (int, int, off_t *, size_t), false)                                   \
	X(sendfile64, ssize_t, (int, int, off64_t *, size_t), false)                               \
	X(splice, ssize_t, (int, off64_t *, int, off64_t *, size_t, unsigned int), false)          \
	X(recv, ssize_t, (int, void *, size_t, int), true)                                         \
	X(recvfrom, ssize_t,                                                                       \
	  (int, void *__restrict, size_t, int, __SOCKADDR_ARG, socklen_t *__restrict), true)       \
	X(recvmsg, ssize_t, (int, struct msghdr *, int), true)                                     \
	X(recvmmsg, int, (int, struct mmsghdr *, unsigned int, int, struct timespec *), false)     \
	X(read, ssize_t, (int, void *, size_t), true)                                              \
	X(readv, ssize_t, (int, const struct iovec *, int), true)                                  \
	X(__read_chk, ssize_t, (int, void *, size_t, size_t), false)                               \
	X(__recv_chk, ssize_t, (int, void *, size_t, size_t, int), false)                          \
	X(__recvfrom_chk, ssize_t,                                                                 \
	  (int, void *__restrict, size_t, size_t, int, __SOCKADDR_ARG, socklen_t *__restrict),     \
	  false)                                                                                   \
	X(close, int, (int), true)                                                                 \
	X(fclose, int, (FILE *), true)                                                             \
	X(freopen, FILE *, (const char *, const char *, FILE *), true)                             \
	X(freopen64, FILE *, (const char *, const char *, FILE *), false)                          \
	X(close_range, int, (unsigned int, unsigned int, int), false)                              \
	X(closefrom, void, (int), false)                                                           \
	X(dup, int, (int), true)                                                                   \
	X(dup2, int, (int, int), true)                                                             \
	X(dup3, int, (int, int, int), false)                                                       \
	X(fcntl, int, (int, int, ...), true)                                                       \
	X(fcntl64, int, (int, int, ...), false)                                                    \
	X(ioctl, int, (int, unsigned long, ...), true)                                             \
	X(poll, int, (struct pollfd *, nfds_t, int), true)                                         \
	X(ppoll, int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *), false) \
	X(__poll_chk, int, (struct pollfd *, nfds_t, int, size_t), false)                          \
	X(__ppoll_chk, int,                                                                        \
	  (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t), false)     \
	X(select, int,                                                                             \
	  (int, fd_set *__restrict, fd_set *__restrict, fd_set *__restrict,                        \
	   struct timeval *__restrict),                                                            \
	  true)                                                                                    \
	X(pselect, int,                                                                            \
	  (int, fd_set *__restrict, fd_set *__restrict, fd_set *__restrict,                        \
	   const struct timespec *__restrict, const sigset_t *__restrict),                         \
	  true)                                                                                    \
	X(eventfd, int, (unsigned int, int), false)                                                \
	X(epoll_create, int, (int), false)                                                         \
	X(epoll_create1, int, (int), false)                                                        \
	X(epoll_ctl, int, (int, int, int, struct epoll_event *), false)                            \
	X(epoll_wait, int, (int, struct epoll_event *, int, int), false)                           \
	X(epoll_pwait, int, (int, struct epoll_event *, int, int, const sigset_t *), false)        \
	X(epoll_pwait2, int,                                                                       \
	  (int, struct epoll_event *, int, const struct timespec *, const sigset_t *), false)      \
	X(fork, pid_t, (void), true)                                                               \
	X(clone, int, (int (*)(void *), void *, int, void *, ...), false)                          \
	X(_Fork, pid_t, (void), false)                                                             \
	X(execve, int, (const char *, char *const[], char *const[]), true)                         \
	X(execv, int, (const char *, char *const[]), true)                                         \
	X(execvp, int, (const char *, char *const[]), true)                                        \
	X(execvpe, int, (const char *, char *const[], char *const[]), false)                       \
	X(fexecve, int, (int, char *const[], char *const[]), false)                                \
	X(_exit, void, (int), true)                                                                \
	X(_Exit, void, (int), false)                                                               \
	X(prctl, int, (int, ...), true)

/*
 * The real functions. A NULL pointer means "not resolved yet" (or an
 * optional function this libc lacks): SAN_REAL() tests the pointer it has to
 * load anyway, so the resolved fast path costs no extra load.
 */
struct san_real {
#define SAN_REAL_FIELD(name, ret, params, req) ret(*name) params;
	SAN_REAL_FUNCS(SAN_REAL_FIELD)
#undef SAN_REAL_FIELD
};

extern struct san_real san_real;

const struct san_real *san_real_resolve(void);
/* Is this address inside the library's own image (one of our wrappers, or a caller of ours)? */
bool san_real_is_ours(const void *addr);

/*
 * The real @name, resolving the table on first use: a wrapper may run before
 * our constructor, called from another library's constructor. May be NULL
 * only for an optional function.
 */
#define SAN_REAL(name)                                                     \
	({                                                                 \
		__typeof__(san_real.name) san_fn_ =                        \
			__atomic_load_n(&san_real.name, __ATOMIC_ACQUIRE); \
		if (unlikely(!san_fn_))                                    \
			san_fn_ = san_real_resolve()->name;                \
		san_fn_;                                                   \
	})

/* -1/errno for a missing optional function. */
static inline int san_enosys(void)
{
	errno = ENOSYS;
	return -1;
}

/* Internal functions return 0 or -errno; the wrappers hand -1/errno to the application. */
static inline long san_ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * The switch point: the one test every fd-taking wrapper makes before passing
 * through. One load of the fd's slot, one branch; no TLS on this path (the
 * guard is read only once an fd is managed).
 *
 * Managed: a candidate (connected, its upgrade not decided yet) or switched.
 * Such calls go to core/san_sock.c, which answers SAN_PASS when the real call
 * is the right one after all (the upgrade left the connection on TCP).
 */
static inline bool san_managed(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	return unlikely(f && san_fd_managed_state(san_fd_state(f))) && !san_fd_guarded();
}

/* A tracked TCP socket that has not connected or listened yet. */
static inline bool san_unconnected(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	return unlikely(f && san_fd_state(f) == SAN_FD_TCP) && san_fdtable_owned() &&
	       !san_fd_guarded();
}

/* A tracked TCP listener: it has a side channel to close with it. */
static inline bool san_listener(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	return unlikely(f && san_fd_state(f) == SAN_FD_LISTENER) && san_fdtable_owned() &&
	       !san_fd_guarded();
}

/* Switched: the fd number is the notification socket, the connection's TCP is the anchor. */
static inline struct san_fd *san_switched(int fd)
{
	struct san_fd *f = san_fd_slot(fd);

	if (unlikely(f && san_fd_state(f) == SAN_FD_SWITCHED) && !san_fd_guarded())
		return f;
	return NULL;
}

/* Waits (poll, select, epoll): the same test for "any fd of the process". */
static inline bool san_any_switched(void)
{
	return unlikely(san_fd_any_switched()) && !san_fd_guarded();
}

/* The data calls of managed fds (san_route.c): >= 0, -errno, or SAN_PASS. */
ssize_t san_route_send(int fd, const struct iovec *iov, size_t cnt, int flags);
ssize_t san_route_recv(int fd, const struct iovec *iov, size_t cnt, int flags, int *msg_flags);
/* Microseconds a wait spins on switched connections before it sleeps (0: do not spin). */
uint64_t san_route_spin_until(int timeout_ms);
bool san_route_spinning(uint64_t until);
void san_route_spin_found(uint64_t until, int rounds, int r);

/* fd bookkeeping shared by the wrappers (san_track.c); none of them touches errno. */
void san_track_socket(int fd, int domain, int type, int protocol);
void san_track_new(int fd, const char *call);
void san_track_listen(int fd);
void san_track_connect(int fd, int ret);
void san_track_accept(int lfd, int fd, int flags);
void san_track_close(int fd);
void san_track_close_range(unsigned int first, unsigned int last);
void san_track_dup(int oldfd, int newfd);
struct san_fd san_track_dup_onto_begin(int oldfd, int newfd);
void san_track_dup_onto_end(int oldfd, int newfd, int ret, struct san_fd saved);
void san_track_nonblock(int fd, bool on);

/* The stdio bridge (san_stdio.c): stdin/stdout/stderr of an adopted connection, at load. */
void san_stdio_bridge(void);
bool san_stdio_bridged(FILE *fp);
FILE *san_stdio_unbridge(FILE *fp, int *flushed, bool reopen);

#pragma GCC visibility pop

#endif /* SAN_PRELOAD_H */
