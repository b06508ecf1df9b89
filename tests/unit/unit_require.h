/* tests/unit: assertions for hot loops. */
#ifndef UNIT_REQUIRE_H
#define UNIT_REQUIRE_H

#include <check.h>

/*
 * Check's ck_assert_* report every check that passes to the runner (a write() per check in
 * fork mode): far too slow in loops over 10^5 steps. These call into Check only on failure.
 */
#define REQUIRE(x)                                                 \
	do {                                                       \
		if (!(x))                                          \
			ck_abort_msg("Assertion '%s' failed", #x); \
	} while (0)
#define REQUIRE_EQ(a, b)                                                                           \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (a_ != b_)                                                                      \
			ck_abort_msg("Assertion '%s == %s' failed: %lld != %lld", #a, #b, a_, b_); \
	} while (0)

#endif /* UNIT_REQUIRE_H */
