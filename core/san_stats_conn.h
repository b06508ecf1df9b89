/* core — per-connection records in the stats file: claimed, updated, released by the process. */
#ifndef SAN_STATS_CONN_H
#define SAN_STATS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/san_stats.h"

struct san_tuple;

/*
 * A slot of the file's conns[] per connection this process holds (docs/sanstat.md). It is
 * claimed when the connection becomes tracked (connect() started, accept(), adopted at exec),
 * keyed by the fd number (a fd table flag, SAN_FDF_STATSLOT, says it has one), and released
 * when the process lets go of the connection's last number. Connections beyond the slots are
 * counted in hdr.conn_overflow and not shown; nothing fails for want of a slot. A fork child
 * starts with no slots (and its own file): a candidate it inherited, or a switched connection
 * the fork shared, gets one at the child's first data call on it (san_sock.c: the pointer is
 * in s->proc, each process's own), a connection already on TCP for good none.
 */

/* Claim a slot for the connection of tracked fd @fd; the slot, or NULL (stats off, full). */
struct san_stats_conn *san_stats_conn_claim(int fd, enum san_stats_role role);
/* The slot of @fd's connection, or NULL. */
struct san_stats_conn *san_stats_conn_of(int fd);
/* The connection's number @fd goes; it goes on as @nfd (a dup of it). */
void san_stats_conn_rekey(int fd, int nfd);
/* The process let go of @fd's connection: its slot is free (nothing if it had none). */
void san_stats_conn_release(int fd);

#define SAN_CONN_KEEP (-1) /* san_stats_conn_set: leave prov as it is */

/* A new state; @prov (enum san_stats_prov) unless SAN_CONN_KEEP, @reason unless 0. */
void san_stats_conn_set(struct san_stats_conn *c, enum san_stats_cstate state, int prov,
			unsigned int reason);
/* The connection's addresses: @known says which ends of @t are (SAN_CA_LOCAL, SAN_CA_PEER). */
void san_stats_conn_set_addrs(struct san_stats_conn *c, const struct san_tuple *t,
			      unsigned int known);

/* A counter of the slot (&c->san_tx, ...): one relaxed add, for the data paths. */
static inline void san_stats_conn_add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* Fork child, or a fresh start: no slot is ours any more (the file is a new one). */
void san_stats_conn_forget(void);
/* An exec's new image takes the file over: every slot of the old image's is free. */
void san_stats_conn_clear_file(struct san_stats_file *f);

#endif /* SAN_STATS_CONN_H */
