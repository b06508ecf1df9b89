/* tests/unit: ring frames — sealed frames pass, torn, corrupt and stale ones never do. */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/san_frame.h"
#include "proto/san_msg.h"
#include "tests/unit/suites.h"

#define SLOT 4096

static const uint32_t payload_lens[] = { 1, 7, 8, 100, 1000 };

/* Encode DATA with seq and a plen-byte payload (pattern set by salt) into buf, then seal. */
static int make_frame_salted(uint8_t *buf, size_t cap, uint32_t seq, uint32_t plen, uint8_t salt)
{
	static uint8_t pay[2048];
	struct san_msg m = { .type = SAN_T_DATA, .credits = 3, .seq = seq };

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i ^ salt);
	m.u.data.payload = pay;
	m.u.data.payload_len = plen;
	ck_assert_int_eq(san_msg_encode(&m, buf, cap), SAN_HDR_LEN + plen);
	return san_frame_seal(buf, cap);
}

static int make_frame(uint8_t *buf, size_t cap, uint32_t seq, uint32_t plen)
{
	return make_frame_salted(buf, cap, seq, plen, 0x5a);
}

START_TEST(test_seal_check_layout)
{
	uint32_t plen = payload_lens[_i];
	uint8_t buf[SLOT];
	size_t flen = 0, off = (SAN_HDR_LEN + plen + 7) / 8 * 8;
	int n;

	memset(buf, 0xcc, sizeof(buf));
	n = make_frame(buf, sizeof(buf), 41, plen);
	ck_assert_int_eq(n, off + SAN_TRAILER_LEN);
	ck_assert_uint_eq(san_frame_len(SAN_HDR_LEN + plen), n);
	ck_assert_int_eq(n % 8, 0);
	for (size_t i = SAN_HDR_LEN + plen; i < off; i++)
		ck_assert_uint_eq(buf[i], 0); /* pad is zeroed */
	ck_assert_uint_eq(buf[off + 3], 41);  /* trailer seq, big-endian */
	ck_assert_int_eq(san_frame_check(buf, n, 41, SLOT, &flen), 0);
	ck_assert_uint_eq(flen, n);
}
END_TEST

/* Any single flipped bit anywhere in the frame, trailer included, is caught. */
START_TEST(test_any_corruption_detected)
{
	uint32_t plen = payload_lens[_i];
	uint8_t buf[SLOT];
	size_t flen;
	int n = make_frame(buf, sizeof(buf), 1000, plen);

	for (int i = 0; i < n; i++) {
		for (int bit = 0; bit < 8; bit++) {
			int err;

			buf[i] ^= 1u << bit;
			err = san_frame_check(buf, sizeof(buf), 1000, SLOT, &flen);
			ck_assert_msg(err < 0, "flip byte %d bit %d not detected", i, bit);
			buf[i] ^= 1u << bit;
		}
	}
	ck_assert_int_eq(san_frame_check(buf, sizeof(buf), 1000, SLOT, &flen), 0);
}
END_TEST

/* A write that has placed only some bytes (any prefix, in any order we try) is not complete. */
START_TEST(test_torn_write_never_complete)
{
	uint32_t plen = payload_lens[_i];
	uint8_t good[SLOT], torn[SLOT];
	size_t flen;
	int n = make_frame(good, sizeof(good), 7, plen);

	/* The slot held the previous lap's frame (seq 7 - laps) before this write began. */
	ck_assert_int_gt(make_frame_salted(torn, sizeof(torn), 3, plen, 0xa5), 0);
	for (int k = 0; k < n; k++) {
		uint8_t t[SLOT];

		/* Prefix written. */
		memcpy(t, torn, sizeof(t));
		memcpy(t, good, k);
		/* Bytes equal in both laps may make a partial write whole; only judge real tears.
		 */
		if (memcmp(t, good, n))
			ck_assert_int_ne(san_frame_check(t, sizeof(t), 7, SLOT, &flen), 0);
		/* Suffix written (the trailer landed first). */
		memcpy(t, torn, sizeof(t));
		memcpy(t + n - k - 1, good + n - k - 1, k + 1);
		if (memcmp(t, good, n))
			ck_assert_int_ne(san_frame_check(t, sizeof(t), 7, SLOT, &flen), 0);
	}
}
END_TEST

START_TEST(test_seq_mismatch)
{
	uint8_t buf[SLOT];
	size_t flen;
	uint32_t seq;
	int n = make_frame(buf, sizeof(buf), 0xffffffffu, 10);

	ck_assert_int_eq(san_frame_check(buf, n, 0xffffffffu, SLOT, &flen), 0);
	/* A stale frame from the previous lap, or a slot not yet reached. */
	ck_assert_int_eq(san_frame_check(buf, n, 0, SLOT, &flen), -SAN_PROTO_ESEQ);
	ck_assert_int_eq(san_frame_check(buf, n, 0xfffffffeu, SLOT, &flen), -SAN_PROTO_ESEQ);
	/* Header seq right, trailer seq wrong (and vice versa): still ESEQ, before any hashing. */
	seq = htobe32(5);
	memcpy(buf + n - SAN_TRAILER_LEN, &seq, 4);
	ck_assert_int_eq(san_frame_check(buf, n, 0xffffffffu, SLOT, &flen), -SAN_PROTO_ESEQ);
	make_frame(buf, sizeof(buf), 5, 10);
	seq = htobe32(6);
	memcpy(buf + 8, &seq, 4);
	ck_assert_int_eq(san_frame_check(buf, n, 5, SLOT, &flen), -SAN_PROTO_ESEQ);
}
END_TEST

/* A frame checked before: the hash is not computed again, everything that bounds the read is. */
START_TEST(test_known_frame)
{
	uint8_t buf[SLOT];
	size_t flen = 0, want;
	int n = make_frame(buf, sizeof(buf), 9, 40);

	ck_assert_int_eq(san_frame_check(buf, n, 9, SLOT, &want), 0);
	buf[SAN_HDR_LEN + 3] ^= 0x40; /* a payload byte changed: only the hash can tell */
	ck_assert_int_eq(san_frame_check(buf, n, 9, SLOT, &flen), -SAN_PROTO_EHASH);
	ck_assert_int_eq(san_frame_check_known(buf, n, 9, SLOT, &flen), 0);
	ck_assert_uint_eq(flen, want);
	ck_assert_int_eq(san_frame_check_known(buf, n, 8, SLOT, &flen), -SAN_PROTO_ESEQ);
	ck_assert_int_eq(san_frame_check_known(buf, n - 1, 9, SLOT, &flen), -SAN_PROTO_ETRUNC);
	ck_assert_int_eq(san_frame_check_known(buf, n, 9, SAN_HDR_LEN, &flen), -SAN_PROTO_EOVERSIZE);
}
END_TEST

/*
 * Sealed without a hash (SAN_CAP_UNHASHED): the trailer's hash is 0; a reader that said it
 * takes such frames accepts it, one that did not refuses it; a hashed frame is still checked
 * whole by the first, and a frame whose hash was zeroed is one it takes (the producer index,
 * not the hash, orders shm's bytes).
 */
START_TEST(test_unhashed_frame)
{
	uint8_t buf[SLOT], ref[SLOT];
	size_t flen = 0, want = 0, off;
	int n, m;

	m = make_frame(ref, sizeof(ref), 77, 64);
	ck_assert_int_eq(san_frame_check(ref, m, 77, SLOT, &want), 0);
	memcpy(buf, ref, (size_t)m);
	n = san_frame_seal_unhashed(buf, sizeof(buf));
	ck_assert_int_eq(n, m); /* the same layout */
	off = (size_t)n - SAN_TRAILER_LEN;
	ck_assert_int_eq(memcmp(buf, ref, off + 8), 0); /* all but the hash */
	for (size_t i = off + 8; i < (size_t)n; i++)
		ck_assert_uint_eq(buf[i], 0);
	ck_assert_int_eq(san_frame_check(buf, n, 77, SLOT, &flen), -SAN_PROTO_EHASH);
	ck_assert_int_eq(san_frame_check_unhashed_ok(buf, n, 77, SLOT, &flen), 0);
	ck_assert_uint_eq(flen, want);
	/* what bounds the read is still judged */
	ck_assert_int_eq(san_frame_check_unhashed_ok(buf, n, 76, SLOT, &flen), -SAN_PROTO_ESEQ);
	ck_assert_int_eq(san_frame_check_unhashed_ok(buf, n - 1, 77, SLOT, &flen),
			 -SAN_PROTO_ETRUNC);
	ck_assert_int_eq(san_frame_check_unhashed_ok(buf, n, 77, SAN_HDR_LEN, &flen),
			 -SAN_PROTO_EOVERSIZE);
	/* a hashed frame is checked whole by the same reader */
	ck_assert_int_eq(san_frame_check_unhashed_ok(ref, m, 77, SLOT, &flen), 0);
	ref[SAN_HDR_LEN + 5] ^= 0x01;
	ck_assert_int_eq(san_frame_check_unhashed_ok(ref, m, 77, SLOT, &flen), -SAN_PROTO_EHASH);
	ck_assert_int_eq(san_frame_seal_unhashed(buf, 8), -ENOSPC);
}
END_TEST

START_TEST(test_frame_bounds)
{
	uint8_t buf[SLOT];
	size_t flen;
	int n = make_frame(buf, sizeof(buf), 9, 100);

	ck_assert_int_eq(san_frame_check(buf, n - 1, 9, SLOT, &flen), -SAN_PROTO_ETRUNC);
	ck_assert_int_eq(san_frame_check(buf, 15, 9, SLOT, &flen), -SAN_PROTO_ETRUNC);
	ck_assert_int_eq(san_frame_check(buf, n, 9, 100, &flen), -SAN_PROTO_EOVERSIZE);
	buf[0] = 0;
	ck_assert_int_eq(san_frame_check(buf, n, 9, SLOT, &flen), -SAN_PROTO_EVERSION);
	ck_assert_int_eq(san_frame_seal(buf, sizeof(buf)), -EINVAL);
	buf[0] = SAN_PROTO_VERSION;
	ck_assert_int_eq(san_frame_seal(buf, n - 1), -ENOSPC);
	ck_assert_int_eq(san_frame_seal(buf, 8), -ENOSPC);
	ck_assert_int_eq(san_frame_seal(buf, n), n);
}
END_TEST

Suite *make_frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("trailer");
	int nlens = sizeof(payload_lens) / sizeof(payload_lens[0]);

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_seal_check_layout, 0, nlens);
	tcase_add_loop_test(tc, test_any_corruption_detected, 0, nlens);
	tcase_add_loop_test(tc, test_torn_write_never_complete, 0, nlens);
	tcase_add_test(tc, test_seq_mismatch);
	tcase_add_test(tc, test_frame_bounds);
	tcase_add_test(tc, test_known_frame);
	tcase_add_test(tc, test_unhashed_frame);
	suite_add_tcase(s, tc);
	return s;
}
