/*
 * preload — one wait's spin over the switched connections it watches in their rings
 * (core/san_rxwatch.h), the kernel asked only every so often for the rest of the wait's fds.
 * epoll_wait uses it, with a copy of its set's registrations (core/san_epshadow.h).
 */
#ifndef SAN_WATCH_H
#define SAN_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/san_rxwatch.h"

/* Connections one wait watches; a wait with more keeps the kernel's path (a load each). */
#define SAN_WATCH_MAX 64

struct san_watchset {
	int n;
	int key[SAN_WATCH_MAX]; /* the caller's: which of its entries each watch stands for */
	struct san_rxwatch w[SAN_WATCH_MAX];
	bool ready[SAN_WATCH_MAX];
	int found;
	bool looked; /* a FOUND came with a look at the kernel (*kr is its answer) */
	uint32_t ctl_gen; /* san_rxwatch_ctl_gen() before the caller looked at its set */
	bool may_sleep;	  /* the wait has a timeout (san_rxwatch_begin) */
	uint64_t start, until;
};

/*
 * Watch fd for the caller's entry key (false: it cannot be, and is not counted); edge: an
 * edge-triggered registration, its fd's only one (san_rxwatch_begin, with x->ctl_gen).
 */
bool san_watch_add(struct san_watchset *x, int fd, int key, bool edge);

enum san_watch_end {
	SAN_WATCH_FOUND,  /* data in rings: x->ready says where; *kr what a look at the kernel
			   * returned meanwhile (0: none; x->looked: whether there was one), to
			   * report first */
	SAN_WATCH_KERNEL, /* the kernel reported *kr (> 0, or an error), the rings nothing:
			   * san_watch_done(x, NULL) ends the watches */
	SAN_WATCH_SLEEP,  /* nothing: flags up, the caller sleeps in the kernel, then
			   * san_watch_slept */
};

/*
 * Spin (the wait's timeout ms, SANSWITCH_SPIN_US) over the rings, look(arg) being the kernel
 * asked without sleeping, at most every 50 us (*kernel_at: when it last was, shared by the
 * caller's waits of the same set). Returns how it ended; a FOUND leaves the watches to
 * san_watch_done.
 */
enum san_watch_end san_watch_spin(struct san_watchset *x, int ms, uint64_t *kernel_at,
				  int (*look)(void *arg), void *arg, int *kr);

/* After a FOUND or a KERNEL: reported[i] (NULL: x->ready) says which the wait returned. */
void san_watch_done(struct san_watchset *x, const bool *reported);

/* After a SLEEP: the kernel returned r; the spin learns whether a longer one would have paid. */
void san_watch_slept(struct san_watchset *x, int r);

#endif
