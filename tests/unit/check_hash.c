/* tests/unit: XXH64 against reference vectors. */
#include <stdint.h>
#include <string.h>

#include "proto/san_hash.h"
#include "tests/unit/suites.h"

/*
 * Input: byte i = (i * 7 + 3) mod 256. Expected values were computed with the reference
 * implementation (Debian libxxhash0 0.8.1, XXH64()), covering every code path: empty, the
 * 1-byte, 4-byte and 8-byte tails, exactly one and several 32-byte stripes, and a seed.
 */
#define SEED2 0x9E3779B97F4A7C15ull

static const struct {
	size_t len;
	uint64_t seed, hash;
	/* clang-format off */
} vectors[] = {
	{ 0, 0, 0xef46db3751d8e999ull },     { 0, SEED2, 0xc4349fc93c010000ull },
	{ 1, 0, 0x1f25c8d0bc1f4bb6ull },     { 1, SEED2, 0x79826bcd749d267aull },
	{ 3, 0, 0x31d2363f52e564c9ull },     { 3, SEED2, 0x78efd77575e26575ull },
	{ 4, 0, 0x9bb64b7d66ee9fdaull },     { 4, SEED2, 0x6f0a6c97d68bf353ull },
	{ 7, 0, 0x9a7b149959ce60d8ull },     { 7, SEED2, 0xd97ede93c9d66a0dull },
	{ 8, 0, 0xdab99d95c6f90092ull },     { 8, SEED2, 0xa2f1e28437a78a1bull },
	{ 9, 0, 0x170bb6bf975b4c02ull },     { 9, SEED2, 0x9c9a3cd83532d84full },
	{ 15, 0, 0x1b47cb8243cc8e32ull },    { 15, SEED2, 0xe2ec50a544faec61ull },
	{ 16, 0, 0x434850232b787be2ull },    { 16, SEED2, 0x93351859a7286376ull },
	{ 31, 0, 0xa2aa5f33cc4a6119ull },    { 31, SEED2, 0x755437271d1d0a84ull },
	{ 32, 0, 0x23c3c17ef790fd97ull },    { 32, SEED2, 0xbf624b932c090428ull },
	{ 33, 0, 0x50a7cfc7ba588784ull },    { 33, SEED2, 0x7aceaf1e9d34ea35ull },
	{ 63, 0, 0x5e3e54b431c7493cull },    { 63, SEED2, 0x2c8ddce5c85d0d9dull },
	{ 64, 0, 0x0eb64b3ef6eeb01full },    { 64, SEED2, 0x4af341f14e3a6fc9ull },
	{ 100, 0, 0xa61f8d4c170fe531ull },   { 100, SEED2, 0xf6d8f65c625abb4full },
	{ 255, 0, 0x39ae55a29989206full },   { 255, SEED2, 0x8310ff6a20cadfadull },
	{ 300, 0, 0x240004dbee0ba6dcull },   { 300, SEED2, 0x4724ccb36f2aee62ull },
};
/* clang-format on */

static uint8_t input[300];

static void fill_input(void)
{
	for (size_t i = 0; i < sizeof(input); i++)
		input[i] = (uint8_t)(i * 7 + 3);
}

START_TEST(test_vectors)
{
	uint64_t h;

	fill_input();
	h = san_xxh64(input, vectors[_i].len, vectors[_i].seed);
	ck_assert_msg(h == vectors[_i].hash, "len %zu seed %llx: %016llx, expected %016llx",
		      vectors[_i].len, (unsigned long long)vectors[_i].seed, (unsigned long long)h,
		      (unsigned long long)vectors[_i].hash);
}
END_TEST

START_TEST(test_known_strings)
{
	/* The two vectors published with xxHash itself. */
	ck_assert(san_xxh64("", 0, 0) == 0xef46db3751d8e999ull);
	ck_assert(san_xxh64("abc", 3, 0) == 0x44bc2cf5ad770999ull);
}
END_TEST

/* Lanes are read byte by byte: an unaligned copy hashes the same. */
START_TEST(test_alignment_independent)
{
	uint8_t shifted[sizeof(input) + 8];

	fill_input();
	for (int off = 1; off < 8; off++) {
		memcpy(shifted + off, input, sizeof(input));
		ck_assert(san_xxh64(shifted + off, 300, 0) == 0x240004dbee0ba6dcull);
	}
}
END_TEST

Suite *make_hash_suite(void)
{
	Suite *s = suite_create("hash");
	TCase *tc = tcase_create("xxh64");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_loop_test(tc, test_vectors, 0, sizeof(vectors) / sizeof(vectors[0]));
	tcase_add_test(tc, test_known_strings);
	tcase_add_test(tc, test_alignment_independent);
	suite_add_tcase(s, tc);
	return s;
}
