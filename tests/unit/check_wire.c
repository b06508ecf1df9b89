/* tests/unit: wire layouts — sizes, offsets and byte order, as docs/protocol.md draws them. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/san_msg.h"
#include "proto/san_wire.h"
#include "tests/unit/suites.h"

/* The same numbers as the _Static_asserts, restated where a reviewer reads test output. */
static const struct {
	const char *name;
	size_t size, expect;
} san_sizes[] = {
	{ "header", sizeof(struct san_wire_hdr), 16 },
	{ "PROPOSE", sizeof(struct san_wire_propose), 56 },
	{ "ACCEPT", sizeof(struct san_wire_accept), 16 },
	{ "REJECT", sizeof(struct san_wire_reject), 8 },
	{ "SWITCH", sizeof(struct san_wire_switch), 8 },
	{ "MARK", sizeof(struct san_wire_mark), 16 },
	{ "HELLO", sizeof(struct san_wire_hello), 24 },
	{ "DATA first", sizeof(struct san_wire_data_first), 16 },
	{ "SRC_AVAIL", sizeof(struct san_wire_src_avail), 32 },
	{ "READ_DONE", sizeof(struct san_wire_read_done), 16 },
	{ "WRITE_GRANT", sizeof(struct san_wire_write_grant), 40 },
	{ "WRITE_DONE", sizeof(struct san_wire_write_done), 24 },
	{ "ABORT", sizeof(struct san_wire_abort), 8 },
	{ "KEEPALIVE", sizeof(struct san_wire_keepalive), 8 },
	{ "RCV_WINDOW", sizeof(struct san_wire_rcv_window), 16 },
	{ "trailer", sizeof(struct san_wire_trailer), 16 },
};

START_TEST(test_sizes)
{
	ck_assert_msg(san_sizes[_i].size == san_sizes[_i].expect, "%s is %zu bytes, expected %zu",
		      san_sizes[_i].name, san_sizes[_i].size, san_sizes[_i].expect);
}
END_TEST

/* Every field of the header at its documented byte, big-endian. */
START_TEST(test_header_bytes)
{
	/* clang-format off */
	static const uint8_t expect[] = {
		0x01, 0x18, 0x01, 0x00,	/* version, type KEEPALIVE, flags PROBE, rsvd */
		0x12, 0x34, 0x00, 0x00, /* credits 0x1234, rsvd */
		0xde, 0xad, 0xbe, 0xef, /* seq */
		0x00, 0x00, 0x00, 0x08, /* len: the 8-byte body */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* token */
	};
	/* clang-format on */
	struct san_msg m = {
		.type = SAN_T_KEEPALIVE,
		.credits = 0x1234,
		.seq = 0xdeadbeef,
		.u.keepalive = { .probe = true, .token = 0x0102030405060708ull },
	};
	uint8_t buf[64];

	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), sizeof(expect));
	ck_assert_mem_eq(buf, expect, sizeof(expect));
}
END_TEST

START_TEST(test_switch_and_src_avail_bytes)
{
	/* clang-format off */
	static const uint8_t sw[] = {
		0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x08,
		0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, /* offset 0x010203040506 */
	};
	/* clang-format on */
	/* clang-format off */
	static const uint8_t sa_body[] = {
		0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, /* xfer_id 7, rsvd */
		0x00, 0x00, 0x7f, 0xff, 0x00, 0x00, 0x10, 0x00, /* addr */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, /* len 1 MiB */
		0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x2a, /* key */
	};
	/* clang-format on */
	struct san_msg m = { .type = SAN_T_SWITCH, .seq = 2, .u.sw.offset = 0x010203040506ull };
	uint8_t buf[64];

	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), sizeof(sw));
	ck_assert_mem_eq(buf, sw, sizeof(sw));

	m = (struct san_msg){
		.type = SAN_T_SRC_AVAIL,
		.u.src_avail = { 7, 0x00007fff00001000ull, 1u << 20, 0xcafebabe0000002aull },
	};
	ck_assert_int_eq(san_msg_encode(&m, buf, sizeof(buf)), 16 + sizeof(sa_body));
	ck_assert_mem_eq(buf + 16, sa_body, sizeof(sa_body));
}
END_TEST

START_TEST(test_mark_bytes)
{
	/* clang-format off */
	static const uint8_t expect[] = {
		0x01, 0x06, 0x00, 0x00, 'S', 'A', 'N', 'M',
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	};
	/* clang-format on */
	uint8_t buf[SAN_MARK_LEN];

	san_mark_encode(buf, SAN_PROTO_VERSION, 0x8877665544332211ull);
	ck_assert_mem_eq(buf, expect, sizeof(expect));
}
END_TEST

/* Byte 0 is the version and byte 1 the type in every framed message and in the MARK. */
START_TEST(test_type_codes_and_channels)
{
	ck_assert(san_type_on_chan(SAN_T_PROPOSE, SAN_CHAN_SIDE));
	ck_assert(!san_type_on_chan(SAN_T_PROPOSE, SAN_CHAN_SESSION));
	ck_assert(san_type_on_chan(SAN_T_ABORT, SAN_CHAN_SIDE));
	ck_assert(san_type_on_chan(SAN_T_ABORT, SAN_CHAN_SESSION));
	ck_assert(san_type_on_chan(SAN_T_HELLO, SAN_CHAN_SESSION));
	ck_assert(!san_type_on_chan(SAN_T_MARK, SAN_CHAN_SIDE));
	ck_assert(!san_type_on_chan(SAN_T_MARK, SAN_CHAN_SESSION));
	ck_assert(!san_type_on_chan(0x00, SAN_CHAN_SESSION));
	ck_assert(!san_type_on_chan(0xff, SAN_CHAN_SESSION));
	ck_assert_str_eq(san_type_name(SAN_T_WRITE_GRANT), "WRITE_GRANT");
	ck_assert_ptr_null(san_type_name(0x07));
	ck_assert_str_eq(san_reason_str(SAN_R_TIMEOUT), "timeout");
	ck_assert_str_eq(san_reason_str(999), "unknown");
	ck_assert_uint_eq(san_caps_known(0xffffffffu), SAN_CAP_RDMA_READ | SAN_CAP_RDMA_WRITE |
							       SAN_CAP_DIRECT_READ | SAN_CAP_RETRIES |
							       SAN_CAP_RCV_WINDOW | SAN_CAP_UNHASHED |
							       SAN_CAP_MARK_DELIVERED | SAN_CAP_NOPAUSE);
	ck_assert_uint_eq(SAN_CAP_UNHASHED, 0x20u); /* (a wire value: never renumbered) */
	ck_assert_uint_eq(SAN_CAP_NOPAUSE, 0x80u);
	ck_assert(!san_caps_hello_ok(SAN_CAP_RDMA_READ, SAN_CAP_DIRECT_READ));
	/* HELLO may narrow what setup advertised, never widen it; unknown bits do not count. */
	ck_assert(san_caps_hello_ok(SAN_CAP_KNOWN, SAN_CAP_RDMA_WRITE));
	ck_assert(san_caps_hello_ok(SAN_CAP_RDMA_READ, SAN_CAP_RDMA_READ | 0x80000000u));
	ck_assert(!san_caps_hello_ok(SAN_CAP_RDMA_READ, SAN_CAP_RDMA_WRITE));
}
END_TEST

Suite *make_wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("layout");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_sizes, 0, sizeof(san_sizes) / sizeof(san_sizes[0]));
	tcase_add_test(tc, test_header_bytes);
	tcase_add_test(tc, test_switch_and_src_avail_bytes);
	tcase_add_test(tc, test_mark_bytes);
	tcase_add_test(tc, test_type_codes_and_channels);
	suite_add_tcase(s, tc);
	return s;
}
