/* tests/unit: proto error codes — distinct, named, described, mapped to an errno. */
#include <errno.h>
#include <string.h>

#include "proto/san_err.h"
#include "tests/unit/suites.h"

START_TEST(test_codes_distinct_and_named)
{
	for (int e = SAN_PROTO_EBASE; e < SAN_PROTO_EEND; e++) {
		ck_assert(san_is_proto_err(e));
		ck_assert(san_is_proto_err(-e));
		ck_assert_ptr_nonnull(san_proto_errname(-e));
		ck_assert_str_ne(san_proto_strerror(-e), "unknown error");
		for (int f = SAN_PROTO_EBASE; f < e; f++) {
			ck_assert_str_ne(san_proto_errname(e), san_proto_errname(f));
			ck_assert_str_ne(san_proto_strerror(e), san_proto_strerror(f));
		}
	}
	/* Above MAX_ERRNO, so never confused with an errno. */
	ck_assert_int_gt(SAN_PROTO_EBASE, 4095);
}
END_TEST

START_TEST(test_errno_passthrough)
{
	ck_assert(!san_is_proto_err(-EINVAL));
	ck_assert(!san_is_proto_err(0));
	ck_assert(!san_is_proto_err(SAN_PROTO_EEND));
	ck_assert_ptr_null(san_proto_errname(-EINVAL));
	ck_assert_str_eq(san_proto_strerror(-ENOBUFS), strerrordesc_np(ENOBUFS));
	ck_assert_str_eq(san_proto_strerror(0), "success");
	ck_assert_str_eq(san_proto_errname(-SAN_PROTO_ETRUNC), "SAN_PROTO_ETRUNC");
}
END_TEST

START_TEST(test_errno_mapping)
{
	ck_assert_int_eq(san_proto_errno(-SAN_PROTO_ENONCE), ECONNRESET);
	ck_assert_int_eq(san_proto_errno(-SAN_PROTO_EMAGIC), ECONNRESET);
	ck_assert_int_eq(san_proto_errno(-SAN_PROTO_ETRUNC), ECONNRESET);
	ck_assert_int_eq(san_proto_errno(SAN_PROTO_EHASH), ECONNRESET);
	ck_assert_int_eq(san_proto_errno(-ENOBUFS), ENOBUFS);
}
END_TEST

Suite *make_err_suite(void)
{
	Suite *s = suite_create("err");
	TCase *tc = tcase_create("codes");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_codes_distinct_and_named);
	tcase_add_test(tc, test_errno_passthrough);
	tcase_add_test(tc, test_errno_mapping);
	suite_add_tcase(s, tc);
	return s;
}
