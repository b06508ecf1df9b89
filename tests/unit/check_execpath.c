/* tests/unit: core/san_execpath — will an exec find a program to run? */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/san_execpath.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

static char dir[64];

/* dir/bin/prog (executable), dir/bin/data (not), dir/bin/sub (a directory), dir/other/prog2 */
static void make_tree(void)
{
	char p[128];
	int fd;

	strcpy(dir, "/tmp/san_execpath.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(p, sizeof(p), "%s/bin", dir);
	REQUIRE(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/other", dir);
	REQUIRE(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/bin/sub", dir);
	REQUIRE(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/bin/prog", dir);
	REQUIRE((fd = open(p, O_CREAT | O_WRONLY, 0755)) >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/other/prog2", dir);
	REQUIRE((fd = open(p, O_CREAT | O_WRONLY, 0755)) >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/bin/data", dir);
	REQUIRE((fd = open(p, O_CREAT | O_WRONLY, 0644)) >= 0);
	close(fd);
}

static void remove_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (dir[0] && system(cmd) != 0)
		fprintf(stderr, "check_execpath: could not remove %s\n", dir);
}

START_TEST(test_path_given)
{
	char p[128], path[160];

	make_tree();
	snprintf(p, sizeof(p), "%s/bin/prog", dir);
	REQUIRE(san_exec_may_run(p, false, NULL));
	REQUIRE(san_exec_may_run(p, true, "/nonexistent")); /* a '/' in it: no search */
	snprintf(p, sizeof(p), "%s/bin/data", dir);
	REQUIRE(!san_exec_may_run(p, false, NULL)); /* no x bit (root too: one must be set) */
	snprintf(p, sizeof(p), "%s/bin/sub", dir);
	REQUIRE(!san_exec_may_run(p, false, NULL)); /* a directory */
	snprintf(p, sizeof(p), "%s/bin/none", dir);
	REQUIRE(!san_exec_may_run(p, false, NULL));
	REQUIRE(!san_exec_may_run("", false, NULL));
	REQUIRE(!san_exec_may_run(NULL, true, NULL));
	/* no search: a bare name is relative to the current directory, not looked up */
	snprintf(path, sizeof(path), "%s/bin", dir);
	REQUIRE(!san_exec_may_run("prog", false, path));
	remove_tree();
}
END_TEST

START_TEST(test_search)
{
	char path[256];

	make_tree();
	snprintf(path, sizeof(path), "/nonexistent:%s/other:%s/bin", dir, dir);
	REQUIRE(san_exec_may_run("prog", true, path));
	REQUIRE(san_exec_may_run("prog2", true, path));
	REQUIRE(!san_exec_may_run("data", true, path));
	REQUIRE(!san_exec_may_run("sub", true, path));
	REQUIRE(!san_exec_may_run("none", true, path));
	/* an empty entry is the current directory */
	snprintf(path, sizeof(path), "%s/bin", dir);
	REQUIRE(chdir(path) == 0);
	REQUIRE(san_exec_may_run("prog", true, "/nonexistent::/also-not"));
	REQUIRE(san_exec_may_run("prog", true, "/nonexistent:"));
	REQUIRE(!san_exec_may_run("prog", true, "/nonexistent"));
	REQUIRE(chdir("/") == 0);
	/* the default PATH, where sh lives on every system this runs on */
	REQUIRE(san_exec_may_run("sh", true, NULL));
	remove_tree();
}
END_TEST

Suite *make_execpath_suite(void)
{
	Suite *s = suite_create("execpath");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_path_given);
	tcase_add_test(tc, test_search);
	suite_add_tcase(s, tc);
	return s;
}
