/* tests/unit: core/san_config — every SANSWITCH_* variable: defaults, good and bad values. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/san_config.h"
#include "core/san_log.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_stderr.h"

/* An environment: NULL-terminated name/value pairs. */
struct env {
	const char *kv[16][2];
};

static const char *env_get(const char *name, void *ctx)
{
	const struct env *e = ctx;
	int i;

	for (i = 0; i < 16 && e->kv[i][0]; i++)
		if (!strcmp(e->kv[i][0], name))
			return e->kv[i][1];
	return NULL;
}

static int saved_level;

/* Field by field: struct padding is not part of a configuration. */
static int cfg_eq(const struct san_config *a, const struct san_config *b)
{
	return a->disable == b->disable && a->bulk == b->bulk && a->inline_max == b->inline_max &&
	       a->spin_us == b->spin_us && a->provider == b->provider && a->stats == b->stats &&
	       a->faults == b->faults && a->direct == b->direct && a->read_ahead == b->read_ahead &&
	       a->verbs_area == b->verbs_area && a->switch_after == b->switch_after &&
	       a->log_rate == b->log_rate;
}

/* Warnings are the subject of one case only; the others keep stderr quiet. */
static void quiet_setup(void)
{
	saved_level = san_log_level;
	san_log_level = SAN_LOG_ERROR;
}

static void quiet_teardown(void)
{
	san_log_level = saved_level;
	san_cfg = san_config_defaults;
}

/* ---- defaults ------------------------------------------------------------ */

START_TEST(test_defaults)
{
	struct env e = { { { NULL, NULL } } };
	struct san_config c;

	memset(&c, 0xa5, sizeof(c));
	ck_assert_int_eq(san_config_load(&c, env_get, &e), 0);
	ck_assert(!c.disable);
	ck_assert_int_eq(c.bulk, SAN_CFG_BULK_AUTO);
	ck_assert_uint_eq(c.inline_max, 4096);
	ck_assert_uint_eq(c.spin_us, 50);
	ck_assert_int_eq(c.provider, SAN_CFG_PROV_AUTO);
	ck_assert_int_eq(c.stats, SAN_CFG_STATS_LIVE);
	ck_assert_uint_eq(c.faults, 0);
	ck_assert_uint_eq(c.nopause, 1); /* no call waits for a switch (protocol.md §16) */
	/* The global holds the defaults before init, too (the unit runner never inits). */
	ck_assert(cfg_eq(&san_cfg, &san_config_defaults));
	ck_assert(!san_fault(SAN_FAULT_REG_FAIL));
}
END_TEST

/* Empty means unset: the default, and no complaint. */
START_TEST(test_empty_is_unset)
{
	struct env e = { { { "SANSWITCH_DISABLE", "" },
			   { "SANSWITCH_BULK", "" },
			   { "SANSWITCH_INLINE_MAX", "" },
			   { "SANSWITCH_SPIN_US", "" },
			   { "SANSWITCH_PROVIDER", "" },
			   { "SANSWITCH_STATS", "" },
			   { "SANSWITCH_FAULT", "" } } };
	struct san_config c;

	ck_assert_int_eq(san_config_load(&c, env_get, &e), 0);
	ck_assert(cfg_eq(&c, &san_config_defaults));
}
END_TEST

/* ---- one variable at a time -------------------------------------------------- */

enum field {
	F_DISABLE,
	F_BULK,
	F_INLINE,
	F_SPIN,
	F_PROVIDER,
	F_STATS,
	F_FAULTS,
	F_DIRECT,
	F_LITE,
	F_OTHER_USERS,
	F_STDIO,
	F_AHEAD,
	F_AREA,
	F_SWITCH_AFTER,
	F_LOG_RATE
};

static const struct {
	const char *var, *value;
	enum field field;
	int bad;	 /* 1: rejected (default kept, one warning) */
	uint32_t expect; /* the field's value after loading */
} cases[] = {
	{ "SANSWITCH_DISABLE", "0", F_DISABLE, 0, 0 },
	{ "SANSWITCH_DISABLE", "yes", F_DISABLE, 1, 0 },
	{ "SANSWITCH_DISABLE", "2", F_DISABLE, 1, 0 },
	{ "SANSWITCH_DISABLE", " 1", F_DISABLE, 1, 0 },
	{ "SANSWITCH_BULK", "auto", F_BULK, 0, SAN_CFG_BULK_AUTO },
	{ "SANSWITCH_BULK", "read", F_BULK, 0, SAN_CFG_BULK_READ },
	{ "SANSWITCH_BULK", "grant", F_BULK, 0, SAN_CFG_BULK_GRANT },
	{ "SANSWITCH_BULK", "inline", F_BULK, 0, SAN_CFG_BULK_INLINE },
	{ "SANSWITCH_BULK", "INLINE", F_BULK, 0, SAN_CFG_BULK_INLINE },
	{ "SANSWITCH_BULK", "copy", F_BULK, 1, SAN_CFG_BULK_AUTO },
	{ "SANSWITCH_BULK", "read ", F_BULK, 1, SAN_CFG_BULK_AUTO },
	{ "SANSWITCH_INLINE_MAX", "0", F_INLINE, 0, 0 },
	{ "SANSWITCH_INLINE_MAX", "1", F_INLINE, 0, 1 },
	{ "SANSWITCH_INLINE_MAX", "8192", F_INLINE, 0, 8192 },
	{ "SANSWITCH_INLINE_MAX", "16K", F_INLINE, 0, 16384 },
	{ "SANSWITCH_INLINE_MAX", "16k", F_INLINE, 0, 16384 },
	{ "SANSWITCH_INLINE_MAX", "1M", F_INLINE, 0, 1048576 },
	{ "SANSWITCH_INLINE_MAX", "1024K", F_INLINE, 0, 1048576 },
	{ "SANSWITCH_INLINE_MAX", "1048576", F_INLINE, 0, 1048576 },
	{ "SANSWITCH_INLINE_MAX", "1048577", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "1025K", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "2M", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "4G", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "99999999999999999999999", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "-1", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "+1", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "K", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "4KB", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "0x100", F_INLINE, 1, 4096 },
	{ "SANSWITCH_INLINE_MAX", "4 K", F_INLINE, 1, 4096 },
	{ "SANSWITCH_DIRECT", "0", F_DIRECT, 0, 0 },
	{ "SANSWITCH_DIRECT", "1", F_DIRECT, 0, 1 },
	{ "SANSWITCH_DIRECT", "2", F_DIRECT, 1, 1 },
	{ "SANSWITCH_DIRECT", "on", F_DIRECT, 1, 1 },
	{ "SANSWITCH_LITE", "0", F_LITE, 0, 0 },
	{ "SANSWITCH_LITE", "1", F_LITE, 0, 1 },
	{ "SANSWITCH_LITE", "2", F_LITE, 1, 1 },
	{ "SANSWITCH_LITE", "no", F_LITE, 1, 1 },
	{ "SANSWITCH_OTHER_USERS", "0", F_OTHER_USERS, 0, 0 },
	{ "SANSWITCH_OTHER_USERS", "1", F_OTHER_USERS, 0, 1 },
	{ "SANSWITCH_OTHER_USERS", "yes", F_OTHER_USERS, 1, 1 },
	{ "SANSWITCH_STDIO", "0", F_STDIO, 0, 0 },
	{ "SANSWITCH_STDIO", "1", F_STDIO, 0, 1 },
	{ "SANSWITCH_STDIO", "2", F_STDIO, 1, 1 },
	{ "SANSWITCH_READ_AHEAD", "0", F_AHEAD, 0, 0 },
	{ "SANSWITCH_READ_AHEAD", "8", F_AHEAD, 0, 8 },
	{ "SANSWITCH_READ_AHEAD", "auto", F_AHEAD, 0, SAN_CFG_READ_AHEAD_AUTO },
	{ "SANSWITCH_READ_AHEAD", "AUTO", F_AHEAD, 0, SAN_CFG_READ_AHEAD_AUTO },
	{ "SANSWITCH_READ_AHEAD", "16", F_AHEAD, 0, 16 },
	{ "SANSWITCH_READ_AHEAD", "17", F_AHEAD, 1, SAN_CFG_READ_AHEAD_AUTO },
	{ "SANSWITCH_READ_AHEAD", "two", F_AHEAD, 1, SAN_CFG_READ_AHEAD_AUTO },
	{ "SANSWITCH_READ_AHEAD", "-1", F_AHEAD, 1, SAN_CFG_READ_AHEAD_AUTO },
	{ "SANSWITCH_VERBS_AREA", "auto", F_AREA, 0, SAN_CFG_VERBS_AREA_AUTO },
	{ "SANSWITCH_VERBS_AREA", "Auto", F_AREA, 0, SAN_CFG_VERBS_AREA_AUTO },
	{ "SANSWITCH_VERBS_AREA", "1", F_AREA, 0, 1 },
	{ "SANSWITCH_VERBS_AREA", "16", F_AREA, 0, 16 },
	{ "SANSWITCH_VERBS_AREA", "0", F_AREA, 1, SAN_CFG_VERBS_AREA_AUTO },
	{ "SANSWITCH_VERBS_AREA", "17", F_AREA, 1, SAN_CFG_VERBS_AREA_AUTO },
	{ "SANSWITCH_VERBS_AREA", "4M", F_AREA, 1, SAN_CFG_VERBS_AREA_AUTO },
	{ "SANSWITCH_SPIN_US", "0", F_SPIN, 0, 0 },
	{ "SANSWITCH_SPIN_US", "250", F_SPIN, 0, 250 },
	{ "SANSWITCH_SPIN_US", "1000000", F_SPIN, 0, 1000000 },
	{ "SANSWITCH_SPIN_US", "1000001", F_SPIN, 1, 50 },
	{ "SANSWITCH_SPIN_US", "-5", F_SPIN, 1, 50 },
	{ "SANSWITCH_SPIN_US", "5us", F_SPIN, 1, 50 },
	{ "SANSWITCH_SPIN_US", "1K", F_SPIN, 1, 50 },
	{ "SANSWITCH_SPIN_US", "18446744073709551617", F_SPIN, 1, 50 },
	{ "SANSWITCH_SWITCH_AFTER", "0", F_SWITCH_AFTER, 0, 0 },
	{ "SANSWITCH_SWITCH_AFTER", "3", F_SWITCH_AFTER, 0, 3 },
	{ "SANSWITCH_SWITCH_AFTER", "1000", F_SWITCH_AFTER, 0, 1000 },
	{ "SANSWITCH_SWITCH_AFTER", "1001", F_SWITCH_AFTER, 1, SAN_CFG_SWITCH_AFTER_DEFAULT },
	{ "SANSWITCH_SWITCH_AFTER", "-1", F_SWITCH_AFTER, 1, SAN_CFG_SWITCH_AFTER_DEFAULT },
	{ "SANSWITCH_SWITCH_AFTER", "never", F_SWITCH_AFTER, 1, SAN_CFG_SWITCH_AFTER_DEFAULT },
	{ "SANSWITCH_LOG_RATE", "0", F_LOG_RATE, 0, 0 },
	{ "SANSWITCH_LOG_RATE", "5", F_LOG_RATE, 0, 5 },
	{ "SANSWITCH_LOG_RATE", "1000000", F_LOG_RATE, 0, 1000000 },
	{ "SANSWITCH_LOG_RATE", "1000001", F_LOG_RATE, 1, SAN_LOG_RATE_DEFAULT },
	{ "SANSWITCH_LOG_RATE", "-3", F_LOG_RATE, 1, SAN_LOG_RATE_DEFAULT },
	{ "SANSWITCH_LOG_RATE", "many", F_LOG_RATE, 1, SAN_LOG_RATE_DEFAULT },
	{ "SANSWITCH_PROVIDER", "auto", F_PROVIDER, 0, SAN_CFG_PROV_AUTO },
	{ "SANSWITCH_PROVIDER", "shm", F_PROVIDER, 0, SAN_CFG_PROV_SHM },
	{ "SANSWITCH_PROVIDER", "verbs", F_PROVIDER, 0, SAN_CFG_PROV_VERBS },
	{ "SANSWITCH_PROVIDER", "Verbs", F_PROVIDER, 0, SAN_CFG_PROV_VERBS },
	{ "SANSWITCH_PROVIDER", "rdma", F_PROVIDER, 1, SAN_CFG_PROV_AUTO },
	{ "SANSWITCH_STATS", "1", F_STATS, 0, SAN_CFG_STATS_PRINT },
	{ "SANSWITCH_STATS", "0", F_STATS, 0, SAN_CFG_STATS_OFF },
	{ "SANSWITCH_STATS", "on", F_STATS, 1, SAN_CFG_STATS_LIVE },
	{ "SANSWITCH_STATS", "log", F_STATS, 0, SAN_CFG_STATS_LOG },
	{ "SANSWITCH_STATS", "LOG", F_STATS, 0, SAN_CFG_STATS_LOG },
	{ "SANSWITCH_STATS", "logs", F_STATS, 1, SAN_CFG_STATS_LIVE },
	{ "SANSWITCH_FAULT", "reg_fail", F_FAULTS, 0, SAN_FAULT_BIT(SAN_FAULT_REG_FAIL) },
	{ "SANSWITCH_FAULT", "reg_fail,alloc_fail", F_FAULTS, 0,
	  SAN_FAULT_BIT(SAN_FAULT_REG_FAIL) | SAN_FAULT_BIT(SAN_FAULT_ALLOC_FAIL) },
	{ "SANSWITCH_FAULT", "CMA_FAIL,side_refuse", F_FAULTS, 0,
	  SAN_FAULT_BIT(SAN_FAULT_CMA_FAIL) | SAN_FAULT_BIT(SAN_FAULT_SIDE_REFUSE) },
	{ "SANSWITCH_FAULT", ",side_drop,,mark_bad,", F_FAULTS, 0,
	  SAN_FAULT_BIT(SAN_FAULT_SIDE_DROP) | SAN_FAULT_BIT(SAN_FAULT_MARK_BAD) },
	{ "SANSWITCH_FAULT", "reg_fail,reg_fail", F_FAULTS, 0, SAN_FAULT_BIT(SAN_FAULT_REG_FAIL) },
	{ "SANSWITCH_FAULT", ",", F_FAULTS, 0, 0 },
	{ "SANSWITCH_FAULT", "reg_fail,nope", F_FAULTS, 1, 0 },
	{ "SANSWITCH_FAULT", "reg", F_FAULTS, 1, 0 },
	{ "SANSWITCH_FAULT", "reg_failx", F_FAULTS, 1, 0 },
	{ "SANSWITCH_FAULT", "reg_fail alloc_fail", F_FAULTS, 1, 0 },
};

static uint32_t field_of(const struct san_config *c, enum field f)
{
	switch (f) {
	case F_DISABLE:
		return c->disable;
	case F_BULK:
		return c->bulk;
	case F_INLINE:
		return c->inline_max;
	case F_SPIN:
		return c->spin_us;
	case F_PROVIDER:
		return c->provider;
	case F_STATS:
		return c->stats;
	case F_FAULTS:
		return c->faults;
	case F_DIRECT:
		return c->direct;
	case F_LITE:
		return c->lite;
	case F_OTHER_USERS:
		return c->other_users;
	case F_STDIO:
		return c->stdio;
	case F_AHEAD:
		return c->read_ahead;
	case F_AREA:
		return c->verbs_area;
	case F_SWITCH_AFTER:
		return c->switch_after;
	case F_LOG_RATE:
		return c->log_rate;
	}
	return ~0u;
}

START_TEST(test_variable)
{
	struct env e = { { { cases[_i].var, cases[_i].value } } };
	struct san_config c, d;
	int bad = san_config_load(&c, env_get, &e);

	ck_assert_msg(bad == cases[_i].bad, "%s=%s: %d rejected, expected %d", cases[_i].var,
		      cases[_i].value, bad, cases[_i].bad);
	ck_assert_msg(field_of(&c, cases[_i].field) == cases[_i].expect, "%s=%s: got %u, want %u",
		      cases[_i].var, cases[_i].value, field_of(&c, cases[_i].field),
		      cases[_i].expect);
	/* Every other field keeps its default. */
	d = c;
	switch (cases[_i].field) {
	case F_DISABLE:
		d.disable = san_config_defaults.disable;
		break;
	case F_BULK:
		d.bulk = san_config_defaults.bulk;
		break;
	case F_INLINE:
		d.inline_max = san_config_defaults.inline_max;
		break;
	case F_SPIN:
		d.spin_us = san_config_defaults.spin_us;
		break;
	case F_PROVIDER:
		d.provider = san_config_defaults.provider;
		break;
	case F_STATS:
		d.stats = san_config_defaults.stats;
		break;
	case F_FAULTS:
		d.faults = san_config_defaults.faults;
		break;
	case F_DIRECT:
		d.direct = san_config_defaults.direct;
		break;
	case F_LITE:
		d.lite = san_config_defaults.lite;
		break;
	case F_OTHER_USERS:
		d.other_users = san_config_defaults.other_users;
		break;
	case F_STDIO:
		d.stdio = san_config_defaults.stdio;
		break;
	case F_AHEAD:
		d.read_ahead = san_config_defaults.read_ahead;
		break;
	case F_AREA:
		d.verbs_area = san_config_defaults.verbs_area;
		break;
	case F_SWITCH_AFTER:
		d.switch_after = san_config_defaults.switch_after;
		break;
	case F_LOG_RATE:
		d.log_rate = san_config_defaults.log_rate;
		break;
	}
	ck_assert(cfg_eq(&d, &san_config_defaults));
}
END_TEST

/* ---- interactions -------------------------------------------------------------- */

/* DISABLE=1 is inert: the rest is not even read, bad or good, and nothing is rejected. */
START_TEST(test_disable_short_cuts)
{
	struct env e = { { { "SANSWITCH_BULK", "bogus" },
			   { "SANSWITCH_DISABLE", "1" },
			   { "SANSWITCH_FAULT", "reg_fail" },
			   { "SANSWITCH_SPIN_US", "x" } } };
	struct san_config c;

	ck_assert_int_eq(san_config_load(&c, env_get, &e), 0);
	ck_assert(c.disable);
	ck_assert_int_eq(c.bulk, SAN_CFG_BULK_AUTO);
	ck_assert_uint_eq(c.faults, 0);
	ck_assert_uint_eq(c.spin_us, SAN_CFG_SPIN_US_DEFAULT);
}
END_TEST

/* Several bad variables: each rejected on its own, the good ones still taken. */
START_TEST(test_mixed)
{
	struct env e = { { { "SANSWITCH_BULK", "grant" },
			   { "SANSWITCH_INLINE_MAX", "9M" },
			   { "SANSWITCH_SPIN_US", "7" },
			   { "SANSWITCH_PROVIDER", "ib" },
			   { "SANSWITCH_FAULT", "alloc_fail" } } };
	struct san_config c;

	ck_assert_int_eq(san_config_load(&c, env_get, &e), 2);
	ck_assert_int_eq(c.bulk, SAN_CFG_BULK_GRANT);
	ck_assert_uint_eq(c.inline_max, SAN_CFG_INLINE_MAX_DEFAULT);
	ck_assert_uint_eq(c.spin_us, 7);
	ck_assert_int_eq(c.provider, SAN_CFG_PROV_AUTO);
	ck_assert_uint_eq(c.faults, SAN_FAULT_BIT(SAN_FAULT_ALLOC_FAIL));
}
END_TEST

/* The parsers report the kind of error and leave the output alone. */
START_TEST(test_parser_errors)
{
	uint32_t v = 77;
	bool b = true;

	ck_assert_int_eq(san_config_parse_size("2M", SAN_CFG_INLINE_MAX_LIMIT, &v), -ERANGE);
	ck_assert_int_eq(san_config_parse_size("2X", SAN_CFG_INLINE_MAX_LIMIT, &v), -EINVAL);
	ck_assert_int_eq(san_config_parse_size("", SAN_CFG_INLINE_MAX_LIMIT, &v), -EINVAL);
	ck_assert_int_eq(san_config_parse_uint("1000001", SAN_CFG_SPIN_US_LIMIT, &v), -ERANGE);
	ck_assert_int_eq(san_config_parse_uint("1e3", SAN_CFG_SPIN_US_LIMIT, &v), -EINVAL);
	ck_assert_int_eq(san_config_parse_uint("", SAN_CFG_SPIN_US_LIMIT, &v), -EINVAL);
	ck_assert_uint_eq(v, 77);
	ck_assert_int_eq(san_config_parse_bool("true", &b), -EINVAL);
	ck_assert(b);
	ck_assert_int_eq(san_config_parse_size("4294967296", UINT32_MAX, &v), -ERANGE);
	ck_assert_int_eq(san_config_parse_size("4194303K", UINT32_MAX, &v), 0);
	ck_assert_uint_eq(v, 4194303u * 1024);
	ck_assert_int_eq(san_config_parse_size("4194304K", UINT32_MAX, &v), -ERANGE);
}
END_TEST

/* Names and parsers agree, and every fault has a distinct name the parser takes. */
START_TEST(test_names_round_trip)
{
	enum san_cfg_bulk b;
	enum san_cfg_provider p;
	uint32_t mask;
	int i, j;

	for (i = SAN_CFG_BULK_AUTO; i <= SAN_CFG_BULK_INLINE; i++) {
		ck_assert_int_eq(san_config_parse_bulk(san_cfg_bulk_name(i), &b), 0);
		ck_assert_int_eq(b, i);
	}
	for (i = SAN_CFG_PROV_AUTO; i <= SAN_CFG_PROV_VERBS; i++) {
		ck_assert_int_eq(san_config_parse_provider(san_cfg_provider_name(i), &p), 0);
		ck_assert_int_eq(p, i);
	}
	for (i = 0; i < SAN_FAULT_NR; i++) {
		ck_assert_str_ne(san_fault_name(i), "?");
		ck_assert_int_eq(san_config_parse_faults(san_fault_name(i), &mask), 0);
		ck_assert_uint_eq(mask, SAN_FAULT_BIT(i));
		for (j = 0; j < i; j++)
			ck_assert_str_ne(san_fault_name(i), san_fault_name(j));
	}
	ck_assert_str_eq(san_fault_name(SAN_FAULT_NR), "?");
	ck_assert_str_eq(san_cfg_bulk_name(99), "?");
}
END_TEST

/* The predicate the engine calls: exactly the configured faults. */
START_TEST(test_fault_predicate)
{
	int f;

	san_cfg.faults = SAN_FAULT_BIT(SAN_FAULT_CMA_FAIL) | SAN_FAULT_BIT(SAN_FAULT_MARK_BAD);
	for (f = 0; f < SAN_FAULT_NR; f++)
		ck_assert_int_eq(san_fault(f), f == SAN_FAULT_CMA_FAIL || f == SAN_FAULT_MARK_BAD);
	san_cfg.faults = 0;
	for (f = 0; f < SAN_FAULT_NR; f++)
		ck_assert(!san_fault(f));
}
END_TEST

/* ---- the warning ----------------------------------------------------------------- */

/* Run san_config_load() on load_env at warning level; returns what it printed. */
static struct env *load_env;
static int load_bad;

static void load_warning(void)
{
	struct san_config c;

	san_log_level = SAN_LOG_WARN;
	load_bad = san_config_load(&c, env_get, load_env);
	san_log_level = SAN_LOG_ERROR;
}

static char *load_capturing(struct env *e, int *bad)
{
	char *out;

	load_env = e;
	out = unit_stderr_of(load_warning);
	*bad = load_bad;
	return out;
}

START_TEST(test_warning_text)
{
	struct env e = { { { "SANSWITCH_BULK", "bogus" } } };
	struct env f = { { { "SANSWITCH_SPIN_US", "2000000" }, { "SANSWITCH_FAULT", "x" } } };
	struct env g = { { { "SANSWITCH_BULK", "read" }, { "SANSWITCH_INLINE_MAX", "64K" } } };
	const char *out;
	int bad;

	out = load_capturing(&e, &bad);
	ck_assert_int_eq(bad, 1);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "warn: SANSWITCH_BULK=bogus not understood"));
	ck_assert_ptr_nonnull(strstr(out, "auto|read|grant|inline"));
	ck_assert_ptr_nonnull(strstr(out, "using auto\n"));

	out = load_capturing(&f, &bad);
	ck_assert_int_eq(bad, 2);
	ck_assert_int_eq(unit_count_lines(out), 2);
	ck_assert_ptr_nonnull(strstr(out, "SANSWITCH_SPIN_US=2000000 out of range"));
	ck_assert_ptr_nonnull(strstr(out, "0..1000000"));
	ck_assert_ptr_nonnull(strstr(out, "using 50\n"));
	ck_assert_ptr_nonnull(strstr(out, "SANSWITCH_FAULT=x not understood"));
	ck_assert_ptr_nonnull(strstr(out, "reg_fail,alloc_fail,cma_fail,side_refuse"));

	out = load_capturing(&g, &bad);
	ck_assert_int_eq(bad, 0);
	ck_assert_str_eq(out, "");
}
END_TEST

Suite *make_config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_checked_fixture(tc, quiet_setup, quiet_teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_empty_is_unset);
	tcase_add_loop_test(tc, test_variable, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_disable_short_cuts);
	tcase_add_test(tc, test_mixed);
	tcase_add_test(tc, test_parser_errors);
	tcase_add_test(tc, test_names_round_trip);
	tcase_add_test(tc, test_fault_predicate);
	tcase_add_test(tc, test_warning_text);
	suite_add_tcase(s, tc);
	return s;
}
