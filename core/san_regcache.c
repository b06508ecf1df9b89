/* core — verbs registration cache: buffers registered once, forgotten when their memory changes. */
#include "core/san_regcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Every registration lives in one slot of a table allocated at create (max_entries slots), so
 * nothing here allocates afterwards: lookup, release and invalidate run inside the preload's
 * malloc/free wrappers.
 *
 * A slot's life:
 *
 *   FREE -> PENDING   a lookup missed and reserved it; the register callback runs unlocked
 *   PENDING -> CACHED    registered: in the index (findable), refs 1
 *   PENDING -> DETACHED  registered, but an invalidate overlapped it meanwhile: handed to the
 *                        caller and never indexed (as if invalidated right after insertion)
 *   PENDING -> FREE      the callback failed
 *   CACHED -> DETACHED   invalidated while in use: out of the index, alive until the last release
 *   CACHED -> REAPING    invalidated or evicted unused: out of the index; deregistered unlocked
 *   DETACHED -> REAPING  last release
 *   REAPING -> FREE      deregistered
 *   any -> ORPHAN/FREE   fork child (ORPHAN: referenced at fork; FREE at its last release)
 *
 * A slot counts against max_entries and its bytes against max_bytes from PENDING until FREE:
 * the pages are pinned that long (and the kernel's RLIMIT_MEMLOCK counts them that long).
 */
enum slot_state {
	SLOT_FREE,
	SLOT_PENDING,
	SLOT_CACHED,
	SLOT_DETACHED,
	SLOT_REAPING,
	SLOT_ORPHAN,
};

struct slot {
	struct san_regcache_entry e; /* first: the caller's pointer is the slot's */
	uint32_t refs;
	uint8_t state;	   /* enum slot_state */
	bool stale;	   /* PENDING: an invalidate overlapped it while it was registering */
	struct slot *prev; /* links: LRU (CACHED, refs 0), pending list, free list, reap list */
	struct slot *next;
};

struct slot_list {
	struct slot *head, *tail;
};

struct san_regcache {
	pthread_mutex_t lock;
	struct san_regcache_ops ops;
	uintptr_t page_mask;
	uint32_t max_entries;
	uint64_t max_bytes;

	/*
	 * Indexed + pending registrations, written under the lock, read without it by invalidate:
	 * at 0 there is nothing an invalidate could have to drop (see san_regcache_invalidate).
	 */
	uint32_t active;

	struct slot *slots; /* max_entries */
	struct slot *free;  /* free slots, singly linked by next */
	uint32_t used;	    /* slots not FREE */
	uint64_t bytes;	    /* bytes of the slots not FREE (ORPHAN excepted) */

	/*
	 * The index: CACHED slots sorted by start (a sorted array, see docs/verbs-registration.md
	 * for why not a tree). Entries may overlap; max_len bounds every entry's length, so the
	 * entries that can overlap a point lie within max_len before it.
	 */
	struct slot **index;
	uint32_t n_index;
	uintptr_t max_len;

	struct slot_list lru; /* CACHED with refs 0, least recently used first */
	uint32_t lru_count;
	uint64_t lru_bytes;
	struct slot_list pending; /* PENDING */

	struct san_regcache_stats st;
};

/* A lookup that had to evict retries at most this many times before giving up (-ENOMEM). */
#define EVICT_ROUNDS 8

/* ---- lists ----------------------------------------------------------------------------------- */

static void list_push_tail(struct slot_list *l, struct slot *s)
{
	s->next = NULL;
	s->prev = l->tail;
	if (l->tail)
		l->tail->next = s;
	else
		l->head = s;
	l->tail = s;
}

static void list_remove(struct slot_list *l, struct slot *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		l->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		l->tail = s->prev;
	s->prev = s->next = NULL;
}

static uintptr_t slot_len(const struct slot *s)
{
	return s->e.end - s->e.start;
}

static void active_add(struct san_regcache *rc, int d)
{
	__atomic_store_n(&rc->active, rc->active + (uint32_t)d, __ATOMIC_RELAXED);
}

static struct slot *slot_alloc(struct san_regcache *rc)
{
	struct slot *s = rc->free;

	rc->free = s->next;
	s->next = s->prev = NULL;
	s->refs = 0;
	s->stale = false;
	rc->used++;
	return s;
}

/* The slot's registration is gone (deregistered, failed, the parent's): back to the free list. */
static void slot_free(struct san_regcache *rc, struct slot *s, bool counted_bytes)
{
	if (counted_bytes)
		rc->bytes -= slot_len(s);
	s->state = SLOT_FREE;
	s->refs = 0;
	s->next = rc->free;
	s->prev = NULL;
	rc->free = s;
	rc->used--;
}

/* ---- the index ------------------------------------------------------------------------------- */

/* First position whose entry starts at or after @x. */
static uint32_t index_lower(const struct san_regcache *rc, uintptr_t x)
{
	uint32_t lo = 0, hi = rc->n_index;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (rc->index[mid]->e.start < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void index_insert(struct san_regcache *rc, struct slot *s)
{
	uint32_t i = index_lower(rc, s->e.start);

	memmove(rc->index + i + 1, rc->index + i, (rc->n_index - i) * sizeof(rc->index[0]));
	rc->index[i] = s;
	rc->n_index++;
	if (slot_len(s) > rc->max_len)
		rc->max_len = slot_len(s);
	s->state = SLOT_CACHED;
}

/* After removals: max_len may have been the removed entry's; recompute it exactly. */
static void index_recompute_max_len(struct san_regcache *rc)
{
	uintptr_t m = 0;
	uint32_t i;

	for (i = 0; i < rc->n_index; i++)
		if (slot_len(rc->index[i]) > m)
			m = slot_len(rc->index[i]);
	rc->max_len = m;
}

static void index_remove(struct san_regcache *rc, struct slot *s)
{
	uint32_t i = index_lower(rc, s->e.start);

	/* entries with the same start sit together from i on */
	while (i < rc->n_index && rc->index[i] != s)
		i++;
	if (i == rc->n_index)
		return; /* not indexed: cannot happen for a CACHED slot */
	memmove(rc->index + i, rc->index + i + 1, (rc->n_index - i - 1) * sizeof(rc->index[0]));
	rc->n_index--;
	if (slot_len(s) == rc->max_len)
		index_recompute_max_len(rc);
}

/* An indexed entry covering [a, b) with the access bits, or NULL. */
static struct slot *index_find_cover(const struct san_regcache *rc, uintptr_t a, uintptr_t b,
				     unsigned int access)
{
	/* an entry covering b has end >= b and length <= max_len, so start >= b - max_len */
	uintptr_t lo = b > rc->max_len ? b - rc->max_len : 0;
	uint32_t i = index_lower(rc, a + 1); /* entries starting at or before a lie below i */

	while (i-- > 0 && rc->index[i]->e.start >= lo) {
		const struct slot *s = rc->index[i];

		if (s->e.end >= b && (s->e.access & access) == access)
			return rc->index[i];
	}
	return NULL;
}

/* ---- taking registrations out -------------------------------------------------------------- */

/*
 * An indexed entry leaves the index (invalidated or evicted). Unused: onto @reap, to be
 * deregistered once the lock is dropped. In use: DETACHED, deregistered at its last release.
 */
static void take_out(struct san_regcache *rc, struct slot *s, struct slot **reap)
{
	active_add(rc, -1);
	if (s->refs) {
		s->state = SLOT_DETACHED;
		return;
	}
	list_remove(&rc->lru, s);
	rc->lru_count--;
	rc->lru_bytes -= slot_len(s);
	s->state = SLOT_REAPING;
	s->next = *reap;
	*reap = s;
}

/*
 * Deregister the slots on @reap, with the lock NOT held (the callback may free() and re-enter
 * invalidate), then give the slots back. Called with the lock held; returns with it held.
 */
static void reap(struct san_regcache *rc, struct slot *reap_list)
{
	struct slot *s, *next;

	if (!reap_list)
		return;
	pthread_mutex_unlock(&rc->lock);
	for (s = reap_list; s; s = s->next)
		rc->ops.dereg(rc->ops.ctx, &s->e.reg);
	pthread_mutex_lock(&rc->lock);
	for (s = reap_list; s; s = next) {
		next = s->next;
		slot_free(rc, s, true);
	}
}

/* ---- limits and eviction ------------------------------------------------------------------- */

/*
 * Room for one more registration of @need bytes if @n slots and @b bytes (among those counted)
 * went away first. bytes never exceeds max_bytes (a reservation is made only when it fits), so
 * the subtraction below cannot wrap, even with max_bytes = UINT64_MAX for "no limit".
 */
static bool fits_without(const struct san_regcache *rc, uint64_t need, uint32_t n, uint64_t b)
{
	return rc->used - n < rc->max_entries && need <= rc->max_bytes - (rc->bytes - b);
}

/*
 * Evict least recently used unused entries until @need fits once they are deregistered; the
 * caller checked that evicting them all would be enough. Their slots and bytes stay counted
 * until reap() has deregistered them: the pages stay pinned until then.
 */
static struct slot *evict_for(struct san_regcache *rc, uint64_t need)
{
	struct slot *reap_list = NULL;
	uint32_t n = 0;
	uint64_t b = 0;

	while (!fits_without(rc, need, n, b) && rc->lru.head) {
		struct slot *s = rc->lru.head;

		n++;
		b += slot_len(s);
		index_remove(rc, s);
		take_out(rc, s, &reap_list);
		rc->st.evictions++;
	}
	return reap_list;
}

/* ---- API ----------------------------------------------------------------------------------- */

int san_regcache_create(const struct san_regcache_ops *ops, const struct san_regcache_limits *lim,
			struct san_regcache **out)
{
	struct san_regcache *rc;
	size_t page = lim->page_size;
	uint32_t i;

	if (!page) {
		long p = sysconf(_SC_PAGESIZE);

		page = p > 0 ? (size_t)p : 4096;
	}
	if (!ops->reg || !ops->dereg || !lim->max_entries || (page & (page - 1)))
		return -EINVAL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->slots = calloc(lim->max_entries, sizeof(rc->slots[0]));
	rc->index = calloc(lim->max_entries, sizeof(rc->index[0]));
	if (!rc->slots || !rc->index) {
		free(rc->slots);
		free(rc->index);
		free(rc);
		return -ENOMEM;
	}
	pthread_mutex_init(&rc->lock, NULL);
	rc->ops = *ops;
	rc->page_mask = (uintptr_t)page - 1;
	rc->max_entries = lim->max_entries;
	rc->max_bytes = lim->max_bytes;
	for (i = lim->max_entries; i-- > 0;) {
		rc->slots[i].next = rc->free;
		rc->free = &rc->slots[i];
	}
	*out = rc;
	return 0;
}

void san_regcache_destroy(struct san_regcache *rc)
{
	uint32_t i;

	if (!rc)
		return;
	for (i = 0; i < rc->max_entries; i++) {
		struct slot *s = &rc->slots[i];

		/* the rest are free or the parent's (ORPHAN); PENDING and REAPING need a call in
		 * progress, which the contract excludes */
		if (s->state == SLOT_CACHED || s->state == SLOT_DETACHED)
			rc->ops.dereg(rc->ops.ctx, &s->e.reg);
	}
	pthread_mutex_destroy(&rc->lock);
	free(rc->index);
	free(rc->slots);
	free(rc);
}

int san_regcache_lookup(struct san_regcache *rc, const void *addr, size_t len, unsigned int access,
			struct san_regcache_entry **out)
{
	uintptr_t a = (uintptr_t)addr, b = a + len, start, end;
	struct san_reg reg = { 0 };
	struct slot *s;
	uint64_t need;
	int round, r;

	if (!len || b < a || b > UINTPTR_MAX - rc->page_mask)
		return -EINVAL;
	start = a & ~rc->page_mask;
	end = (b + rc->page_mask) & ~rc->page_mask;
	need = end - start;

	pthread_mutex_lock(&rc->lock);
	for (round = 0;; round++) {
		s = index_find_cover(rc, a, b, access);
		if (s) {
			if (!s->refs++) {
				list_remove(&rc->lru, s);
				rc->lru_count--;
				rc->lru_bytes -= slot_len(s);
			}
			rc->st.hits++;
			pthread_mutex_unlock(&rc->lock);
			*out = &s->e;
			return 0;
		}
		if (need > rc->max_bytes) {
			r = -E2BIG;
			goto refused;
		}
		if (fits_without(rc, need, 0, 0))
			break;
		/* evict only if that is enough: a refusal must not empty the cache for nothing */
		if (!fits_without(rc, need, rc->lru_count, rc->lru_bytes) ||
		    round == EVICT_ROUNDS) {
			r = -ENOMEM;
			goto refused;
		}
		reap(rc, evict_for(rc, need));
		/* the lock was dropped: another thread may have registered the range, look again */
	}

	/* Reserve a slot and the bytes, then register without the lock (it takes long). */
	s = slot_alloc(rc);
	s->state = SLOT_PENDING;
	s->e = (struct san_regcache_entry){ .start = start, .end = end, .access = access };
	s->refs = 1;
	list_push_tail(&rc->pending, s);
	rc->bytes += need;
	active_add(rc, 1);
	rc->st.misses++;
	pthread_mutex_unlock(&rc->lock);

	r = rc->ops.reg(rc->ops.ctx, (void *)start, (size_t)need, access, &reg);

	pthread_mutex_lock(&rc->lock);
	list_remove(&rc->pending, s);
	active_add(rc, -1);
	if (r) {
		slot_free(rc, s, true);
		rc->st.reg_failures++;
		pthread_mutex_unlock(&rc->lock);
		return r < 0 ? r : -EIO; /* (a callback breaking its contract) */
	}
	s->e.reg = reg;
	if (s->stale) {
		/*
		 * An invalidate overlapped the range while the callback ran: the pages it pinned
		 * may be the old ones. The caller may use it (its own buffer was valid when it
		 * asked; the same as an invalidate just after insertion), but no later lookup will.
		 */
		s->state = SLOT_DETACHED;
	} else {
		index_insert(rc, s);
		active_add(rc, 1);
	}
	pthread_mutex_unlock(&rc->lock);
	*out = &s->e;
	return 0;

refused:
	rc->st.misses++;
	rc->st.limit_failures++;
	pthread_mutex_unlock(&rc->lock);
	return r;
}

int san_regcache_release(struct san_regcache *rc, struct san_regcache_entry *e)
{
	struct slot *s = (struct slot *)e; /* e is the slot's first member */

	pthread_mutex_lock(&rc->lock);
	if (!s->refs) {
		pthread_mutex_unlock(&rc->lock);
		return -EINVAL;
	}
	if (--s->refs == 0) {
		switch (s->state) {
		case SLOT_CACHED:
			list_push_tail(&rc->lru, s);
			rc->lru_count++;
			rc->lru_bytes += slot_len(s);
			break;
		case SLOT_DETACHED:
			s->state = SLOT_REAPING;
			s->next = NULL;
			reap(rc, s);
			break;
		case SLOT_ORPHAN:
			slot_free(rc, s, false); /* the parent's registration: not ours to undo */
			break;
		}
	}
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

/*
 * Why one relaxed load of active is enough to skip the lock: the registrations that matter are
 * those whose pages the change (munmap, madvise...) invalidated, i.e. whose register callback
 * pinned pages before the change took effect. active was incremented under the lock before
 * that callback was called, and the kernel serialises pinning and unmapping of the same pages
 * on the page tables' locks, which order our increment before the change, and the change
 * before the caller's call here. A registration that pinned after the change pinned the new
 * pages: nothing to drop.
 */
void san_regcache_invalidate(struct san_regcache *rc, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + len, lo;
	struct slot *s, *reap_list = NULL;
	uint32_t i, w, last;
	bool removed_longest = false;

	if (!len || !__atomic_load_n(&rc->active, __ATOMIC_RELAXED))
		return;
	if (b < a)
		b = UINTPTR_MAX; /* to the end of the address space */

	pthread_mutex_lock(&rc->lock);
	for (s = rc->pending.head; s; s = s->next)
		if (s->e.start < b && s->e.end > a && !s->stale) {
			s->stale = true;
			rc->st.invalidations++;
		}

	/* an entry overlapping [a, b) starts before b, and after a - max_len (it is not longer) */
	lo = a > rc->max_len ? a - rc->max_len : 0;
	i = index_lower(rc, lo);
	last = index_lower(rc, b);
	for (w = i; i < last; i++) {
		s = rc->index[i];
		if (s->e.end > a) {
			if (slot_len(s) == rc->max_len)
				removed_longest = true;
			take_out(rc, s, &reap_list);
			rc->st.invalidations++;
		} else {
			rc->index[w++] = s;
		}
	}
	if (w != last) {
		memmove(rc->index + w, rc->index + last,
			(rc->n_index - last) * sizeof(rc->index[0]));
		rc->n_index -= last - w;
		if (removed_longest)
			index_recompute_max_len(rc);
	}
	reap(rc, reap_list);
	pthread_mutex_unlock(&rc->lock);
}

void san_regcache_get_stats(struct san_regcache *rc, struct san_regcache_stats *out)
{
	pthread_mutex_lock(&rc->lock);
	*out = rc->st;
	out->entries = rc->n_index;
	out->registrations = rc->used;
	out->registered_bytes = rc->bytes;
	pthread_mutex_unlock(&rc->lock);
}

void san_regcache_fork_prepare(struct san_regcache *rc)
{
	pthread_mutex_lock(&rc->lock);
}

void san_regcache_fork_parent(struct san_regcache *rc)
{
	pthread_mutex_unlock(&rc->lock);
}

void san_regcache_fork_child(struct san_regcache *rc)
{
	uint32_t i;

	/* Re-created rather than unlocked: this must also work if prepare was not called. */
	pthread_mutex_init(&rc->lock, NULL);
	rc->free = NULL;
	rc->used = 0;
	rc->bytes = 0;
	rc->n_index = 0;
	rc->max_len = 0;
	rc->lru = (struct slot_list){ NULL, NULL };
	rc->pending = (struct slot_list){ NULL, NULL };
	rc->lru_count = 0;
	rc->lru_bytes = 0;
	__atomic_store_n(&rc->active, 0, __ATOMIC_RELAXED);
	for (i = rc->max_entries; i-- > 0;) {
		struct slot *s = &rc->slots[i];

		/*
		 * A reference held at fork may be released in the child (a connection's copy being
		 * closed): keep that slot out of reuse until then. Its pages are not pinned for the
		 * child, so its bytes do not count. Everything else (including a PENDING or REAPING
		 * slot, whose thread did not survive fork) is simply forgotten.
		 */
		if (s->refs && (s->state == SLOT_CACHED || s->state == SLOT_DETACHED ||
				s->state == SLOT_ORPHAN)) {
			s->state = SLOT_ORPHAN;
			s->prev = s->next = NULL;
			rc->used++;
		} else {
			s->state = SLOT_FREE;
			s->refs = 0;
			s->prev = NULL;
			s->next = rc->free;
			rc->free = s;
		}
	}
}
