/* tests/unit: the single Check runner — every suite in suites.h, one summary, one exit status. */
#include <stdlib.h>

#include "tests/unit/suites.h"

int main(void)
{
	SRunner *sr = srunner_create(NULL);
	int failed;

#define SAN_UNIT_ADD(name) srunner_add_suite(sr, make_##name##_suite());
	SAN_UNIT_SUITES(SAN_UNIT_ADD)
#undef SAN_UNIT_ADD

	/* CK_NORMAL prints Check's summary line ("100%: Checks: N, Failures: 0, Errors: 0"). */
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
