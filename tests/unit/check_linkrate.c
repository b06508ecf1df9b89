/* tests/unit: core/san_linkrate — an RDMA port's rate from ibv_query_port's width and speed. */
#include <stdint.h>

#include "core/san_linkrate.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

#define G 1000000000ull

START_TEST(test_known)
{
	REQUIRE(san_linkrate_bps(1, 1) == 5 * G / 2);	    /* 1x SDR: what rxe reports */
	REQUIRE(san_linkrate_bps(2, 4) == 40 * G);	    /* 4x QDR */
	REQUIRE(san_linkrate_bps(2, 32) == 103124 * G / 1000); /* 4x EDR: "100G" */
	REQUIRE(san_linkrate_bps(2, 64) == 2125 * G / 10);  /* 4x HDR: "200G" */
	REQUIRE(san_linkrate_bps(2, 128) == 425 * G);	    /* 4x NDR: "400G" */
	REQUIRE(san_linkrate_bps(8, 1) == 30 * G);	    /* 12x SDR */
	REQUIRE(san_linkrate_bps(16, 16) == 28126 * G / 1000); /* 2x FDR */
	REQUIRE(san_linkrate_bps(4, 2) == 40 * G);	    /* 8x DDR */
}
END_TEST

START_TEST(test_unknown)
{
	/* a width or speed this table does not know: 0 ("cannot be told"), never a guess */
	REQUIRE(san_linkrate_bps(0, 1) == 0);
	REQUIRE(san_linkrate_bps(3, 1) == 0);
	REQUIRE(san_linkrate_bps(32, 1) == 0);
	REQUIRE(san_linkrate_bps(255, 1) == 0);
	REQUIRE(san_linkrate_bps(1, 0) == 0);
	REQUIRE(san_linkrate_bps(1, 3) == 0);
	REQUIRE(san_linkrate_bps(1, 256) == 0);
	REQUIRE(san_linkrate_bps(1, UINT32_MAX) == 0);
}
END_TEST

Suite *make_linkrate_suite(void)
{
	Suite *s = suite_create("linkrate");
	TCase *tc = tcase_create("codes");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_known);
	tcase_add_test(tc, test_unknown);
	suite_add_tcase(s, tc);
	return s;
}
