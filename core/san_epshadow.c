/* core — a copy of the epoll registrations of managed connections (san_epshadow.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_epshadow.h"

#define EPSHADOW_ONESHOT_LIKE (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)

struct epshadow {
	bool inherited; /* made before a fork, in the parent: not ours to trust */
	int n, cap;
	struct san_epshadow_ent *e;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct epshadow **sets; /* by epoll fd number */
static int nsets;	       /* size of sets */
static int live;	       /* sets in use (a close of any fd looks only while there are) */
static int ninherited;	       /* sets whose copy is not trusted (h->inherited) */

/*
 * How many sets' copies hold each fd number (san_epshadow_watch_in: an edge-triggered fd must be
 * in no other). regs_lost: a count could not be kept (no memory): no edge is watched.
 */
static uint16_t *regs;
static int nregs;
static bool regs_lost;

/*
 * The numbers epoll_create gave (by number, a bit each): a dup of one may come before its copy
 * exists. A bit left by a close is harmless: a dup of that number then only makes copies that
 * are never used.
 */
static uint64_t *epfds;
static int nepfds; /* bits in epfds */
static bool any_epfd;

bool san_epshadow_any(void)
{
	return __atomic_load_n(&live, __ATOMIC_RELAXED) != 0;
}

static struct epshadow *set_get(int epfd, bool make)
{
	if (epfd < 0)
		return NULL;
	if (epfd >= nsets) {
		int n = nsets ? nsets : 16;
		struct epshadow **v;

		if (!make)
			return NULL;
		while (n <= epfd)
			n *= 2;
		v = realloc(sets, (size_t)n * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + nsets, 0, (size_t)(n - nsets) * sizeof(*v));
		sets = v;
		nsets = n;
	}
	if (!sets[epfd] && make && (sets[epfd] = calloc(1, sizeof(**sets))))
		__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
	return sets[epfd];
}

static int ent_find(const struct epshadow *h, int fd)
{
	for (int i = 0; i < h->n; i++)
		if (h->e[i].fd == fd)
			return i;
	return -1;
}

static void regs_add(int fd, int d)
{
	if (fd < 0 || regs_lost)
		return;
	if (fd >= nregs) {
		int n = nregs ? nregs : 256;
		uint16_t *v;

		if (d < 0)
			return; /* (never counted) */
		while (n <= fd)
			n *= 2;
		if (!(v = realloc(regs, (size_t)n * sizeof(*v)))) {
			regs_lost = true;
			return;
		}
		memset(v + nregs, 0, (size_t)(n - nregs) * sizeof(*v));
		regs = v;
		nregs = n;
	}
	if (d > 0 && regs[fd] == UINT16_MAX)
		regs_lost = true; /* (65,535 sets: not followed) */
	else if (d > 0 || regs[fd] > 0)
		regs[fd] = (uint16_t)(regs[fd] + d);
}

static void ent_del(struct epshadow *h, int i)
{
	regs_add(h->e[i].fd, -1);
	h->e[i] = h->e[--h->n];
}

/* Every entry of h leaves (the set is forgotten, or no longer trusted). */
static void ent_clear(struct epshadow *h)
{
	while (h->n > 0)
		ent_del(h, h->n - 1);
}

/* h's copy is not to be trusted from now on. */
static void set_untrusted(struct epshadow *h)
{
	if (!h->inherited) {
		h->inherited = true;
		ninherited++;
	}
}

void san_epshadow_ctl(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct epshadow *h;
	int i;

	pthread_mutex_lock(&lock);
	h = set_get(epfd, op == EPOLL_CTL_ADD);
	if (!h && op == EPOLL_CTL_ADD)
		regs_lost = true; /* (no memory: a registration not counted, no edge watched) */
	if (!h || h->inherited)
		goto out;
	i = ent_find(h, fd);
	if (op == EPOLL_CTL_DEL) {
		if (i >= 0)
			ent_del(h, i);
	} else if (ev && i >= 0) {
		h->e[i].ev = *ev;
	} else if (ev && op == EPOLL_CTL_ADD) {
		if (h->n == h->cap) {
			int cap = h->cap ? 2 * h->cap : 8;
			struct san_epshadow_ent *v = realloc(h->e, (size_t)cap * sizeof(*v));

			if (!v) {
				/* cannot follow it: the set is not used any more (kernel's path) */
				ent_clear(h);
				set_untrusted(h);
				goto out;
			}
			h->e = v;
			h->cap = cap;
		}
		h->e[h->n++] = (struct san_epshadow_ent){ fd, *ev, false };
		regs_add(fd, 1);
	}
out:
	pthread_mutex_unlock(&lock);
}

/* A set whose copy cannot be trusted (never used again): its registrations are not all seen. */
static void untrust_locked(int epfd)
{
	struct epshadow *h = set_get(epfd, true);

	if (h) {
		ent_clear(h);
		set_untrusted(h);
	}
}

void san_epshadow_created(int epfd)
{
	if (epfd < 0)
		return;
	pthread_mutex_lock(&lock);
	if (epfd >= nepfds) {
		int n = nepfds ? nepfds : 1024;
		uint64_t *v;

		while (n <= epfd)
			n *= 2;
		if (!(v = realloc(epfds, (size_t)n / 8))) {
			untrust_locked(epfd); /* cannot follow its dups: no copy of it is used */
			goto out;
		}
		memset(v + nepfds / 64, 0, (size_t)(n - nepfds) / 8);
		epfds = v;
		nepfds = n;
	}
	epfds[epfd / 64] |= 1ull << (epfd % 64);
	__atomic_store_n(&any_epfd, true, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&lock);
}

void san_epshadow_dup(int oldfd, int newfd)
{
	if (!__atomic_load_n(&any_epfd, __ATOMIC_RELAXED) && !san_epshadow_any())
		return;
	pthread_mutex_lock(&lock);
	if ((oldfd >= 0 && oldfd < nsets && sets[oldfd]) ||
	    (oldfd >= 0 && oldfd < nepfds && (epfds[oldfd / 64] & (1ull << (oldfd % 64))))) {
		/* two numbers, one set: a change through either leaves the other's copy wrong */
		untrust_locked(oldfd);
		untrust_locked(newfd);
	}
	pthread_mutex_unlock(&lock);
}

static void forget_locked(int fd)
{
	if (fd >= 0 && fd < nsets && sets[fd]) {
		ent_clear(sets[fd]);
		if (sets[fd]->inherited)
			ninherited--;
		free(sets[fd]->e);
		free(sets[fd]);
		sets[fd] = NULL;
		__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	}
	for (int k = 0; k < nsets; k++) {
		int i;

		if (sets[k] && (i = ent_find(sets[k], fd)) >= 0)
			ent_del(sets[k], i);
	}
}

void san_epshadow_forget(int fd)
{
	if (!san_epshadow_any())
		return;
	pthread_mutex_lock(&lock);
	forget_locked(fd);
	pthread_mutex_unlock(&lock);
}

void san_epshadow_forget_range(unsigned int first, unsigned int last)
{
	if (!san_epshadow_any())
		return;
	pthread_mutex_lock(&lock);
	for (int k = 0; k < nsets; k++) {
		/* the sets in the range go; members in the range leave the others */
		if (!sets[k])
			continue;
		if ((unsigned int)k >= first && (unsigned int)k <= last) {
			forget_locked(k);
			continue;
		}
		for (int i = 0; i < sets[k]->n;)
			if ((unsigned int)sets[k]->e[i].fd >= first && (unsigned int)sets[k]->e[i].fd <= last)
				ent_del(sets[k], i);
			else
				i++;
	}
	pthread_mutex_unlock(&lock);
}

static int watch_in(int epfd, struct san_epshadow_ent *out, int max, bool edges)
{
	struct epshadow *h;
	int n = 0;

	pthread_mutex_lock(&lock);
	h = set_get(epfd, false);
	if (!h || h->inherited) {
		n = -1;
		goto out;
	}
	/* (an edge of an fd another set holds, or a set this copy cannot see may hold) */
	edges = edges && !ninherited && !regs_lost;
	for (int i = 0; i < h->n && n <= max; i++) {
		uint32_t e = h->e[i].ev.events;
		bool edge = (e & EPSHADOW_ONESHOT_LIKE) == EPOLLET;

		if (!(e & (EPOLLIN | EPOLLRDNORM)) || ((e & EPSHADOW_ONESHOT_LIKE) && !edge))
			continue;
		if (edge && (!edges || h->e[i].fd >= nregs || regs[h->e[i].fd] != 1))
			continue;
		if (n < max) {
			out[n] = h->e[i];
			out[n].edge = edge;
		}
		n++;
	}
out:
	pthread_mutex_unlock(&lock);
	return n;
}

int san_epshadow_level_in(int epfd, struct san_epshadow_ent *out, int max)
{
	return watch_in(epfd, out, max, false);
}

int san_epshadow_watch_in(int epfd, struct san_epshadow_ent *out, int max)
{
	return watch_in(epfd, out, max, true);
}

void san_epshadow_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	for (int k = 0; k < nsets; k++)
		if (sets[k])
			set_untrusted(sets[k]);
}
