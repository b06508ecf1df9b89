/*
 * core — /etc/sanswitch.conf (man/sanswitch.conf.5): global options and per-connection rules
 * (switch or stay on TCP), read once at load.
 *
 * Two layers. The parser is pure: it takes the file's bytes and returns the options and rules,
 * or the first problem with its line number; it reads no file and prints nothing, so every error
 * path has a unit test. The loader (san_conf_init) reads the file with plain system calls, prints
 * at most one warning, keeps the rules that name this program, and answers san_conf_tcp() for
 * each new connection.
 */
#ifndef SAN_CONF_H
#define SAN_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/san_config.h"
#include "proto/san_msg.h"

#define SAN_CONF_DEFAULT_PATH "/etc/sanswitch.conf"
#define SAN_CONF_FILE_MAX (64u * 1024u) /* bytes: a larger file is refused whole */
#define SAN_CONF_LINE_MAX 256u		/* bytes of one line, without its newline */
#define SAN_CONF_RULES_MAX 128u
#define SAN_CONF_PROGRAM_MAX 63u /* characters of a program pattern */

enum san_conf_action {
	SAN_CONF_SWITCH, /* the connection may switch (as without a rule) */
	SAN_CONF_TCP,	 /* it stays on kernel TCP */
};

/* A rule's role, and a connection's (never ANY). */
enum san_conf_role {
	SAN_CONF_ANY,	 /* "*" */
	SAN_CONF_CLIENT, /* the connect() side */
	SAN_CONF_SERVER, /* the accept() side */
};

/* Which global options the file gave (a duplicate is an error). */
enum {
	SAN_CONF_HAS_PROVIDER = 1u << 0,
	SAN_CONF_HAS_INLINE_MAX = 1u << 1,
	SAN_CONF_HAS_SPIN_US = 1u << 2,
	SAN_CONF_HAS_LOG_LEVEL = 1u << 3,
	SAN_CONF_HAS_LOG_FILE = 1u << 4,
};

/*
 * One rule. The address is in the 16-byte form of struct san_addr (an IPv4 prefix a.b.c.d/n is
 * ::ffff:a.b.c.d/96+n), so a v4-mapped IPv6 socket matches IPv4 rules; "*" is prefix 0.
 */
struct san_conf_rule {
	uint8_t action;	    /* enum san_conf_action */
	uint8_t role;	    /* enum san_conf_role */
	uint8_t prefix_len; /* 0..128 bits of addr that must match */
	uint8_t addr[16];
	uint16_t port_lo, port_hi; /* inclusive; "*" is 0..65535 */
	unsigned int line;	   /* in the file, for messages */
	char program[SAN_CONF_PROGRAM_MAX + 1]; /* fnmatch(3) pattern; "*" for any */
};

struct san_conf {
	unsigned int has; /* SAN_CONF_HAS_* */
	enum san_cfg_provider provider;
	uint32_t inline_max;
	uint32_t spin_us;
	int log_level; /* enum san_log_level */
	char log_file[SAN_CONF_LINE_MAX];
	unsigned int nrules;
	struct san_conf_rule rules[SAN_CONF_RULES_MAX];
};

/* The first problem of a file: its line (0: the file as a whole) and what is wrong. */
struct san_conf_error {
	unsigned int line;
	char msg[160];
};

/*
 * Parse @len bytes of a configuration file into @out (cleared first). 0, or -EINVAL with @err
 * naming the first problem; @out then holds nothing usable. No allocation, no I/O.
 */
int san_conf_parse(const char *buf, size_t len, struct san_conf *out, struct san_conf_error *err);

/*
 * Keep only the rules whose program pattern matches @exe (the basename of /proc/self/exe) or
 * @short_name (program_invocation_short_name; either may be NULL), in order; then drop the
 * trailing "switch" rules, which decide nothing the default does not. What is left is all
 * san_conf_decide() needs to look at.
 */
void san_conf_select_program(struct san_conf *c, const char *exe, const char *short_name);

/* The first rule for @role (client or server) that matches @a (address and port), or switch. */
enum san_conf_action san_conf_decide(const struct san_conf *c, enum san_conf_role role,
				     const struct san_addr *a);

/*
 * The loader's reader, for the unit tests: @path whole, into a buffer of its own (*buf, to
 * free(), allocated only once the file is open: @cap bytes, the most it may hold). 0 with *buf
 * and *len; -ENOENT quietly (@err's message empty) when the file is missing and
 * @quiet_missing; any other -errno with @err saying what is wrong (line 0: the whole file).
 */
int san_conf_read(const char *path, bool quiet_missing, size_t cap, char **buf, size_t *len,
		  struct san_conf_error *err);

/*
 * The library's one-time init, after the environment's log level is set and before any socket
 * call: read SANSWITCH_CONF or /etc/sanswitch.conf into the process's rules, and apply the
 * file's options to @base (the environment, read after, overrides them). A bad file gives one
 * warning (the file, the line, the problem) and is ignored whole.
 */
void san_conf_init(struct san_config *base);

/* The process's rules: does a new connection of @role with @a stay on TCP? */
bool san_conf_tcp(enum san_conf_role role, const struct san_addr *a);

/* The file's log_file option, or NULL: the log file unless SANSWITCH_LOG_FILE names one. */
const char *san_conf_log_file(void);

#endif /* SAN_CONF_H */
