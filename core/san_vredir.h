/*
 * core — where a fork family's connections are served over verbs (docs/verbs.md §2, "Workers
 * and forked children"). The rdma_cm listener on a TCP listener's port is the process's that
 * called listen(); a connection that another process of its family accepted (an nginx-style
 * worker) or serves (a forked child) is served there by an rdma_cm listener of that process's
 * own, on a port of its own. This table, in memory the family shares (MAP_SHARED, mapped by
 * the first listener, before the forks), tells the listener's process which port that is, so
 * that it can send A there (a REJECT that names the port).
 *
 * Lock-free: an entry is claimed by compare-and-swap, filled, then published; readers take
 * only published ones. Entries of processes that are gone are taken again. All calls are safe
 * from any thread and from the engine; none allocates after san_vredir_init().
 */
#ifndef SAN_VREDIR_H
#define SAN_VREDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/san_owner.h"

#define SAN_VREDIR_MAX 256 /* connections of a family named at once */

/* Map the table, once per process family (a fork child keeps its parent's). 0 or -errno. */
int san_vredir_init(void);
/* Is there a table (this process, or an ancestor before the fork, mapped it)? */
bool san_vredir_ready(void);
/* The connection @t (as this side sees it) is served on rdma_cm @port by this process. */
int san_vredir_put(const struct san_tuple *t, uint16_t port);
/* This process no longer serves @t. */
void san_vredir_drop(const struct san_tuple *t);
/* The port a living process of the family serves @t on, or 0. */
uint16_t san_vredir_find(const struct san_tuple *t);

#endif
