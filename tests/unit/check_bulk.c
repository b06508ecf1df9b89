/* tests/unit: the transfer-mode decision, one row per rule of docs/protocol.md §Bulk. */
#include <errno.h>

#include "proto/san_bulk.h"
#include "proto/san_wire.h"
#include "tests/unit/suites.h"

#define R SAN_CAP_RDMA_READ
#define W SAN_CAP_RDMA_WRITE

static const struct {
	const char *what;
	struct san_bulk_in in;
	int expect;
	/* clang-format off */
} rows[] = {
	/* len, inline_max, zcopy_min, local, peer, policy, can_register, can_alloc */
	{ "tiny inline", { 1, 4096, 65536, R | W, R | W, SAN_BULK_AUTO, true, true }, SAN_XFER_INLINE },
	{ "at inline_max", { 4096, 4096, 65536, R | W, R | W, SAN_BULK_AUTO, true, true },
	  SAN_XFER_INLINE },
	{ "inline needs nothing", { 100, 4096, 65536, 0, 0, SAN_BULK_COPY_ONLY, false, false },
	  SAN_XFER_INLINE },
	{ "just above inline, below zcopy", { 4097, 4096, 65536, R | W, R | W, SAN_BULK_AUTO, true,
					      true },
	  SAN_XFER_COPY },
	{ "large, peer reads", { 1 << 20, 4096, 65536, 0, R, SAN_BULK_AUTO, true, true },
	  SAN_XFER_READ },
	{ "large, read preferred over grant", { 1 << 20, 4096, 65536, W, R, SAN_BULK_AUTO, true,
						true },
	  SAN_XFER_READ },
	{ "large, peer cannot read, we write", { 1 << 20, 4096, 65536, W, 0, SAN_BULK_AUTO, true,
						 true },
	  SAN_XFER_GRANT },
	{ "our READ cap is irrelevant", { 1 << 20, 4096, 65536, R, W, SAN_BULK_AUTO, true, true },
	  SAN_XFER_COPY },
	{ "policy no-read", { 1 << 20, 4096, 65536, W, R, SAN_BULK_NO_READ, true, true },
	  SAN_XFER_GRANT },
	{ "policy no-read, cannot write", { 1 << 20, 4096, 65536, 0, R, SAN_BULK_NO_READ, true,
					    true },
	  SAN_XFER_COPY },
	{ "policy copy-only", { 1 << 20, 4096, 65536, R | W, R | W, SAN_BULK_COPY_ONLY, true, true },
	  SAN_XFER_COPY },
	{ "cannot register: copy", { 1 << 20, 4096, 65536, R | W, R | W, SAN_BULK_AUTO, false,
				     true },
	  SAN_XFER_COPY },
	{ "cannot register nor alloc: ENOBUFS", { 1 << 20, 4096, 65536, R | W, R | W,
						  SAN_BULK_AUTO, false, false },
	  -ENOBUFS },
	{ "small, no temp memory: zero-copy anyway", { 8192, 4096, 65536, 0, R, SAN_BULK_AUTO, true,
						       false },
	  SAN_XFER_READ },
	{ "copy-only, no temp memory: ENOBUFS", { 8192, 4096, 65536, R | W, R | W,
						  SAN_BULK_COPY_ONLY, true, false },
	  -ENOBUFS },
	{ "no caps, no temp memory: ENOBUFS", { 1 << 20, 4096, 65536, 0, 0, SAN_BULK_AUTO, true,
						false },
	  -ENOBUFS },
	{ "zero length", { 0, 4096, 65536, R | W, R | W, SAN_BULK_AUTO, true, true }, -EINVAL },
	{ "inline disabled", { 1, 0, 65536, 0, 0, SAN_BULK_AUTO, false, true }, SAN_XFER_COPY },
	{ "unknown peer bits ignored", { 1 << 20, 4096, 65536, 0, 0xfffffff0u, SAN_BULK_AUTO, true,
					 true },
	  SAN_XFER_COPY },
};
/* clang-format on */

START_TEST(test_choose)
{
	int got = san_bulk_choose(&rows[_i].in);

	ck_assert_msg(got == rows[_i].expect, "%s: got %d, expected %d", rows[_i].what, got,
		      rows[_i].expect);
}
END_TEST

START_TEST(test_split)
{
	uint32_t maxp = san_data_max_payload(4096, true);

	ck_assert_uint_eq(maxp, 4096 - 16 - 16);
	ck_assert_uint_eq(san_data_max_payload(4096, false), 4096 - 16);
	ck_assert_uint_eq(san_data_max_payload(20, true), 0);
	/* The first chunk never takes the whole transfer: a rest of >= 1 byte must remain. */
	ck_assert_uint_eq(san_bulk_first_len(1 << 20, maxp), maxp);
	ck_assert_uint_eq(san_bulk_first_len(maxp + 1, maxp), maxp);
	ck_assert_uint_eq(san_bulk_first_len(maxp, maxp), maxp - 1);
	ck_assert_uint_eq(san_bulk_first_len(2, maxp), 1);
	ck_assert_uint_eq(san_bulk_first_len(1, maxp), 0);
	ck_assert_uint_eq(san_bulk_first_len(1ull << 40, maxp), maxp);
}
END_TEST

Suite *make_bulk_suite(void)
{
	Suite *s = suite_create("bulk");
	TCase *tc = tcase_create("decision");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_choose, 0, sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, test_split);
	suite_add_tcase(s, tc);
	return s;
}
