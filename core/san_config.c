/* core — policy: the SANSWITCH_* environment, read once at load, and the fault-injection switch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/san_conf.h"
#include "core/san_config.h"
#include "core/san_log.h"

const struct san_config san_config_defaults = {
	.disable = false,
	.bulk = SAN_CFG_BULK_AUTO,
	.inline_max = SAN_CFG_INLINE_MAX_DEFAULT,
	.spin_us = SAN_CFG_SPIN_US_DEFAULT,
	.provider = SAN_CFG_PROV_AUTO,
	.stats = SAN_CFG_STATS_LIVE,
	.faults = 0,
	.direct = 1,
	.lite = 1,
	.other_users = 1,
	.nopause = 1,
	.stdio = 1,
	.read_ahead = SAN_CFG_READ_AHEAD_AUTO,
	.verbs_area = SAN_CFG_VERBS_AREA_AUTO,
	.switch_after = SAN_CFG_SWITCH_AFTER_DEFAULT,
	.log_rate = SAN_LOG_RATE_DEFAULT,
};

/* Statically the defaults: code that runs before init (or in the unit runner) sees them. */
struct san_config san_cfg = {
	.disable = false,
	.bulk = SAN_CFG_BULK_AUTO,
	.inline_max = SAN_CFG_INLINE_MAX_DEFAULT,
	.spin_us = SAN_CFG_SPIN_US_DEFAULT,
	.provider = SAN_CFG_PROV_AUTO,
	.stats = SAN_CFG_STATS_LIVE,
	.faults = 0,
	.direct = 1,
	.lite = 1,
	.other_users = 1,
	.nopause = 1,
	.stdio = 1,
	.read_ahead = SAN_CFG_READ_AHEAD_AUTO,
	.verbs_area = SAN_CFG_VERBS_AREA_AUTO,
	.switch_after = SAN_CFG_SWITCH_AFTER_DEFAULT,
	.log_rate = SAN_LOG_RATE_DEFAULT,
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const san_bulk_names[] = {
	[SAN_CFG_BULK_AUTO] = "auto",
	[SAN_CFG_BULK_READ] = "read",
	[SAN_CFG_BULK_GRANT] = "grant",
	[SAN_CFG_BULK_INLINE] = "inline",
};

static const char *const san_provider_names[] = {
	[SAN_CFG_PROV_AUTO] = "auto",
	[SAN_CFG_PROV_SHM] = "shm",
	[SAN_CFG_PROV_VERBS] = "verbs",
	[SAN_CFG_PROV_NONE] = "none",
};

/* clang-format off */
static const char *const san_fault_names[SAN_FAULT_NR] = {
	[SAN_FAULT_REG_FAIL] = "reg_fail",
	[SAN_FAULT_ALLOC_FAIL] = "alloc_fail",
	[SAN_FAULT_CMA_FAIL] = "cma_fail",
	[SAN_FAULT_SIDE_REFUSE] = "side_refuse",
	[SAN_FAULT_SIDE_DROP] = "side_drop",
	[SAN_FAULT_MARK_BAD] = "mark_bad",
	[SAN_FAULT_SRC_LATE] = "src_late",
	[SAN_FAULT_RING_GARBAGE] = "ring_garbage",
	[SAN_FAULT_COUNTS_BUSY] = "counts_busy",
	[SAN_FAULT_BELL_LATE] = "bell_late",
	[SAN_FAULT_FORK_DIE_LOCKED] = "fork_die_locked",
	[SAN_FAULT_FORK_NOMEM] = "fork_nomem",
	[SAN_FAULT_BELL_STUCK] = "bell_stuck",
	[SAN_FAULT_SWITCH_LATE] = "switch_late",
	[SAN_FAULT_ACCEPT_LATE] = "accept_late",
};
/* clang-format on */

/* The accepted values, as the warnings print them. */
#define SAN_FAULT_LIST \
	"reg_fail,alloc_fail,cma_fail,side_refuse,side_drop,mark_bad,src_late,ring_garbage," \
	"counts_busy,bell_late,fork_die_locked,fork_nomem,bell_stuck," \
	"switch_late,accept_late"

_Static_assert(SAN_FAULT_NR == 15, "a new fault needs its name in san_fault_names[] and "
				  "SAN_FAULT_LIST, and a line in man/libsanswitch.7");
_Static_assert(SAN_FAULT_NR <= 32, "faults are a 32-bit mask");

const char *san_cfg_bulk_name(enum san_cfg_bulk b)
{
	return (unsigned int)b < ARRAY_SIZE(san_bulk_names) ? san_bulk_names[b] : "?";
}

const char *san_cfg_provider_name(enum san_cfg_provider p)
{
	return (unsigned int)p < ARRAY_SIZE(san_provider_names) ? san_provider_names[p] : "?";
}

const char *san_fault_name(enum san_fault f)
{
	return (unsigned int)f < SAN_FAULT_NR ? san_fault_names[f] : "?";
}

/* Index of @s in @names (case-insensitive), or -EINVAL. */
static int san_config_keyword(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcasecmp(s, names[i]))
			return (int)i;
	return -EINVAL;
}

/* ---------------------------------------------------------------- the parsers */

int san_config_parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "0"))
		*out = false;
	else if (!strcmp(s, "1"))
		*out = true;
	else
		return -EINVAL;
	return 0;
}

int san_config_parse_bulk(const char *s, enum san_cfg_bulk *out)
{
	int i = san_config_keyword(s, san_bulk_names, ARRAY_SIZE(san_bulk_names));

	if (i < 0)
		return i;
	*out = (enum san_cfg_bulk)i;
	return 0;
}

int san_config_parse_provider(const char *s, enum san_cfg_provider *out)
{
	int i = san_config_keyword(s, san_provider_names, ARRAY_SIZE(san_provider_names));

	if (i < 0)
		return i;
	*out = (enum san_cfg_provider)i;
	return 0;
}

int san_config_parse_stats(const char *s, enum san_cfg_stats *out)
{
	bool on;
	int err;

	if (!strcasecmp(s, "log")) {
		*out = SAN_CFG_STATS_LOG;
		return 0;
	}
	err = san_config_parse_bool(s, &on);
	if (err)
		return err;
	*out = on ? SAN_CFG_STATS_PRINT : SAN_CFG_STATS_OFF;
	return 0;
}

/*
 * Decimal digits only: strtoull() alone would also take leading blanks, a sign (wrapping "-1"
 * to 2^64 - 1) and an empty string as 0. -EINVAL if @s does not start with a digit; -ERANGE if
 * the number does not fit 64 bits; either way *end is the first character after the digits.
 */
static int san_config_digits(const char *s, uint64_t *v, const char **end)
{
	uint64_t n = 0;
	bool big = false;

	*end = s;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (UINT64_MAX - 9) / 10)
			big = true; /* keep scanning: "99999999999999999999x" is -EINVAL */
		else
			n = n * 10 + (uint64_t)(*s - '0');
	}
	*end = s;
	if (big)
		return -ERANGE;
	*v = n;
	return 0;
}

int san_config_parse_uint(const char *s, uint32_t limit, uint32_t *out)
{
	const char *end;
	uint64_t v = 0;
	int err = san_config_digits(s, &v, &end);

	if (err == -EINVAL || *end)
		return -EINVAL;
	if (err || v > limit)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

/* Bytes: digits with an optional K or M suffix (binary: 4K = 4096), case-insensitive. */
int san_config_parse_size(const char *s, uint32_t limit, uint32_t *out)
{
	const char *end;
	uint64_t v = 0, mult = 1;
	int err = san_config_digits(s, &v, &end);

	if (err == -EINVAL)
		return err;
	if (*end == 'k' || *end == 'K')
		mult = 1024;
	else if (*end == 'm' || *end == 'M')
		mult = 1024 * 1024;
	else if (*end)
		return -EINVAL;
	if (mult != 1 && end[1])
		return -EINVAL;
	if (err || v > limit / mult)
		return -ERANGE;
	*out = (uint32_t)(v * mult);
	return 0;
}

/* A comma list of fault names; empty items are ignored, so "" and "," mean none. */
int san_config_parse_faults(const char *s, uint32_t *out)
{
	uint32_t mask = 0;

	while (*s) {
		size_t len = strcspn(s, ",");
		int f;

		for (f = 0; len && f < SAN_FAULT_NR; f++)
			if (strlen(san_fault_names[f]) == len &&
			    !strncasecmp(s, san_fault_names[f], len))
				break;
		if (len && f == SAN_FAULT_NR)
			return -EINVAL;
		if (len)
			mask |= SAN_FAULT_BIT(f);
		s += len;
		if (*s == ',')
			s++;
	}
	*out = mask;
	return 0;
}

/* ---------------------------------------------------------------- loading */

static const char *san_config_env(const char *name, void *ctx)
{
	return getenv(name);
}

/* A variable's value, or NULL when it is unset or empty (both mean "the default"). */
static const char *san_config_get(san_config_getenv_fn get, void *ctx, const char *name)
{
	const char *s = get(name, ctx);

	return s && *s ? s : NULL;
}

/* One warning per rejected variable, in a single shape: name=value, why, accepted, default. */
static void san_config_reject(int err, const char *name, const char *value, const char *accepted,
			      const char *dflt)
{
	san_warn("%s=%s %s (accepted: %s), using %s", name, value,
		 err == -ERANGE ? "out of range" : "not understood", accepted, dflt);
}

int san_config_load(struct san_config *cfg, san_config_getenv_fn get, void *ctx)
{
	return san_config_load_over(cfg, &san_config_defaults, get, ctx);
}

int san_config_load_over(struct san_config *cfg, const struct san_config *base,
			 san_config_getenv_fn get, void *ctx)
{
	char dflt[32];
	const char *s;
	int bad = 0;
	int err;

	*cfg = *base;

	if ((s = san_config_get(get, ctx, "SANSWITCH_DISABLE"))) {
		err = san_config_parse_bool(s, &cfg->disable);
		if (err) {
			san_config_reject(err, "SANSWITCH_DISABLE", s, "0|1", "0");
			bad++;
		} else if (cfg->disable) {
			/* Inert: the rest would have no effect, and nothing may be printed. */
			return 0;
		}
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_BULK")) &&
	    (err = san_config_parse_bulk(s, &cfg->bulk))) {
		san_config_reject(err, "SANSWITCH_BULK", s, "auto|read|grant|inline", "auto");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_INLINE_MAX")) &&
	    (err = san_config_parse_size(s, SAN_CFG_INLINE_MAX_LIMIT, &cfg->inline_max))) {
		snprintf(dflt, sizeof(dflt), "%u", base->inline_max);
		san_config_reject(err, "SANSWITCH_INLINE_MAX", s,
				  "0..1M bytes, optional K or M suffix", dflt);
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_SPIN_US")) &&
	    (err = san_config_parse_uint(s, SAN_CFG_SPIN_US_LIMIT, &cfg->spin_us))) {
		snprintf(dflt, sizeof(dflt), "%u", base->spin_us);
		san_config_reject(err, "SANSWITCH_SPIN_US", s, "0..1000000 microseconds", dflt);
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_SWITCH_AFTER")) &&
	    (err = san_config_parse_uint(s, SAN_CFG_SWITCH_AFTER_LIMIT, &cfg->switch_after))) {
		snprintf(dflt, sizeof(dflt), "%u", SAN_CFG_SWITCH_AFTER_DEFAULT);
		san_config_reject(err, "SANSWITCH_SWITCH_AFTER", s, "0..1000 exchanges", dflt);
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_LOG_RATE")) &&
	    (err = san_config_parse_uint(s, SAN_LOG_RATE_LIMIT, &cfg->log_rate))) {
		snprintf(dflt, sizeof(dflt), "%u", base->log_rate);
		san_config_reject(err, "SANSWITCH_LOG_RATE", s,
				  "0..1000000 lines a second, 0: no limit", dflt);
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_DIRECT")) &&
	    (err = san_config_parse_uint(s, 1, &cfg->direct))) {
		san_config_reject(err, "SANSWITCH_DIRECT", s, "0|1", "1");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_LITE")) &&
	    (err = san_config_parse_uint(s, 1, &cfg->lite))) {
		san_config_reject(err, "SANSWITCH_LITE", s, "0|1", "1");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_OTHER_USERS")) &&
	    (err = san_config_parse_uint(s, 1, &cfg->other_users))) {
		san_config_reject(err, "SANSWITCH_OTHER_USERS", s, "0|1", "1");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_NOPAUSE")) &&
	    (err = san_config_parse_uint(s, 2, &cfg->nopause))) {
		san_config_reject(err, "SANSWITCH_NOPAUSE", s, "0|1|2", "1");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_STDIO")) &&
	    (err = san_config_parse_uint(s, 1, &cfg->stdio))) {
		san_config_reject(err, "SANSWITCH_STDIO", s, "0|1", "1");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_READ_AHEAD")) && strcasecmp(s, "auto") &&
	    (err = san_config_parse_uint(s, SAN_CFG_READ_AHEAD_MAX, &cfg->read_ahead))) {
		san_config_reject(err, "SANSWITCH_READ_AHEAD", s, "auto|0..16", "auto");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_VERBS_AREA"))) {
		if (!strcasecmp(s, "auto")) {
			cfg->verbs_area = SAN_CFG_VERBS_AREA_AUTO;
		} else if ((err = san_config_parse_uint(s, SAN_CFG_VERBS_AREA_MAX, &cfg->verbs_area)) ||
			   !cfg->verbs_area) {
			cfg->verbs_area = SAN_CFG_VERBS_AREA_AUTO;
			san_config_reject(err ? err : -ERANGE, "SANSWITCH_VERBS_AREA", s,
					  "auto|1..16 (MiB)", "auto");
			bad++;
		}
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_PROVIDER")) &&
	    (err = san_config_parse_provider(s, &cfg->provider))) {
		san_config_reject(err, "SANSWITCH_PROVIDER", s, "auto|shm|verbs|none",
				  san_cfg_provider_name(base->provider));
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_STATS")) &&
	    (err = san_config_parse_stats(s, &cfg->stats))) {
		san_config_reject(err, "SANSWITCH_STATS", s, "0|1|log",
				  "the default (live counters, no exit line)");
		bad++;
	}
	if ((s = san_config_get(get, ctx, "SANSWITCH_FAULT")) &&
	    (err = san_config_parse_faults(s, &cfg->faults))) {
		san_config_reject(err, "SANSWITCH_FAULT", s, "a comma list of " SAN_FAULT_LIST,
				  "no faults");
		bad++;
	}
	return bad;
}

void san_config_init(void)
{
	const char *s = getenv("SANSWITCH_DISABLE");
	bool off = false;
	char ahead[16], area[16];
	struct san_config base = san_config_defaults;

	/*
	 * Disabled means inert and silent: decided before SANSWITCH_LOG is even read, so that not
	 * a bad SANSWITCH_LOG nor any later warning or debug line can print.
	 */
	if (s && !san_config_parse_bool(s, &off) && off) {
		__atomic_store_n(&san_log_level, SAN_LOG_ERROR - 1, __ATOMIC_RELAXED);
		san_cfg = san_config_defaults;
		san_cfg.disable = true;
		san_cfg.stats = SAN_CFG_STATS_OFF;
		return;
	}
	san_log_init();
	/* the file's options first: the environment overrides them */
	san_conf_init(&base);
	san_config_load_over(&san_cfg, &base, san_config_env, NULL);
	__atomic_store_n(&san_log_rate, san_cfg.log_rate, __ATOMIC_RELAXED);
	if (san_cfg.faults) {
		char list[128] = "";
		int f;

		for (f = 0; f < SAN_FAULT_NR; f++)
			if (san_cfg.faults & SAN_FAULT_BIT(f)) {
				if (*list)
					strncat(list, ",", sizeof(list) - strlen(list) - 1);
				strncat(list, san_fault_names[f], sizeof(list) - strlen(list) - 1);
			}
		/* A warning, not info: a forgotten test switch must not go unnoticed. */
		san_warn("SANSWITCH_FAULT: injecting %s (a testing switch)", list);
	}
	if (!san_log_enabled(SAN_LOG_DEBUG))
		return; /* (every process runs this: no formatting for a line nobody reads) */
	snprintf(ahead, sizeof(ahead), "%u", san_cfg.read_ahead);
	snprintf(area, sizeof(area), "%u", san_cfg.verbs_area);
	san_debug("config: bulk=%s inline_max=%u spin_us=%u direct=%u read_ahead=%s verbs_area=%s "
		  "switch_after=%u provider=%s stats=%s",
		  san_cfg_bulk_name(san_cfg.bulk), san_cfg.inline_max, san_cfg.spin_us, san_cfg.direct,
		  san_cfg.read_ahead == SAN_CFG_READ_AHEAD_AUTO ? "auto" : ahead,
		  san_cfg.verbs_area == SAN_CFG_VERBS_AREA_AUTO ? "auto" : area, san_cfg.switch_after,
		  san_cfg_provider_name(san_cfg.provider),
		  san_cfg.stats == SAN_CFG_STATS_OFF	 ? "off"
		  : san_cfg.stats == SAN_CFG_STATS_PRINT ? "live+line"
		  : san_cfg.stats == SAN_CFG_STATS_LOG	 ? "live+line(log)"
							 : "live");
}
