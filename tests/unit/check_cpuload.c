/* tests/unit: core/san_cpuload — is every CPU taken (the spin's CPU-pressure test)? */
#include <stdbool.h>

#include "core/san_cpuload.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

START_TEST(test_parse)
{
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 3/228 12345\n") == 3);
	REQUIRE(san_cpuload_parse("12.00 8.10 4.33 17/1024 99") == 17);
	REQUIRE(san_cpuload_parse("0.00 0.00 0.00 0/1 1") == 0);
	/* not that shape: no verdict, never a guess */
	REQUIRE(san_cpuload_parse("") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 ") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 x/228 1") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 3 228") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 -3/228 1") == -1);
	REQUIRE(san_cpuload_parse("0.52 0.58 0.59 99999999999/228 1") == -1);
}
END_TEST

START_TEST(test_fold)
{
	bool prev = false;

	/* one sample over the CPUs is a blip: crowded only from the second in a row */
	REQUIRE(!san_cpuload_fold(3, 2, &prev));
	REQUIRE(san_cpuload_fold(4, 2, &prev));
	REQUIRE(san_cpuload_fold(3, 2, &prev));
	/* exactly one runnable thread per CPU: each has its own, the spin may run */
	REQUIRE(!san_cpuload_fold(2, 2, &prev));
	REQUIRE(!san_cpuload_fold(3, 2, &prev));
	REQUIRE(!san_cpuload_fold(1, 2, &prev));
	/* an unreadable count or CPU number ends it too */
	prev = true;
	REQUIRE(!san_cpuload_fold(-1, 2, &prev));
	REQUIRE(!prev);
	prev = true;
	REQUIRE(!san_cpuload_fold(5, 0, &prev));
	REQUIRE(!san_cpuload_fold(65, 64, &prev));
	REQUIRE(san_cpuload_fold(66, 64, &prev));
}
END_TEST

START_TEST(test_schedstat)
{
	uint64_t w = 7;

	REQUIRE(san_cpuload_parse_wait("219967 4500 12\n", &w) && w == 4500);
	REQUIRE(san_cpuload_parse_wait("1 0 1", &w) && w == 0);
	REQUIRE(!san_cpuload_parse_wait("", &w));
	REQUIRE(!san_cpuload_parse_wait("219967", &w));
	REQUIRE(!san_cpuload_parse_wait("219967 x 1", &w));
	REQUIRE(!san_cpuload_parse_wait("219967 -5 1", &w));
	REQUIRE(!san_cpuload_parse_wait("219967 12x 1", &w));
	REQUIRE(w == 0); /* the malformed lines left it alone */
	/* an eighth of the time waiting for a CPU, or more: this thread is crowded out */
	REQUIRE(san_cpuload_waited(1250000, 10000000));
	REQUIRE(san_cpuload_waited(5000000, 10000000));
	REQUIRE(!san_cpuload_waited(1249999, 10000000));
	REQUIRE(!san_cpuload_waited(0, 10000000));
	REQUIRE(!san_cpuload_waited(5, 0));
}
END_TEST

START_TEST(test_live)
{
	/*
	 * On this host: samples come at most every SAN_CPULOAD_SAMPLE_NS, so two calls at the
	 * same instant give the same verdict (the second is the first's, not a new sample).
	 */
	bool a = san_cpuload_crowded(5 * SAN_CPULOAD_SAMPLE_NS);

	REQUIRE(san_cpuload_crowded(5 * SAN_CPULOAD_SAMPLE_NS + 1) == a);
}
END_TEST

Suite *make_cpuload_suite(void)
{
	Suite *s = suite_create("cpuload");
	TCase *tc = tcase_create("verdict");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_fold);
	tcase_add_test(tc, test_schedstat);
	tcase_add_test(tc, test_live);
	suite_add_tcase(s, tc);
	return s;
}
