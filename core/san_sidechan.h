/* core — the shm side channel: abstract AF_UNIX names per listener, one message per packet. */
#ifndef SAN_SIDECHAN_H
#define SAN_SIDECHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "proto/san_msg.h"

/*
 * Naming
 * ======
 *
 * Every TCP listener of a process running the switch gets one abstract
 * AF_UNIX SOCK_SEQPACKET socket, named after what the listener is bound to:
 *
 *     "\0sanswitch/v1/<netns>/<host>/<port>"
 *
 *   netns  inode of the creating thread's /proc/thread-self/ns/net (decimal).
 *          Abstract names are already per network namespace; the id in the
 *          name also keeps a thread that setns()'d from reaching a listener
 *          of a namespace its TCP connection does not belong to.
 *   host   the listener's address: "127.0.0.1", "::1" (IPv4 and IPv4-mapped
 *          IPv6 both in dotted form, IPv6 as inet_ntop() prints it), or one of
 *          three wildcard words:
 *            any4  bound to 0.0.0.0 (or ::ffff:0.0.0.0): accepts IPv4 only
 *            any6  bound to :: with IPV6_V6ONLY: accepts IPv6 only
 *            any   bound to :: without IPV6_V6ONLY: accepts both (dual stack)
 *   port   decimal.
 *
 * The connector knows only the concrete address it connected to. It tries,
 * in order, until one name answers (san_sidechan_connect_dest()):
 *
 *     IPv4 destination d:   d, any4, any
 *     IPv6 destination d:   d, any6, any
 *
 * which is the kernel's own preference when it picks a listener for an
 * incoming connection (a listener bound to the exact address beats a
 * wildcard one, and for IPv4 an AF_INET wildcard beats a dual-stack AF_INET6
 * one). Only ECONNREFUSED (no such name) moves on to the next name; a name
 * that exists but does not answer (backlog full: EAGAIN) ends the search,
 * because the next name would be another listener. A wrong guess costs
 * nothing but a REJECT NOT_OWNER: the owner of the name still proves that
 * it holds the connection.
 *
 * Names are unique in a namespace. A second listener with the same name
 * (SO_REUSEPORT servers in several processes, or a name squatted by another
 * process) gets -EADDRINUSE from san_sidechan_listen(): the caller logs it
 * and does without (its connections stay on TCP, or are upgraded by
 * whichever process owns the name when the TCP connection landed there).
 * Abstract names vanish with their socket: nothing to clean up.
 *
 * Messages
 * ========
 *
 * One SOCK_SEQPACKET packet carries exactly one side-channel message
 * (proto/san_msg, at most SAN_SIDE_MSG_MAX bytes) and, for PROPOSE/ACCEPT of
 * the shm provider, at most one file descriptor (SCM_RIGHTS: the memfd of the
 * rings). Every socket made here has SO_PASSCRED, so each received message
 * carries its sender's pid/uid/gid as the kernel saw them at send time.
 *
 * Hand-off (docs/protocol.md §9.4): san_sidechan_send() returns 0 only when
 * the whole message is in the peer's receive queue (SENT); every failure
 * means it was not queued (NOT_SENT). There is no "unknown" on AF_UNIX.
 *
 * System calls. Every socket call here is made with syscall(2), never through
 * the interposed libc names: callers need no reentrancy guard (preload/ never
 * sees these fds), may call from any thread, and errno is never changed. The
 * fds made or received here are cleared from the fd table (san_fd_clear), as
 * the wrappers do for every fd they did not record. All fds are nonblocking
 * (sockets) and close-on-exec. Results are 0, an fd, or -errno.
 */

/* sun_path: a leading NUL, then the text; path + 1 is always a NUL-terminated string for logs. */
#define SAN_SIDECHAN_PATH_MAX 108
#define SAN_SIDECHAN_BACKLOG 128
#define SAN_SIDECHAN_DEST_NAMES 3

struct san_sidechan_name {
	socklen_t len; /* bytes of path that form the name, leading NUL included */
	char path[SAN_SIDECHAN_PATH_MAX]; /* "\0sanswitch/v1/..." */
};

/*
 * The id of a network namespace, as the names carry it: the kernel's cookie of the namespace
 * (SO_NETNS_COOKIE, Linux 5.14: one getsockopt), or where the kernel has none, the inode of
 * /proc/thread-self/ns/net (a walk of /proc, about 7 µs, which the switch's path paid at every
 * proposal and a worker at every connection's first data call). Every process of one host
 * takes the same of the two, so both ends write a namespace's id alike.
 * san_sidechan_netns_fd: the namespace of the socket @fd (a connection's or a listener's);
 * san_sidechan_netns: the calling thread's.
 */
int san_sidechan_netns_fd(int fd, uint64_t *netns);
int san_sidechan_netns(uint64_t *netns);

/*
 * The name for a listener bound to @local (16-byte form, see struct san_addr);
 * @v6only is the socket's IPV6_V6ONLY, consulted only for "::".
 * -EINVAL when the port is 0.
 */
int san_sidechan_name_listener(struct san_sidechan_name *n, uint64_t netns,
			       const struct san_addr *local, bool v6only);

/*
 * The name of one connection, bound by the process that holds its accepted end when that
 * process does not serve the listener's name (a worker that accepts on a listener its parent
 * made, a listener of a SO_REUSEPORT group whose name another process has, one received over
 * SCM_RIGHTS): "\0sanswitch/v1/<netns>/c/<local>-<peer>", each end 32 hex digits of the
 * address and 4 of the port, as that process sees the connection. The connector tries it first
 * (docs/protocol.md, "Names"). -EINVAL when a port is 0.
 */
int san_sidechan_name_conn(struct san_sidechan_name *n, uint64_t netns,
			   const struct san_addr *local, const struct san_addr *peer);
/* The same for a bound TCP socket (getsockname, and IPV6_V6ONLY when bound to ::). */
int san_sidechan_listener_name(int tcp_lfd, uint64_t netns, struct san_sidechan_name *n);

/* The names a connector to @dst tries, in order (see above). Returns how many: 3. */
int san_sidechan_dest_names(const struct san_addr *dst, uint64_t netns,
			    struct san_sidechan_name n[SAN_SIDECHAN_DEST_NAMES]);

/* A listening side channel: fd, or -EADDRINUSE when the name is taken, or -errno. */
int san_sidechan_listen(const struct san_sidechan_name *n);

/* Accept one side-channel connection: fd, -EAGAIN when none is waiting, or -errno. */
int san_sidechan_accept(int lfd);

/*
 * Connect to one name, without waiting: fd, or -ECONNREFUSED (no such name),
 * -EAGAIN (its backlog is full), -errno. AF_UNIX connects at once or fails.
 */
int san_sidechan_connect(const struct san_sidechan_name *n);

/*
 * Try @n names in order on one socket: fd of the first that answers, its index in @which (may
 * be NULL); -ECONNREFUSED when none exists, or the first other error (-EAGAIN: that name's
 * backlog is full, which ends the search: the next name would be another listener).
 */
int san_sidechan_connect_first(const struct san_sidechan_name *names, int n, int *which);

/*
 * Try san_sidechan_dest_names(@dst) in order; fd of the first that answers,
 * and the name in @used (may be NULL). -ECONNREFUSED when none exists.
 */
int san_sidechan_connect_dest(const struct san_addr *dst, uint64_t netns,
			      struct san_sidechan_name *used);

/*
 * SO_PEERCRED: the peer's pid and effective uid/gid at connect() (for the
 * listening side) or listen() (for the connecting side) time.
 */
int san_sidechan_peercred(int fd, struct ucred *cred);

/*
 * Ask the kernel to attach a pidfd of the sender to every message received
 * on @fd from now on (SO_PASSPIDFD, Linux >= 6.5): see san_owner_prove().
 * -ENOPROTOOPT on older kernels.
 */
int san_sidechan_pass_pidfd(int fd);

/*
 * Send one setup message, and @pass_fd (>= 0) with it. 0 when queued whole;
 * -EINVAL: not a valid side-channel message (wrong type, or a field
 * san_msg_decode() would reject); -EMSGSIZE: encodes to more than
 * SAN_SIDE_MSG_MAX; -EAGAIN: the peer's queue is full (try again when
 * writable); -EPIPE/-ECONNRESET: peer gone.
 */
int san_sidechan_send(int fd, const struct san_msg *m, int pass_fd);

/* One received message. msg's pointers (params) point into buf: keep them together. */
struct san_side_rx {
	unsigned char buf[SAN_SIDE_MSG_MAX];
	size_t len; /* bytes received (== msg.wire_len) */
	struct san_msg msg;
	int fd;		   /* fd passed with the message (close-on-exec), or -1: caller owns it */
	int pidfd;	   /* sender's pidfd (san_sidechan_pass_pidfd()), or -1: caller owns it */
	struct ucred cred; /* sender's pid, real uid, gid at send time; pid 0 if none came */
};

/*
 * Receive and validate one message. @want_fd: this message may carry one fd.
 *
 *   0                a valid side-channel message in rx
 *   -EAGAIN          nothing to read
 *   -EPIPE           the peer closed (or sent an empty packet, which no switch does)
 *   -ECONNRESET ...  the channel failed
 *   -EMSGSIZE        the packet was longer than SAN_SIDE_MSG_MAX (MSG_TRUNC)
 *   -EPROTO          fds it should not carry: more than one, one when !@want_fd,
 *                    or more than fit (MSG_CTRUNC); all of them are closed
 *   -SAN_PROTO_E*    san_msg_decode() rejected it, or bytes follow the message
 *                    (SAN_PROTO_ELENGTH)
 *
 * On any failure no fd is left open. The upgrade machine sees -EAGAIN as
 * nothing, -EPIPE and channel errors as SIDE_CLOSED, the rest as BAD_MSG.
 * Sequence numbers are the caller's (san_msg_check_seq()).
 */
int san_sidechan_recv(int fd, struct san_side_rx *rx, bool want_fd);

/* Close whatever fds rx still holds (rx->fd, rx->pidfd) and mark them -1. */
void san_side_rx_close_fds(struct san_side_rx *rx);

#endif /* SAN_SIDECHAN_H */
