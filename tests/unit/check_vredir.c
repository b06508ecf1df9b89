/* tests/unit: core/san_vredir.c — the fork family's table of connections served on a port of
 * their own process (verbs workers and fork children). */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/san_vredir.h"
#include "tests/unit/suites.h"

static struct san_tuple tuple(uint16_t lport, uint16_t pport)
{
	struct san_tuple t = { 0 };

	t.local.addr[10] = t.local.addr[11] = 0xff;
	t.local.addr[12] = 10;
	t.local.addr[15] = 1;
	t.local.port = lport;
	t.peer = t.local;
	t.peer.addr[15] = 2;
	t.peer.port = pport;
	return t;
}

START_TEST(test_put_find_drop)
{
	struct san_tuple a = tuple(8080, 40000), b = tuple(8080, 40001), c = a;

	ck_assert_int_eq(san_vredir_init(), 0);
	ck_assert(san_vredir_ready());
	ck_assert_int_eq(san_vredir_init(), 0); /* (once) */
	ck_assert_int_eq(san_vredir_find(&a), 0);
	ck_assert_int_eq(san_vredir_put(&a, 5001), 0);
	ck_assert_int_eq(san_vredir_put(&b, 5002), 0);
	ck_assert_uint_eq(san_vredir_find(&a), 5001);
	ck_assert_uint_eq(san_vredir_find(&b), 5002);
	c.peer.addr[15] = 3; /* another peer address, same ports: not the same connection */
	ck_assert_uint_eq(san_vredir_find(&c), 0);
	ck_assert_int_eq(san_vredir_put(&a, 5003), 0); /* named again: the newer port */
	ck_assert_uint_eq(san_vredir_find(&a), 5003);
	san_vredir_drop(&a);
	ck_assert_uint_eq(san_vredir_find(&a), 0);
	ck_assert_uint_eq(san_vredir_find(&b), 5002);
	san_vredir_drop(&b);
	ck_assert_uint_eq(san_vredir_find(&b), 0);
}
END_TEST

/* A fork child's entries are seen by its parent while the child lives, and not once it is gone;
 * its slots are taken again (the table would fill with a pre-fork server's dead children). */
START_TEST(test_family)
{
	struct san_tuple a = tuple(8081, 40002);
	int go[2], ready[2], st;
	pid_t pid;
	char ch;

	ck_assert_int_eq(san_vredir_init(), 0);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(ready), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = san_vredir_put(&a, 6001) == 0;

		(void)!write(ready[1], ok ? "1" : "0", 1);
		(void)!read(go[0], &ch, 1);
		_exit(0);
	}
	ck_assert_int_eq(read(ready[0], &ch, 1), 1);
	ck_assert_int_eq(ch, '1');
	ck_assert_uint_eq(san_vredir_find(&a), 6001);
	san_vredir_drop(&a); /* (not ours: the parent cannot drop the child's entry) */
	ck_assert_uint_eq(san_vredir_find(&a), 6001);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_uint_eq(san_vredir_find(&a), 0); /* its process is gone */
	for (int i = 0; i < SAN_VREDIR_MAX; i++) {
		struct san_tuple t = tuple(9000, (uint16_t)(1000 + i));

		ck_assert_int_eq(san_vredir_put(&t, 7000), 0); /* the dead child's slot too */
	}
	{
		struct san_tuple t = tuple(9001, 1);

		ck_assert_int_eq(san_vredir_put(&t, 7000), -ENOSPC);
	}
	for (int i = 0; i < SAN_VREDIR_MAX; i++) {
		struct san_tuple t = tuple(9000, (uint16_t)(1000 + i));

		san_vredir_drop(&t);
	}
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
}
END_TEST

Suite *make_vredir_suite(void)
{
	Suite *s = suite_create("vredir");
	TCase *tc = tcase_create("vredir");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_put_find_drop);
	tcase_add_test(tc, test_family);
	suite_add_tcase(s, tc);
	return s;
}
