/*
 * core — what a fork() leaves of a connection not switched yet: does another process hold it
 * too, and do our counts still say where its stream is?
 */
#ifndef SAN_FORKED_H
#define SAN_FORKED_H

#include <stdint.h>

/*
 * A connection that a fork() copied may switch only in a process that is its one holder: two
 * processes moving bytes on one stream cannot both follow it onto a SAN. The processes a fork
 * can have given our socket to are this process's ancestors, its children and its siblings
 * (a pre-fork server that forks the next worker before it closes its copy of the last
 * connection). Each one's fd table is read in /proc.
 *
 * 1: another of them holds socket inode @ino; 0: none that we may look at does (a process
 * whose fd table we may not read, another user's or a non-dumpable one, is passed over:
 * docs/protocol.md §9.8); -E2BIG: cannot
 * tell (the family is larger than SAN_FORKED_MAX processes, or /proc would not say: the caller
 * does not switch). Siblings are not looked at when the parent is init (pid 1): its children are
 * the system's daemons.
 */
#define SAN_FORKED_MAX 256
int san_forked_others_hold(uint64_t ino);

/*
 * The kernel's counts of a TCP stream: *tx the bytes the application wrote into the socket
 * (acknowledged plus still queued, TCP_INFO's tcpi_bytes_acked + SIOCOUTQ), *rx the bytes it
 * read (received minus still queued, tcpi_bytes_received - SIOCINQ). Each differs from the
 * application's own count by a constant of an established connection's life (the SYN, on the
 * side that sent it, is acknowledged too), which a caller takes once and compares later: while
 * no other process moves bytes on the socket, the difference stays. It moves without any byte
 * moved too, and the caller then refuses a switch that was safe: a FIN sent or received since,
 * or counts taken while a nonblocking connect() was still in SYN_SENT. 0, or -errno (-EAGAIN: the
 * stream moved under every one of 16 reads).
 */
int san_forked_kernel_counts(int fd, uint64_t *tx, uint64_t *rx);

#endif /* SAN_FORKED_H */
