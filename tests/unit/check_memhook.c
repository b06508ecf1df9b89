/* tests/unit: core/san_memhook — every cache of the process hears of changed memory, once added. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_memhook.h"
#include "tests/unit/suites.h"

/*
 * A fake registration per cache: the callbacks count, never touch memory, so the addresses
 * are made up. The preload's wrappers (free, munmap...) call san_memhook_invalidate; here the
 * tests call it as they would.
 */
#define PG 4096u
#define AT(n) ((void *)(uintptr_t)(0x20000000u + (n)*PG))

struct fake {
	int regs, deregs;
	int reenter; /* dereg calls san_memhook_invalidate, as free() inside ibv_dereg_mr would */
};

static int fake_reg(void *ctx, void *addr, size_t len, unsigned int access, struct san_reg *out)
{
	struct fake *f = ctx;

	(void)addr, (void)len, (void)access;
	san_memhook_pinned(1); /* (the provider counts before it pins) */
	f->regs++;
	out->mr = f;
	out->lkey = out->rkey = (uint32_t)f->regs;
	return 0;
}

static void fake_dereg(void *ctx, const struct san_reg *reg)
{
	struct fake *f = ctx;

	(void)reg;
	f->deregs++;
	san_memhook_pinned(-1);
	if (f->reenter)
		san_memhook_invalidate(AT(1000), PG);
}

static struct san_regcache *make_cache(struct fake *f)
{
	struct san_regcache_ops ops = { .reg = fake_reg, .dereg = fake_dereg, .ctx = f };
	struct san_regcache_limits lim = { .max_entries = 8,
					   .max_bytes = 1u << 20,
					   .page_size = PG };
	struct san_regcache *rc = NULL;

	ck_assert_int_eq(san_regcache_create(&ops, &lim, &rc), 0);
	return rc;
}

/* Register [AT(page), AT(page) + len) and leave it cached (released, unused). */
static void cache_range(struct san_regcache *rc, unsigned int page, size_t len)
{
	struct san_regcache_entry *e;

	ck_assert_int_eq(san_regcache_lookup(rc, AT(page), len, 0, &e), 0);
	ck_assert_int_eq(san_regcache_release(rc, e), 0);
}

START_TEST(test_inactive_without_caches)
{
	ck_assert(!san_memhook_active());
	san_memhook_invalidate(AT(0), PG); /* nothing to tell: returns */
	ck_assert(!san_memhook_active());
}
END_TEST

START_TEST(test_every_cache_hears)
{
	struct fake f1 = { 0 }, f2 = { 0 };
	struct san_regcache *a = make_cache(&f1), *b = make_cache(&f2);

	ck_assert_int_eq(san_memhook_add(a), 0);
	ck_assert_int_eq(san_memhook_add(b), 0);
	ck_assert(!san_memhook_active()); /* caches, but nothing registered: the fast path */
	cache_range(a, 0, 2 * PG);
	ck_assert(san_memhook_active());
	cache_range(b, 10, PG);
	/* a change inside a's range only: a's registration goes, b's stays */
	san_memhook_invalidate(AT(1), 16);
	ck_assert_int_eq(f1.deregs, 1);
	ck_assert_int_eq(f2.deregs, 0);
	/* a range over both (a's is gone already): b's goes */
	cache_range(a, 0, PG);
	san_memhook_invalidate(AT(0), 11 * PG);
	ck_assert_int_eq(f1.deregs, 2);
	ck_assert_int_eq(f2.deregs, 1);
	/* length 0 changes nothing */
	cache_range(b, 10, PG);
	san_memhook_invalidate(AT(10), 0);
	ck_assert_int_eq(f2.deregs, 1);
	san_memhook_del(a);
	san_memhook_del(b);
	san_regcache_destroy(a);
	san_regcache_destroy(b);
	ck_assert_int_eq(f2.deregs, 2); /* (destroy deregistered b's last one) */
	ck_assert(!san_memhook_active());
}
END_TEST

START_TEST(test_removed_cache_hears_nothing)
{
	struct fake f1 = { 0 }, f2 = { 0 };
	struct san_regcache *a = make_cache(&f1), *b = make_cache(&f2);

	ck_assert_int_eq(san_memhook_add(a), 0);
	ck_assert_int_eq(san_memhook_add(b), 0);
	cache_range(a, 0, PG);
	cache_range(b, 0, PG);
	san_memhook_del(a);
	san_memhook_del(a); /* twice: harmless */
	san_memhook_invalidate(AT(0), PG);
	ck_assert_int_eq(f1.deregs, 0);
	ck_assert_int_eq(f2.deregs, 1);
	san_memhook_del(b);
	ck_assert(san_memhook_active()); /* a's registration is still alive */
	san_regcache_destroy(a);
	san_regcache_destroy(b);
	ck_assert_int_eq(f1.deregs, 1);
	ck_assert(!san_memhook_active());
}
END_TEST

/* A deregistration that frees memory re-enters (the read lock is taken again: no deadlock). */
START_TEST(test_reentrant_invalidate)
{
	struct fake f1 = { .reenter = 1 };
	struct san_regcache *a = make_cache(&f1);

	ck_assert_int_eq(san_memhook_add(a), 0);
	cache_range(a, 0, PG);
	cache_range(a, 1000, PG);
	san_memhook_invalidate(AT(0), PG);
	/* the first dereg's re-entry took the second registration out too */
	ck_assert_int_eq(f1.deregs, 2);
	san_memhook_del(a);
	san_regcache_destroy(a);
}
END_TEST

/* A fork child forgets the parent's caches: nothing reaches them, the fast path is back. */
START_TEST(test_fork_child_forgets)
{
	struct fake f1 = { 0 };
	struct san_regcache *a = make_cache(&f1);
	pid_t pid;
	int st;

	ck_assert_int_eq(san_memhook_add(a), 0);
	cache_range(a, 0, PG);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* (the atfork handler the library registered at load ran before this) */
		int bad = san_memhook_active();

		san_memhook_invalidate(AT(0), PG);
		_exit(bad || f1.deregs != 0 ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the parent's registry is untouched */
	san_memhook_invalidate(AT(0), PG);
	ck_assert_int_eq(f1.deregs, 1);
	san_memhook_del(a);
	san_regcache_destroy(a);
}
END_TEST

/* A thread that watched its stack reports it when it exits: its stack's registrations go. */
static struct san_regcache *stack_rc;

static void *stack_thread(void *arg)
{
	uint8_t buf[3 * PG] = { 0 }; /* (the fake never touches it; the compiler cannot know) */
	struct san_regcache_entry *e;

	(void)arg;
	if (!san_memhook_watch_stack() || !san_memhook_watch_stack()) /* (twice: cheap, same) */
		return (void *)1;
	if (san_regcache_lookup(stack_rc, buf, sizeof(buf), 0, &e) ||
	    san_regcache_release(stack_rc, e))
		return (void *)2;
	return NULL;
}

START_TEST(test_thread_stack_reported)
{
	struct fake f1 = { 0 };
	pthread_t t;
	void *ret;

	stack_rc = make_cache(&f1);
	ck_assert_int_eq(san_memhook_add(stack_rc), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, stack_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_ptr_null(ret);
	ck_assert_int_eq(f1.regs, 1);
	ck_assert_int_eq(f1.deregs, 1);	      /* the thread's exit took it out */
	ck_assert(san_memhook_watch_stack()); /* the main thread: nothing to watch, fine */
	san_memhook_del(stack_rc);
	san_regcache_destroy(stack_rc);
}
END_TEST

Suite *make_memhook_suite(void)
{
	Suite *s = suite_create("memhook");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_inactive_without_caches);
	tcase_add_test(tc, test_every_cache_hears);
	tcase_add_test(tc, test_removed_cache_hears_nothing);
	tcase_add_test(tc, test_reentrant_invalidate);
	tcase_add_test(tc, test_fork_child_forgets);
	tcase_add_test(tc, test_thread_stack_reported);
	suite_add_tcase(s, tc);
	return s;
}
