/* core — /etc/sanswitch.conf: the pure parser, the matcher, and the loader (san_conf.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/san_conf.h"
#include "core/san_log.h"
#include "core/san_logfile.h"
#include "core/san_sys.h"

/* ---------------------------------------------------------------- the parser */

#define SAN_CONF_FIELDS_MAX 5 /* a rule's; a sixth is an error */

/* One line split into fields, each NUL-terminated inside text. */
struct conf_line {
	char text[SAN_CONF_LINE_MAX + 1];
	char *field[SAN_CONF_FIELDS_MAX + 1];
	unsigned int nfields; /* up to SAN_CONF_FIELDS_MAX + 1: more are not counted */
};

static int conf_fail(struct san_conf_error *err, unsigned int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int conf_fail(struct san_conf_error *err, unsigned int line, const char *fmt, ...)
{
	va_list ap;

	err->line = line;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool conf_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Split @text (NUL-terminated, comment already cut) at blanks. */
static void conf_split(struct conf_line *l)
{
	char *p = l->text;

	l->nfields = 0;
	for (;;) {
		while (conf_blank(*p))
			p++;
		if (!*p || l->nfields > SAN_CONF_FIELDS_MAX)
			return;
		l->field[l->nfields++] = p;
		while (*p && !conf_blank(*p))
			p++;
		if (*p)
			*p++ = '\0';
	}
}

/* ---- global options */

static const char *const conf_option_names[] = {
	"provider", "inline_max", "spin_us", "log_level", "log_file",
};

/* In the order of the SAN_CONF_HAS_* bits: option i sets bit 1 << i. */
#define CONF_OPTIONS_LIST "provider, inline_max, spin_us, log_level, log_file"

_Static_assert(sizeof(conf_option_names) / sizeof(conf_option_names[0]) == 5 &&
		       SAN_CONF_HAS_LOG_FILE == 1u << 4,
	       "an option needs its name here, its SAN_CONF_HAS_ bit in order, and a case in "
	       "conf_option()");

static int conf_option(struct san_conf *c, const struct conf_line *l, unsigned int opt,
		       unsigned int line, struct san_conf_error *err)
{
	const char *name = conf_option_names[opt];
	const char *v = l->field[1];
	int r = 0;

	if (l->nfields < 2)
		return conf_fail(err, line, "%s: missing its value", name);
	if (l->nfields > 2)
		return conf_fail(err, line, "%s: too many fields (one value expected)", name);
	if (c->has & (1u << opt))
		return conf_fail(err, line, "%s: duplicate option (given on an earlier line)", name);
	c->has |= 1u << opt;
	switch (1u << opt) {
	case SAN_CONF_HAS_PROVIDER:
		if (san_config_parse_provider(v, &c->provider))
			return conf_fail(err, line, "provider '%s' not understood (auto, shm, verbs, none)",
					 v);
		break;
	case SAN_CONF_HAS_INLINE_MAX:
		r = san_config_parse_size(v, SAN_CFG_INLINE_MAX_LIMIT, &c->inline_max);
		if (r)
			return conf_fail(err, line, "inline_max '%s' %s (0..1M bytes, K or M suffix)", v,
					 r == -ERANGE ? "out of range" : "not understood");
		break;
	case SAN_CONF_HAS_SPIN_US:
		r = san_config_parse_uint(v, SAN_CFG_SPIN_US_LIMIT, &c->spin_us);
		if (r)
			return conf_fail(err, line, "spin_us '%s' %s (0..1000000 microseconds)", v,
					 r == -ERANGE ? "out of range" : "not understood");
		break;
	case SAN_CONF_HAS_LOG_LEVEL:
		r = san_log_parse_level(v);
		if (r < 0)
			return conf_fail(err, line, "log_level '%s' not understood (error, warn, info, debug)",
					 v);
		c->log_level = r;
		break;
	case SAN_CONF_HAS_LOG_FILE:
		if (v[0] != '/')
			return conf_fail(err, line, "log_file '%s' is not an absolute path", v);
		/* (shorter than a line, so it fits) */
		snprintf(c->log_file, sizeof(c->log_file), "%s", v);
		break;
	}
	return 0;
}

/* ---- rules */

static int conf_role(const char *s, uint8_t *role)
{
	if (!strcmp(s, "*"))
		*role = SAN_CONF_ANY;
	else if (!strcasecmp(s, "client"))
		*role = SAN_CONF_CLIENT;
	else if (!strcasecmp(s, "server"))
		*role = SAN_CONF_SERVER;
	else
		return -EINVAL;
	return 0;
}

/* "*", an address, or ADDRESS/LEN; IPv4 in the v4-mapped form. */
static int conf_address(char *s, struct san_conf_rule *r, unsigned int line,
			struct san_conf_error *err)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	char *slash = strchr(s, '/');
	uint32_t len = 0, max;
	struct in_addr a4;
	int i;

	if (!strcmp(s, "*")) {
		r->prefix_len = 0;
		return 0;
	}
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, s, &a4) == 1) {
		memcpy(r->addr, v4mapped, sizeof(v4mapped));
		memcpy(r->addr + 12, &a4, 4);
		max = 32;
	} else if (inet_pton(AF_INET6, s, r->addr) == 1) {
		max = 128;
	} else {
		return conf_fail(err, line, "address '%s' is not an IPv4 or IPv6 address (or *)", s);
	}
	if (slash && san_config_parse_uint(slash + 1, max, &len))
		return conf_fail(err, line, "prefix length '/%s' of %s is not 0..%u", slash + 1, s,
				 max);
	if (!slash)
		len = max;
	r->prefix_len = (uint8_t)(len + 128 - max);
	/* bits beyond the prefix: most likely a typo for another network; refused, not masked */
	for (i = r->prefix_len; i < 128; i++)
		if (r->addr[i / 8] & (0x80u >> (i % 8)))
			return conf_fail(err, line, "address %s/%u has bits set beyond its prefix", s,
					 len);
	return 0;
}

static int conf_port_number(const char *s, uint16_t *port, unsigned int line,
			    struct san_conf_error *err)
{
	uint32_t v = 0;
	int r = san_config_parse_uint(s, 65535, &v);

	if (r == -ERANGE)
		return conf_fail(err, line, "port %s is above 65535", s);
	if (r)
		return conf_fail(err, line, "port '%s' not understood (a number, LOW-HIGH, or *)",
				 s);
	if (!v)
		return conf_fail(err, line, "port 0 is not a port (1..65535)");
	*port = (uint16_t)v;
	return 0;
}

/* "*", a port, or LOW-HIGH. */
static int conf_ports(char *s, struct san_conf_rule *r, unsigned int line,
		      struct san_conf_error *err)
{
	char *dash = strchr(s, '-');

	if (!strcmp(s, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (dash)
		*dash = '\0';
	if (conf_port_number(s, &r->port_lo, line, err))
		return -EINVAL;
	if (!dash) {
		r->port_hi = r->port_lo;
		return 0;
	}
	if (conf_port_number(dash + 1, &r->port_hi, line, err))
		return -EINVAL;
	if (r->port_hi < r->port_lo)
		return conf_fail(err, line, "port range %u-%u is reversed", r->port_lo, r->port_hi);
	return 0;
}

/* ACTION ROLE PROGRAM ADDRESS PORTS */
static int conf_rule(struct san_conf *c, struct conf_line *l, enum san_conf_action action,
		     unsigned int line, struct san_conf_error *err)
{
	struct san_conf_rule *r;

	if (l->nfields > SAN_CONF_FIELDS_MAX)
		return conf_fail(err, line, "too many fields (a rule is: action role program "
					    "address port)");
	if (l->nfields < SAN_CONF_FIELDS_MAX)
		return conf_fail(err, line, "%u field%s, a rule has 5 (action role program address "
					    "port; * for any)",
				 l->nfields, l->nfields == 1 ? "" : "s");
	if (c->nrules == SAN_CONF_RULES_MAX)
		return conf_fail(err, line, "more than %u rules", SAN_CONF_RULES_MAX);
	r = &c->rules[c->nrules];
	memset(r, 0, sizeof(*r));
	r->action = (uint8_t)action;
	r->line = line;
	if (conf_role(l->field[1], &r->role))
		return conf_fail(err, line, "role '%s' not understood (client, server or *)",
				 l->field[1]);
	if (strlen(l->field[2]) > SAN_CONF_PROGRAM_MAX)
		return conf_fail(err, line, "program pattern longer than %u characters",
				 SAN_CONF_PROGRAM_MAX);
	strcpy(r->program, l->field[2]);
	if (conf_address(l->field[3], r, line, err) || conf_ports(l->field[4], r, line, err))
		return -EINVAL;
	c->nrules++;
	return 0;
}

/* One line: blank, a comment, an option or a rule. */
static int conf_line(struct san_conf *c, struct conf_line *l, unsigned int line,
		     struct san_conf_error *err)
{
	const char *kw;
	char *hash = strchr(l->text, '#');
	unsigned int i;

	if (hash)
		*hash = '\0';
	conf_split(l);
	if (!l->nfields)
		return 0;
	kw = l->field[0];
	for (i = 0; i < sizeof(conf_option_names) / sizeof(conf_option_names[0]); i++)
		if (!strcasecmp(kw, conf_option_names[i]))
			return conf_option(c, l, i, line, err);
	if (!strcasecmp(kw, "switch"))
		return conf_rule(c, l, SAN_CONF_SWITCH, line, err);
	if (!strcasecmp(kw, "tcp"))
		return conf_rule(c, l, SAN_CONF_TCP, line, err);
	return conf_fail(err, line, "unknown keyword '%s' (an option: " CONF_OPTIONS_LIST
				    "; or a rule's action: switch, tcp)",
			 kw);
}

int san_conf_parse(const char *buf, size_t len, struct san_conf *out, struct san_conf_error *err)
{
	struct conf_line l;
	unsigned int line = 0;
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	if (len > SAN_CONF_FILE_MAX)
		return conf_fail(err, 0, "larger than %u bytes", SAN_CONF_FILE_MAX);
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = (nl ? (size_t)(nl - buf) : len) - pos;

		line++;
		if (n > SAN_CONF_LINE_MAX)
			return conf_fail(err, line, "line longer than %u bytes", SAN_CONF_LINE_MAX);
		if (memchr(buf + pos, '\0', n))
			return conf_fail(err, line, "a NUL byte (not a text file?)");
		memcpy(l.text, buf + pos, n);
		l.text[n] = '\0';
		if (conf_line(out, &l, line, err))
			return -EINVAL;
		pos += n + (nl ? 1 : 0);
	}
	return 0;
}

/* ---------------------------------------------------------------- the matcher */

static bool conf_program_match(const char *pattern, const char *exe, const char *short_name)
{
	return (exe && !fnmatch(pattern, exe, 0)) || (short_name && !fnmatch(pattern, short_name, 0));
}

void san_conf_select_program(struct san_conf *c, const char *exe, const char *short_name)
{
	unsigned int i, n = 0;

	for (i = 0; i < c->nrules; i++)
		if (conf_program_match(c->rules[i].program, exe, short_name))
			c->rules[n++] = c->rules[i];
	while (n && c->rules[n - 1].action == SAN_CONF_SWITCH)
		n--;
	c->nrules = n;
}

static bool conf_prefix_match(const struct san_conf_rule *r, const uint8_t *a)
{
	unsigned int whole = r->prefix_len / 8, bits = r->prefix_len % 8;
	uint8_t mask = (uint8_t)(0xff00u >> bits);

	return !memcmp(r->addr, a, whole) && (!bits || !((r->addr[whole] ^ a[whole]) & mask));
}

enum san_conf_action san_conf_decide(const struct san_conf *c, enum san_conf_role role,
				     const struct san_addr *a)
{
	for (unsigned int i = 0; i < c->nrules; i++) {
		const struct san_conf_rule *r = &c->rules[i];

		if ((r->role == SAN_CONF_ANY || r->role == role) && a->port >= r->port_lo &&
		    a->port <= r->port_hi && conf_prefix_match(r, a->addr))
			return (enum san_conf_action)r->action;
	}
	return SAN_CONF_SWITCH;
}

/* ---------------------------------------------------------------- the loader */

/* The process's file: written once by san_conf_init, read-only afterwards (no lock). */
static struct san_conf conf_proc;

int san_conf_read(const char *path, bool quiet_missing, size_t cap, char **bufp, size_t *len,
		  struct san_conf_error *err)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	long fd, r;

	memset(err, 0, sizeof(*err));
	/* (O_NONBLOCK: a FIFO named by mistake must not hang the program at load) */
	fd = SAN_SYS(SYS_openat, (long)AT_FDCWD, path, (long)(O_RDONLY | O_CLOEXEC | O_NOCTTY |
							       O_NONBLOCK));
	if (fd < 0) {
		if (fd != -ENOENT || !quiet_missing)
			conf_fail(err, 0, "cannot open: %s", strerror((int)-fd));
		return (int)fd;
	}
	r = SAN_SYS(SYS_fstat, fd, &st);
	if (r == 0 && !S_ISREG(st.st_mode))
		r = -EINVAL;
	else if (r == 0 && (uint64_t)st.st_size > cap)
		r = -EFBIG;
	/* (only now: a program without a file allocates nothing) */
	else if (r == 0 && !(buf = malloc(cap ? cap : 1)))
		r = -ENOMEM;
	while (r == 0 && got < cap) {
		long n = SAN_SYS(SYS_read, fd, buf + got, (long)(cap - got));

		if (n == -EINTR)
			continue;
		if (n <= 0) {
			r = n;
			break;
		}
		got += (size_t)n;
	}
	if (r == 0 && got == cap) {
		/* full: one byte more (the file grew since fstat) makes it too large */
		char extra;
		long n = SAN_SYS(SYS_read, fd, &extra, 1L);

		r = n > 0 ? -EFBIG : n;
	}
	san_sys_close((int)fd);
	if (r == -EINVAL)
		conf_fail(err, 0, "not a regular file");
	else if (r == -EFBIG)
		conf_fail(err, 0, "larger than %zu bytes", cap);
	else if (r == -ENOMEM)
		conf_fail(err, 0, "no memory to read it");
	else if (r < 0)
		conf_fail(err, 0, "cannot read: %s", strerror((int)-r));
	if (r < 0) {
		free(buf);
		return (int)r;
	}
	*bufp = buf;
	*len = got;
	return 0;
}

/* The basename of /proc/self/exe in @buf, or NULL. */
static const char *conf_exe_name(char *buf, size_t size)
{
	long n = SAN_SYS(SYS_readlinkat, (long)AT_FDCWD, "/proc/self/exe", buf, (long)size - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

void san_conf_init(struct san_config *base)
{
	/* secure_getenv: a set-user-ID program reads only the system's file */
	const char *path = secure_getenv("SANSWITCH_CONF");
	const char *log_env = getenv("SANSWITCH_LOG");
	const char *file_env = getenv("SANSWITCH_LOG_FILE");
	bool dflt = !path;
	struct san_conf_error err;
	char exe[256];
	size_t len = 0;
	char *buf = NULL;
	int r;

	/* (once per process, from zero: only the unit tests come again; a program without a
	 * file leaves the 12 KiB of rules untouched) */
	if (conf_proc.has || conf_proc.nrules)
		memset(&conf_proc, 0, sizeof(conf_proc));
	if (path && (!*path || !strcmp(path, "none")))
		return;
	if (!path)
		path = SAN_CONF_DEFAULT_PATH;
	r = san_conf_read(path, dflt, SAN_CONF_FILE_MAX, &buf, &len, &err);
	if (!r) {
		r = san_conf_parse(buf, len, &conf_proc, &err);
		free(buf);
		/* what a file that failed half-way parsed is not used (nothing was, without one:
		 * a memset here had every process without a file touch the 12 KiB at load) */
		if (r)
			memset(&conf_proc, 0, sizeof(conf_proc));
	}
	if (r) {
		if (r == -ENOENT && !err.msg[0])
			return; /* no /etc/sanswitch.conf: the defaults, silently */
		if (err.line)
			san_warn("%s:%u: %s; the file is ignored", path, err.line, err.msg);
		else
			san_warn("%s: %s; the file is ignored", path, err.msg);
		return;
	}
	if (conf_proc.has & SAN_CONF_HAS_PROVIDER)
		base->provider = conf_proc.provider;
	if (conf_proc.has & SAN_CONF_HAS_INLINE_MAX)
		base->inline_max = conf_proc.inline_max;
	if (conf_proc.has & SAN_CONF_HAS_SPIN_US)
		base->spin_us = conf_proc.spin_us;
	/* SANSWITCH_LOG, read before (san_log_init), wins */
	if ((conf_proc.has & SAN_CONF_HAS_LOG_LEVEL) && (!log_env || !*log_env))
		__atomic_store_n(&san_log_level, conf_proc.log_level, __ATOMIC_RELAXED);
	/* and so does SANSWITCH_LOG_FILE (nothing was opened yet: the file is opened at a line) */
	if ((conf_proc.has & SAN_CONF_HAS_LOG_FILE) && (!file_env || !*file_env))
		san_logfile_init(conf_proc.log_file);
	if (conf_proc.nrules)
		san_conf_select_program(&conf_proc, conf_exe_name(exe, sizeof(exe)),
					program_invocation_short_name);
	san_debug("%s: %u rule%s for this program", path, conf_proc.nrules,
		  conf_proc.nrules == 1 ? "" : "s");
}

bool san_conf_tcp(enum san_conf_role role, const struct san_addr *a)
{
	return conf_proc.nrules && san_conf_decide(&conf_proc, role, a) == SAN_CONF_TCP;
}

const char *san_conf_log_file(void)
{
	return conf_proc.has & SAN_CONF_HAS_LOG_FILE ? conf_proc.log_file : NULL;
}
