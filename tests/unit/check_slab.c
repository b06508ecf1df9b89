/* tests/unit: core/san_slab — slots that are distinct, reused, aligned, and shared after fork(). */
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_slab.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

struct obj {
	uint64_t a[37]; /* not a multiple of the alignment */
};

/* Every slot handed out is zeroed, 64-byte aligned, and no two overlap, over several chunks. */
START_TEST(test_distinct)
{
	static struct san_slab sl = { .size = sizeof(struct obj) };
	struct obj *p[4 * SAN_SLAB_SLOTS]; /* four chunks, full */
	unsigned int n = sizeof(p) / sizeof(p[0]);

	for (unsigned int i = 0; i < n; i++) {
		p[i] = san_slab_alloc(&sl);
		REQUIRE(p[i]);
		REQUIRE_EQ((uintptr_t)p[i] % 64, 0);
		for (unsigned int k = 0; k < 37; k++)
			REQUIRE_EQ(p[i]->a[k], 0);
		memset(p[i], 0xa0 + (i & 15), sizeof(*p[i]));
	}
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int j = i + 1; j < n; j++)
			REQUIRE((uintptr_t)p[i] + sizeof(struct obj) <= (uintptr_t)p[j] ||
				(uintptr_t)p[j] + sizeof(struct obj) <= (uintptr_t)p[i]);
	for (unsigned int i = 0; i < n; i++)
		REQUIRE_EQ(p[i]->a[36] & 0xff, 0xa0 + (i & 15)); /* no slot wrote over another */
	REQUIRE_EQ(san_slab_chunks(&sl), 4);
	/* a freed slot is handed out again (zeroed), before any new chunk */
	san_slab_free(&sl, p[70]);
	san_slab_free(&sl, NULL);
	struct obj *q = san_slab_alloc(&sl);
	REQUIRE(q == p[70]);
	REQUIRE_EQ(q->a[0], 0);
	REQUIRE_EQ(san_slab_chunks(&sl), 4);
}
END_TEST

/*
 * After fork() the chunks are shared: a write in the child shows in the parent, a slot the child
 * takes is never the parent's next one, and one the child frees is the parent's to take.
 */
START_TEST(test_fork_shared)
{
	static struct san_slab sl = { .size = sizeof(struct obj) };
	struct obj *mine = san_slab_alloc(&sl), *c1, *p1;
	int pipefd[2], st;
	pid_t pid;

	REQUIRE(mine);
	REQUIRE(pipe(pipefd) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct obj *c = san_slab_alloc(&sl), *gone = san_slab_alloc(&sl);

		mine->a[0] = 42;
		c->a[1] = 7;
		san_slab_free(&sl, gone); /* the parent may take it now */
		_exit(write(pipefd[1], &c, sizeof(c)) == sizeof(c) ? 0 : 1);
	}
	REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	REQUIRE(read(pipefd[0], &c1, sizeof(c1)) == sizeof(c1));
	REQUIRE_EQ(mine->a[0], 42); /* the child wrote into the slot both hold */
	REQUIRE_EQ(c1->a[1], 7);    /* and into one it took */
	p1 = san_slab_alloc(&sl);
	REQUIRE(p1 && p1 != c1 && p1 != mine);
	REQUIRE_EQ((uintptr_t)p1, (uintptr_t)c1 + ((uintptr_t)c1 - (uintptr_t)mine)); /* the freed one */
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

Suite *make_slab_suite(void)
{
	Suite *s = suite_create("slab");
	TCase *tc = tcase_create("slab");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_distinct);
	tcase_add_test(tc, test_fork_shared);
	suite_add_tcase(s, tc);
	return s;
}
