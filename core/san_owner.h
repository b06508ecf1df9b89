/* core — same-host ownership proof: does a given process hold the far end of our TCP socket? */
#ifndef SAN_OWNER_H
#define SAN_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "proto/san_msg.h"

/*
 * What this proves, and against whom
 * ==================================
 *
 * Before a side writes the first in-band byte of the upgrade (its MARK) it
 * must know that its side-channel peer is the process at the other end of the
 * TCP connection (docs/protocol.md §9.3): a program that does not run the
 * switch would read the MARK as data, and an impostor that passes the check
 * would be sent the application's bytes over the SAN. On one host (shm) the
 * proof is:
 *
 *   1. The side-channel peer's credentials come from the kernel: SO_PEERCRED
 *      (pid/uid at connect()/listen() time) or SCM_CREDENTIALS on each
 *      message (pid/uid at send time). An unprivileged process cannot forge
 *      either (the kernel only lets it claim its own pid and uids; only
 *      CAP_SYS_ADMIN/CAP_SETUID could lie, and such a process can read any
 *      memory anyway).
 *   2. The TCP peer endpoint, i.e. the socket whose local and peer addresses
 *      are ours reversed, is looked up in this network namespace (sock_diag,
 *      or /proc/net/tcp{,6}) and its socket inode I and owner uid U are read
 *      (U: the uid of the process that made the socket, or for an accepted one
 *      of the process that called accept(), kept by the kernel).
 *   3. /proc/<pid>/fd of the peer's pid holds "socket:[I]". Where we may not
 *      read that table (the peer is another user's process and we are not
 *      root, or it is non-dumpable), and only with SAN_OWNER_F_UID (which the
 *      engine sets only for a peer of another user): the peer's uid from
 *      step 1 is U. Processes of two users switch that way
 *      (docs/protocol.md §9.3): the proof then names the user, not the
 *      process, and a process of that user could read the owner's memory
 *      anyway; which of its processes answers is the engine's own business
 *      (B refuses a connection it does not hold, NOT_OWNER). Inside a user
 *      namespace that leaves uids unmapped, those all read as the overflow
 *      uid: that uid proves nothing there.
 *
 * Attacks, and which check defeats them:
 *
 *  - An attacker binds the abstract side-channel name of a listener before
 *    the real one (it can: any process of the network namespace can bind any
 *    abstract name). The connector A reaches the attacker, who answers ACCEPT.
 *    A proves B before committing: the attacker's pid does not hold the
 *    accepted socket of A's connection, so step 3 fails (-EPERM) and A vetoes
 *    (CREDENTIALS). If the attacker has another uid than B's socket, step 3
 *    fails by uid where A may not read the attacker's /proc entry. What the
 *    attacker got, the PROPOSE, holds a fresh memfd with empty rings: A writes
 *    nothing into them before its proof of B passes.
 *  - An attacker connects to a listener's side channel and sends a forged
 *    PROPOSE naming someone else's connection (a 4-tuple it read from
 *    /proc/net/tcp, which any user can read). B proves A: the attacker's pid
 *    does not hold the connecting socket of that connection (or, where its
 *    table is closed to B, its uid is not the socket's owner): REJECT. Without
 *    this check B would pause, ACCEPT and start sending the application's
 *    bytes on a SAN channel to the attacker (B's own MARK check only protects
 *    what B *reads*).
 *  - Naming a connection the attacker does hold is not an attack: it owns it.
 *  - Same uid: a process of the same uid can already ptrace the victim and
 *    read its memory (unless the victim is non-dumpable, in which case step 3
 *    cannot be made and the connection stays on TCP: the engine proves a peer
 *    of its own user by fd table only). Against the same
 *    uid the proof is about correctness: an unrelated process of ours that
 *    happens to own the name (two SO_REUSEPORT servers, a stale instance) is
 *    never mistaken for the peer.
 *  - Pid reuse. The pid from SO_PEERCRED or SCM_CREDENTIALS is a number: the
 *    process may exit and the number be given to another process before step
 *    3 reads /proc/<pid>. For that new process to pass, it must itself hold
 *    the TCP peer socket, i.e. be a process that inherited or was passed the
 *    real peer's socket, so it owns the connection as much as the original
 *    one did; an attacker cannot steer a recycled pid onto a process holding
 *    a socket it does not have. Where a pidfd is available (SCM_PIDFD on
 *    Linux >= 6.5, see san_sidechan_pass_pidfd()), san_owner_prove() closes
 *    even that window: the pid is read from the pidfd, and after the scan the
 *    pidfd must still refer to a running process, so the /proc entry scanned
 *    was that process's.
 *  - A process that inherited the socket through fork(), or received it
 *    through SCM_RIGHTS, holds it and passes. That is acceptable: it can
 *    read and write the connection anyway, so it owns it.
 *
 * Which pid to prove: for B proving A, the pid of the PROPOSE's sender. For
 * A proving B, the pid of the ACCEPT's sender (SCM_CREDENTIALS), not
 * SO_PEERCRED: the side-channel listener may have been created by a parent
 * (prefork servers) that does not hold the accepted connection.
 *
 * System calls. Every call these functions make that preload/ interposes
 * (getsockname, getpeername, socket, sendto, recvfrom, read, close, ppoll)
 * is made with syscall(2); the rest (openat, fstat, readlinkat, getdents64)
 * are libc functions preload/ leaves alone. So nothing here reaches a
 * wrapper: callers need no reentrancy guard (san_fd_guard_enter) and may
 * call from any thread, and errno is saved and restored, never changed.
 * No function allocates memory. Results are 0 or -errno.
 *
 * Network namespace: lookups use the namespace of the *calling thread*
 * (/proc/thread-self/net, and a sock_diag socket it creates). Call from a
 * thread in the namespace of the TCP socket (nobody calls setns()): the proof
 * checks it and fails with -EXDEV otherwise.
 */

/* The two ends of a TCP connection as one side sees them; addresses as in PROPOSE (§5.2). */
struct san_tuple {
	struct san_addr local; /* 16-byte IPv6 or IPv4-mapped (::ffff:a.b.c.d); port host order */
	struct san_addr peer;
	uint32_t scope_id; /* IPv6 link-local interface index, else 0 (sock_diag only) */
};

/* True if the 16-byte address is IPv4-mapped (an IPv4 endpoint). */
bool san_addr_is_v4(const struct san_addr *a);
/* The same address and port. */
bool san_addr_eq(const struct san_addr *a, const struct san_addr *b);

/* The same connection seen from the other end. */
void san_tuple_reverse(const struct san_tuple *t, struct san_tuple *r);

/*
 * Local and peer address of a connected TCP socket, IPv4 and IPv4-mapped IPv6
 * both as ::ffff:a.b.c.d, so either end's view compares equal reversed.
 * -ENOTSOCK, -EAFNOSUPPORT (not AF_INET/AF_INET6), -ENOTCONN.
 */
int san_owner_tuple(int fd, struct san_tuple *t);

/* A socket address (AF_INET or AF_INET6, as given to connect()) in the 16-byte form; -EINVAL. */
int san_owner_addr(const struct sockaddr *sa, socklen_t len, struct san_addr *a);

/* The socket inode of @fd (fstat st_ino). -ENOTSOCK if it is not a socket. */
int san_owner_inode(int fd, uint64_t *ino);

/*
 * Find the inode of the TCP socket on this host (this thread's netns) whose
 * local end is t->local and peer end is t->peer. Listeners never match.
 * Returns 0 and *ino; -ENOENT: no such socket, or only an orphan its owner
 * has closed (FIN_WAIT, TIME_WAIT...); -EAGAIN: the connection is still in a
 * listener's accept queue (no process holds it yet): retry later;
 * -EINVAL: a port is 0.
 *
 * san_owner_find_inode() asks sock_diag (one exact netlink lookup, ~2 µs) and
 * falls back to /proc only while sock_diag has never answered in this process
 * (kernel without inet_diag, where every lookup says -ENOENT).
 * san_owner_proc_lookup() reads /proc/net/tcp and /proc/net/tcp6 (a full walk
 * of the kernel's hash tables: milliseconds, see docs/protocol.md).
 */
int san_owner_find_inode(const struct san_tuple *t, uint64_t *ino);
int san_owner_diag_lookup(const struct san_tuple *t, uint64_t *ino);
int san_owner_proc_lookup(const struct san_tuple *t, uint64_t *ino);

/*
 * The /proc parser, exposed for tests. A file in the format of /proc/net/tcp
 * (@v6 false) or /proc/net/tcp6 (@v6 true), streamed through a fixed buffer:
 * same results as san_owner_proc_lookup() for that one file. Malformed and
 * overlong lines are skipped.
 */
int san_owner_proc_lookup_file(const char *path, bool v6, const struct san_tuple *t, uint64_t *ino);

/* One row of /proc/net/tcp{,6}. */
struct san_tcp_row {
	struct san_addr local, peer;
	uint8_t state; /* TCP_ESTABLISHED ... (netinet/tcp.h numbering) */
	uint32_t uid;
	uint64_t inode; /* 0: no socket (request, TIME_WAIT, accept queue) */
};

/*
 * Parse one line of @len bytes (no newline needed). The kernel prints each
 * 32-bit word of an address as %08X of its in-memory (network order) value,
 * i.e. in host byte order. 0, or -EINVAL for anything that is not a row
 * (the header line, truncated or malformed lines, unknown states).
 */
int san_owner_parse_tcp_row(const char *line, size_t len, bool v6, struct san_tcp_row *row);

/*
 * Does process @pid hold socket inode @ino in its fd table? Scans
 * /proc/<pid>/fd without allocating; at most SAN_OWNER_SCAN_MAX entries.
 * 0: yes; -ENOENT: no; -ESRCH: no such process; -EACCES: not ours to look at
 * (other uid, non-dumpable, hidepid); -E2BIG: gave up after the bound.
 */
#define SAN_OWNER_SCAN_MAX (1 << 20)
int san_owner_pid_holds_inode(pid_t pid, uint64_t ino);
/* The same, returning the (first) fd number that holds it, or the same errors. */
int san_owner_pid_fd_of_inode(pid_t pid, uint64_t ino);

/*
 * Has the process of @pidfd exited (or can we not tell: true)? One poll, no /proc: while it
 * says no, the pid the pidfd was made for is still that process's, never reused.
 */
bool san_pidfd_exited(int pidfd);

/* The same test for one fd number of @pid (a hint the peer gave): one readlink. */
int san_owner_pid_fd_is_inode(pid_t pid, int fd, uint64_t ino);

/*
 * Is this process in the initial user namespace (/proc/self/uid_map the identity, one line
 * "0 0 4294967295")? false also when the map cannot be read.
 */
bool san_owner_init_userns(void);

/*
 * The peer's credentials name a process: a real pid. 0 or -ESRCH (pid <= 0).
 * Any uid is acceptable: the proof (san_owner_prove with SAN_OWNER_F_UID)
 * ties it to the TCP socket. Note: SO_PEERCRED reports the peer's effective
 * uid, SCM_CREDENTIALS its real uid; they differ only in set-uid programs,
 * whose sockets then fail the uid step (made as the effective uid).
 */
int san_owner_check_cred(const struct ucred *c);

/* The endpoint at the other end of a connection, as sock_diag (or /proc/net/tcp) shows it. */
struct san_owner_rows {
	uint64_t peer_ino; /* its socket's inode */
	uint32_t peer_uid; /* its socket's owner */
};

/* How to run the proof. Zero-initialise, then set what you have. */
struct san_owner_proof {
	pid_t pid;   /* the side-channel peer's pid; ignored when pidfd >= 0 */
	int pidfd;   /* -1, or a pidfd of the peer (SCM_PIDFD): closes the pid-reuse window */
	int fd_hint; /* -1, or the fd number the peer says holds its socket: one readlink */
	uid_t uid;   /* the peer's uid (SCM_CREDENTIALS); used only with SAN_OWNER_F_UID */
	unsigned int flags; /* SAN_OWNER_F_* */
	/*
	 * NULL, or tcp_fd's tuple as the caller already asked it (the two system calls saved on
	 * the handshake's path): still checked, since the tuple's row must name tcp_fd's inode.
	 */
	const struct san_tuple *own;
	/*
	 * NULL, or the lookup half of this proof made ahead for tcp_fd (san_owner_rows_find,
	 * while the peer was busy with its own half): not made again. Only a lookup that found
	 * the peer's row may be given; one that did not is made again here, when it may have.
	 */
	const struct san_owner_rows *rows;
	/*
	 * 0, or 1 + a netlink socket of san_owner_diag_open() that the caller keeps for its
	 * proofs (B's engine: one socket fewer to make on the switch's path); 0 (the default of
	 * a zeroed proof): one made and closed here.
	 */
	int diag_fd;
};

#define SAN_OWNER_F_PROC 0x1u /* skip sock_diag, parse /proc/net/tcp{,6} (tests, measurement) */
/* Where the peer's fd table is closed to us (-EACCES), its uid owning the socket proves it. */
#define SAN_OWNER_F_UID 0x2u

/*
 * The whole proof for the connected TCP socket @tcp_fd: the endpoint with
 * the reversed 4-tuple exists in this netns with inode I (our own tuple maps
 * to our own inode, so this is the right netns), and the peer process holds
 * I; with SAN_OWNER_F_UID, where the process's table is closed to us, that
 * p->uid owns I instead (and is not the ambiguous overflow uid of a user
 * namespace).
 *
 *   0           proven
 *   -ENOTCONN   @tcp_fd is not a connected TCP socket (also -ENOTSOCK, -EAFNOSUPPORT)
 *   -EXDEV      @tcp_fd is not in this thread's network namespace
 *   -EREMOTE    no socket with the reversed tuple here: the peer is on another
 *               host or namespace, behind NAT, or has already closed it
 *   -EAGAIN     the peer endpoint is still in its listener's accept queue: retry
 *   -EPERM      the process does not hold the peer endpoint: NOT the owner
 *               (with SAN_OWNER_F_UID, where its table is closed to us: the
 *               socket's owner is not p->uid)
 *   -ESRCH      no such process (or it exited during the proof, with a pidfd)
 *   -EACCES     we may not inspect the process (other uid, non-dumpable), and
 *               no SAN_OWNER_F_UID
 *   -E2BIG      the process has more than SAN_OWNER_SCAN_MAX fds
 *   other       -errno of a failed system call
 */
int san_owner_prove(int tcp_fd, const struct san_owner_proof *p);

/*
 * The lookup half of san_owner_prove(): our own row must name @tcp_fd's inode and the peer's
 * row must exist with an owner. @own: NULL, or @tcp_fd's tuple as the caller knows it. 0 with
 * @rows filled, or san_owner_prove()'s -ENOTCONN, -EXDEV, -EREMOTE, -EAGAIN or -errno. Needs
 * nothing from the peer: a connector runs it while the peer proves it.
 */
int san_owner_rows_find(int tcp_fd, const struct san_tuple *own, unsigned int flags,
			struct san_owner_rows *rows);

/* A NETLINK_SOCK_DIAG socket (close-on-exec) for san_owner_proof.diag_fd; fd or -errno. */
int san_owner_diag_open(void);

/* san_owner_prove() with a bare pid. */
int san_owner_prove_peer(int tcp_fd, pid_t peer_pid);

#endif /* SAN_OWNER_H */
