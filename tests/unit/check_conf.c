/*
 * tests/unit: core/san_conf — the configuration file's parser (every error path), the rule
 * matcher, the reader and the loader's one warning.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/san_conf.h"
#include "core/san_config.h"
#include "core/san_log.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_addr.h"
#include "tests/unit/unit_stderr.h"

static struct san_conf conf; /* 12 KiB: not on the stack */
static struct san_conf_error err;
static int saved_level;

static void quiet_setup(void)
{
	saved_level = san_log_level;
	san_log_level = SAN_LOG_ERROR;
}

static void quiet_teardown(void)
{
	san_log_level = saved_level;
	/* forget the process's rules (and never read the machine's own file) */
	setenv("SANSWITCH_CONF", "none", 1);
	san_conf_init(&(struct san_config){ 0 });
	unsetenv("SANSWITCH_CONF");
}

static int parse(const char *text)
{
	return san_conf_parse(text, strlen(text), &conf, &err);
}

/* ---- what parses --------------------------------------------------------------- */

START_TEST(test_empty_and_comments)
{
	ck_assert_int_eq(parse(""), 0);
	ck_assert_uint_eq(conf.nrules, 0);
	ck_assert_uint_eq(conf.has, 0);
	ck_assert_int_eq(parse("# only a comment\n\n   \t\n# another\r\n"), 0);
	ck_assert_uint_eq(conf.nrules, 0);
	ck_assert_uint_eq(conf.has, 0);
}
END_TEST

START_TEST(test_options)
{
	ck_assert_int_eq(parse("provider shm\n"
			       "inline_max 16K   # bytes\n"
			       "\tspin_us\t7\r\n"
			       "LOG_LEVEL Debug\n"
			       "log_file /var/log/sanswitch.log"), /* (no newline at the end) */
			 0);
	ck_assert_uint_eq(conf.has, SAN_CONF_HAS_PROVIDER | SAN_CONF_HAS_INLINE_MAX |
					    SAN_CONF_HAS_SPIN_US | SAN_CONF_HAS_LOG_LEVEL |
					    SAN_CONF_HAS_LOG_FILE);
	ck_assert_int_eq(conf.provider, SAN_CFG_PROV_SHM);
	ck_assert_uint_eq(conf.inline_max, 16384);
	ck_assert_uint_eq(conf.spin_us, 7);
	ck_assert_int_eq(conf.log_level, SAN_LOG_DEBUG);
	ck_assert_str_eq(conf.log_file, "/var/log/sanswitch.log");
	ck_assert_uint_eq(conf.nrules, 0);
}
END_TEST

START_TEST(test_rules)
{
	static const uint8_t v4net[16] = { [10] = 0xff, [11] = 0xff, [12] = 10 };
	static const uint8_t v6net[16] = { 0xfd, 0x00, 0x12, 0x34 };
	const struct san_conf_rule *r = conf.rules;

	ck_assert_int_eq(parse("# rules\n"
			       "tcp client curl* 10.0.0.0/8 80-90\n"
			       "\n"
			       "TCP server * fd00:1234::/32 5432   # postgres\n"
			       "switch * * * *\n"
			       "tcp * ssh 127.0.0.1 22\n"),
			 0);
	ck_assert_uint_eq(conf.nrules, 4);
	ck_assert_uint_eq(r[0].action, SAN_CONF_TCP);
	ck_assert_uint_eq(r[0].role, SAN_CONF_CLIENT);
	ck_assert_str_eq(r[0].program, "curl*");
	ck_assert_mem_eq(r[0].addr, v4net, 16);
	ck_assert_uint_eq(r[0].prefix_len, 96 + 8);
	ck_assert_uint_eq(r[0].port_lo, 80);
	ck_assert_uint_eq(r[0].port_hi, 90);
	ck_assert_uint_eq(r[0].line, 2);
	ck_assert_uint_eq(r[1].role, SAN_CONF_SERVER);
	ck_assert_mem_eq(r[1].addr, v6net, 16);
	ck_assert_uint_eq(r[1].prefix_len, 32);
	ck_assert_uint_eq(r[1].port_lo, 5432);
	ck_assert_uint_eq(r[1].port_hi, 5432);
	ck_assert_uint_eq(r[1].line, 4);
	ck_assert_uint_eq(r[2].action, SAN_CONF_SWITCH);
	ck_assert_uint_eq(r[2].role, SAN_CONF_ANY);
	ck_assert_uint_eq(r[2].prefix_len, 0);
	ck_assert_uint_eq(r[2].port_lo, 0);
	ck_assert_uint_eq(r[2].port_hi, 65535);
	ck_assert_uint_eq(r[3].prefix_len, 128); /* a single address */
	ck_assert_uint_eq(r[3].line, 6);
	ck_assert_uint_eq(conf.has, 0);
}
END_TEST

/* The limits themselves are allowed: 256-byte lines, 128 rules, 63-character patterns. */
START_TEST(test_limits_ok)
{
	static char buf[SAN_CONF_FILE_MAX + 1];
	size_t len = 0;
	unsigned int i;

	memset(buf, '#', SAN_CONF_LINE_MAX);
	buf[SAN_CONF_LINE_MAX] = '\n';
	ck_assert_int_eq(san_conf_parse(buf, SAN_CONF_LINE_MAX + 1, &conf, &err), 0);
	for (i = 0; i < SAN_CONF_RULES_MAX; i++)
		len += (size_t)sprintf(buf + len, "tcp * * * %u\n", i + 1);
	ck_assert_int_eq(san_conf_parse(buf, len, &conf, &err), 0);
	ck_assert_uint_eq(conf.nrules, SAN_CONF_RULES_MAX);
	len = (size_t)sprintf(buf, "tcp * %.*s * *\n", (int)SAN_CONF_PROGRAM_MAX,
			      "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopq");
	ck_assert_int_eq(san_conf_parse(buf, len, &conf, &err), 0);
	/* a file of exactly the size limit, all comment lines */
	for (len = 0; len < SAN_CONF_FILE_MAX; len++)
		buf[len] = (len % 100 == 99) ? '\n' : '#';
	ck_assert_int_eq(san_conf_parse(buf, SAN_CONF_FILE_MAX, &conf, &err), 0);
}
END_TEST

/* ---- every error: the line it names and what it says ----------------------------- */

static const struct {
	const char *what, *text;
	unsigned int line;
	const char *says;
} bad[] = {
	{ "unknown keyword", "frobnicate 1\n", 1, "unknown keyword 'frobnicate'" },
	{ "bad action", "# x\n\nudp client * * 80\n", 3, "rule's action: switch, tcp" },
	{ "bad role", "tcp both * * *\n", 1, "role 'both' not understood" },
	{ "bad address v4", "tcp * * 10.0.0.256 *\n", 1, "address '10.0.0.256' is not" },
	{ "bad address v6", "tcp * * fe80:::1 *\n", 1, "address 'fe80:::1' is not" },
	{ "host name", "tcp * * localhost *\n", 1, "address 'localhost' is not" },
	{ "address with a port", "tcp * * 127.0.0.1:80 *\n", 1, "is not an IPv4 or IPv6" },
	{ "prefix > 32", "tcp * * 10.0.0.0/33 *\n", 1, "prefix length '/33' of 10.0.0.0 is not 0..32" },
	{ "prefix > 128", "tcp * * ::/129 *\n", 1, "prefix length '/129' of :: is not 0..128" },
	{ "prefix not a number", "tcp * * 10.0.0.0/x *\n", 1, "prefix length '/x'" },
	{ "prefix empty", "tcp * * 10.0.0.0/ *\n", 1, "prefix length '/'" },
	{ "prefix negative", "tcp * * 10.0.0.0/-8 *\n", 1, "prefix length '/-8'" },
	{ "host bits v4", "tcp * * 10.1.0.0/8 *\n", 1, "10.1.0.0/8 has bits set beyond its prefix" },
	{ "host bits v6", "tcp * * fd00::1/64 *\n", 1, "fd00::1/64 has bits set beyond" },
	{ "bad port", "tcp * * * http\n", 1, "port 'http' not understood" },
	{ "port 0", "tcp * * * 0\n", 1, "port 0 is not a port" },
	{ "port > 65535", "tcp * * * 65536\n", 1, "port 65536 is above 65535" },
	{ "huge port", "tcp * * * 99999999999999999999999\n", 1, "is above 65535" },
	{ "negative port", "tcp * * * -5\n", 1, "port '' not understood" },
	{ "reversed range", "tcp * * * 90-80\n", 1, "port range 90-80 is reversed" },
	{ "open range", "tcp * * * 80-\n", 1, "port '' not understood" },
	{ "range above 65535", "tcp * * * 80-70000\n", 1, "port 70000 is above 65535" },
	{ "port with a sign", "tcp * * * +80\n", 1, "port '+80' not understood" },
	{ "too many fields", "tcp client * * 80 90\n", 1, "too many fields" },
	{ "too few fields", "tcp client * 80\n", 1, "4 fields, a rule has 5" },
	{ "action alone", "switch\n", 1, "1 field, a rule has 5" },
	{ "program too long",
	  "tcp * abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl * *\n", 1,
	  "program pattern longer than 63" },
	{ "duplicate option", "provider shm\n# again\nprovider shm\n", 3, "provider: duplicate" },
	{ "bad provider", "provider rdma\n", 1, "provider 'rdma' not understood" },
	{ "inline_max too big", "inline_max 2M\n", 1, "inline_max '2M' out of range" },
	{ "inline_max junk", "inline_max lots\n", 1, "inline_max 'lots' not understood" },
	{ "spin_us negative", "spin_us -1\n", 1, "spin_us '-1' not understood" },
	{ "spin_us too big", "spin_us 1000001\n", 1, "spin_us '1000001' out of range" },
	{ "bad log level", "log_level loud\n", 1, "log_level 'loud' not understood" },
	{ "relative log file", "log_file sanswitch.log\n", 1, "not an absolute path" },
	{ "option without value", "spin_us\n", 1, "spin_us: missing its value" },
	{ "option with two values", "provider shm verbs\n", 1, "provider: too many fields" },
	{ "option value is a comment", "provider #shm\n", 1, "provider: missing its value" },
	{ "the first error wins", "tcp * * * 0\nbogus\n", 1, "port 0" },
};

START_TEST(test_errors)
{
	memset(&err, 0xa5, sizeof(err));
	ck_assert_int_eq(parse(bad[_i].text), -EINVAL);
	ck_assert_msg(err.line == bad[_i].line, "%s: line %u, expected %u", bad[_i].what, err.line,
		      bad[_i].line);
	ck_assert_msg(strstr(err.msg, bad[_i].says), "%s: '%s' does not say '%s'", bad[_i].what,
		      err.msg, bad[_i].says);
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "provider shm\ntcp\0 * * * *\n";

	ck_assert_int_eq(san_conf_parse(text, sizeof(text) - 1, &conf, &err), -EINVAL);
	ck_assert_uint_eq(err.line, 2);
	ck_assert_str_eq(err.msg, "a NUL byte (not a text file?)");
}
END_TEST

START_TEST(test_line_too_long)
{
	static char buf[1024];

	strcpy(buf, "provider shm\n");
	memset(buf + 13, '#', SAN_CONF_LINE_MAX + 1);
	strcpy(buf + 13 + SAN_CONF_LINE_MAX + 1, "\n");
	ck_assert_int_eq(parse(buf), -EINVAL);
	ck_assert_uint_eq(err.line, 2);
	ck_assert_str_eq(err.msg, "line longer than 256 bytes");
	/* the last line, without its newline, too */
	buf[strlen(buf) - 1] = '\0';
	ck_assert_int_eq(parse(buf), -EINVAL);
	ck_assert_uint_eq(err.line, 2);
}
END_TEST

START_TEST(test_too_many_rules)
{
	static char buf[SAN_CONF_FILE_MAX];
	size_t len = 0;
	unsigned int i;

	for (i = 0; i <= SAN_CONF_RULES_MAX; i++)
		len += (size_t)sprintf(buf + len, "switch * * * *\n");
	ck_assert_int_eq(san_conf_parse(buf, len, &conf, &err), -EINVAL);
	ck_assert_uint_eq(err.line, SAN_CONF_RULES_MAX + 1);
	ck_assert_str_eq(err.msg, "more than 128 rules");
}
END_TEST

START_TEST(test_file_too_large)
{
	static char buf[SAN_CONF_FILE_MAX + 1];

	memset(buf, '\n', sizeof(buf));
	ck_assert_int_eq(san_conf_parse(buf, sizeof(buf), &conf, &err), -EINVAL);
	ck_assert_uint_eq(err.line, 0);
	ck_assert_str_eq(err.msg, "larger than 65536 bytes");
}
END_TEST

/* ---- the matcher ----------------------------------------------------------------- */

static enum san_conf_action decide(enum san_conf_role role, const char *ip, uint16_t port)
{
	struct san_addr a;

	unit_addr_set(&a, ip, port);
	return san_conf_decide(&conf, role, &a);
}

START_TEST(test_match)
{
	ck_assert_int_eq(parse("switch client * 10.1.2.3 80\n"
			       "tcp client * 10.0.0.0/8 80-90\n"
			       "tcp server * 192.168.16.0/20 *\n"
			       "tcp * * 2001:db8::/126 443\n"
			       "tcp * * ::/0 7000\n"
			       "tcp * * 0.0.0.0/0 7001\n"),
			 0);
	/* no rule at all: switch */
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "172.16.0.1", 80), SAN_CONF_SWITCH);
	/* the first match wins: rule 1 before rule 2 */
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "10.1.2.3", 80), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "10.1.2.3", 81), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "10.255.255.255", 90), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "10.0.0.1", 91), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "10.0.0.1", 79), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "11.0.0.1", 85), SAN_CONF_SWITCH);
	/* the role: rule 2 is a client's, rule 3 a server's */
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "10.0.0.1", 85), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "192.168.31.255", 1), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "192.168.16.0", 65535), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "192.168.32.0", 1), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "192.168.15.255", 1), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "192.168.17.1", 1), SAN_CONF_SWITCH);
	/* a prefix that ends inside a byte (/126: the last two bits free) */
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "2001:db8::3", 443), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "2001:db8::4", 443), SAN_CONF_SWITCH);
	/* ::/0 is every address, IPv4 ones too; 0.0.0.0/0 only IPv4 (v4-mapped) ones */
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "127.0.0.1", 7000), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "::1", 7000), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "127.0.0.1", 7001), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "::1", 7001), SAN_CONF_SWITCH);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "::ffff:127.0.0.1", 7001), SAN_CONF_TCP);
}
END_TEST

START_TEST(test_select_program)
{
	ck_assert_int_eq(parse("tcp * curl * 1\n"
			       "tcp * python3* * 2\n"
			       "switch * * * 3\n"
			       "tcp * [ab]ench * 4\n"
			       "switch * * * 5\n"
			       "switch * python3 * 6\n"),
			 0);
	san_conf_select_program(&conf, "python3.11", "myscript");
	/* rule 2 (by the executable), not 6 (no name is exactly python3); 3 and 5 are switch
	 * rules after the last tcp rule kept: they decide nothing */
	ck_assert_uint_eq(conf.nrules, 1);
	ck_assert_uint_eq(conf.rules[0].line, 2);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "::1", 2), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_SERVER, "::1", 1), SAN_CONF_SWITCH);
	ck_assert_int_eq(parse("tcp * a * 1\nswitch * b * 2\ntcp * * * 3\n"), 0);
	san_conf_select_program(&conf, "b", "x");
	ck_assert_uint_eq(conf.nrules, 2); /* a switch rule before a tcp one stays */
	ck_assert_uint_eq(conf.rules[0].line, 2);

	ck_assert_int_eq(parse("tcp * curl * 1\ntcp * [ab]ench * 4\nswitch * * * 5\n"), 0);
	san_conf_select_program(&conf, NULL, "bench");
	ck_assert_uint_eq(conf.nrules, 1);
	ck_assert_uint_eq(conf.rules[0].line, 2);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "127.0.0.1", 4), SAN_CONF_TCP);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "127.0.0.1", 1), SAN_CONF_SWITCH);

	/* only switch rules: nothing left to look at */
	ck_assert_int_eq(parse("switch * * * 1\nswitch * * * 2\n"), 0);
	san_conf_select_program(&conf, "x", "x");
	ck_assert_uint_eq(conf.nrules, 0);
	ck_assert_int_eq(decide(SAN_CONF_CLIENT, "127.0.0.1", 1), SAN_CONF_SWITCH);
}
END_TEST

/* ---- the reader -------------------------------------------------------------------- */

static char dir[] = "/tmp/check_conf.XXXXXX";
static char path[256];

static void dir_setup(void)
{
	quiet_setup();
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sanswitch.conf", dir);
}

static void dir_teardown(void)
{
	char p[300];

	quiet_teardown();
	unlink(path);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	unlink(p);
	rmdir(dir);
	strcpy(dir, "/tmp/check_conf.XXXXXX");
}

static void write_file(const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void write_text(const char *text)
{
	write_file(text, strlen(text));
}

static char filebuf[SAN_CONF_FILE_MAX + 1];

/* san_conf_read(), its text copied into filebuf; on an error it must leave the buffer alone */
static int read_file(const char *p, bool quiet, size_t *len)
{
	char *buf = (char *)&buf;
	int r = san_conf_read(p, quiet, SAN_CONF_FILE_MAX, &buf, len, &err);

	if (r) {
		ck_assert_ptr_eq(buf, (char *)&buf); /* untouched */
		return r;
	}
	memcpy(filebuf, buf, *len);
	free(buf);
	return 0;
}

START_TEST(test_read)
{
	size_t len = 0;

	write_text("provider shm\n");
	ck_assert_int_eq(read_file(path, false, &len), 0);
	ck_assert_uint_eq(len, 13);
	ck_assert_mem_eq(filebuf, "provider shm\n", 13);
	/* exactly the limit: read; one byte more: refused */
	memset(filebuf, '\n', sizeof(filebuf));
	write_file(filebuf, SAN_CONF_FILE_MAX);
	ck_assert_int_eq(read_file(path, false, &len), 0);
	ck_assert_uint_eq(len, SAN_CONF_FILE_MAX);
	write_file(filebuf, SAN_CONF_FILE_MAX + 1);
	ck_assert_int_eq(read_file(path, false, &len),
			 -EFBIG);
	ck_assert_uint_eq(err.line, 0);
	ck_assert_str_eq(err.msg, "larger than 65536 bytes");
}
END_TEST

START_TEST(test_read_missing_unreadable)
{
	char fifo[300];
	size_t len = 0;

	/* the default file missing: quiet; a file named by SANSWITCH_CONF missing: an error */
	ck_assert_int_eq(read_file(path, true, &len), -ENOENT);
	ck_assert_str_eq(err.msg, "");
	ck_assert_int_eq(read_file(path, false, &len),
			 -ENOENT);
	ck_assert_str_eq(err.msg, "cannot open: No such file or directory");
	/* a directory (open works, read would not) */
	ck_assert_int_eq(read_file(dir, true, &len), -EINVAL);
	ck_assert_str_eq(err.msg, "not a regular file");
	/* a FIFO with no writer: refused at once, not waited on */
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(read_file(fifo, false, &len),
			 -EINVAL);
	ck_assert_str_eq(err.msg, "not a regular file");
	/* no permission (as root, permissions do not stop a read: nothing to test then) */
	write_text("provider shm\n");
	chmod(path, 0);
	if (geteuid() != 0) {
		ck_assert_int_eq(read_file(path, true, &len),
				 -EACCES);
		ck_assert_str_eq(err.msg, "cannot open: Permission denied");
	}
}
END_TEST

/* ---- the loader: options under the environment, rules, and its one warning ---------- */

static const char *env_get(const char *name, void *ctx)
{
	const char *const *kv = ctx;

	for (; kv[0]; kv += 2)
		if (!strcmp(kv[0], name))
			return kv[1];
	return NULL;
}

/* san_conf_init(init_base) at warning level; returns what it printed. */
static struct san_config *init_base;

static void init_warning(void)
{
	san_log_level = SAN_LOG_WARN;
	san_conf_init(init_base);
}

static const char *init_capturing(struct san_config *base)
{
	init_base = base;
	return unit_stderr_of(init_warning);
}

static bool conf_tcp(enum san_conf_role role, const char *ip, uint16_t port)
{
	struct san_addr a;

	unit_addr_set(&a, ip, port);
	return san_conf_tcp(role, &a);
}

START_TEST(test_init_good_file)
{
	static const char text[] = "provider shm\ninline_max 16K\nspin_us 7\nlog_level info\n"
				   "tcp client check_uni? 127.0.0.1 80\n"
				   "tcp client no_such_program * *\n"
				   "tcp server * * 81\n";
	const char *env[] = { "SANSWITCH_SPIN_US", "9", NULL };
	struct san_config base = san_config_defaults, cfg;

	write_text(text);
	setenv("SANSWITCH_CONF", path, 1);
	unsetenv("SANSWITCH_LOG");
	ck_assert_str_eq(init_capturing(&base), "");
	ck_assert_int_eq(base.provider, SAN_CFG_PROV_SHM);
	ck_assert_uint_eq(base.inline_max, 16384);
	ck_assert_uint_eq(base.spin_us, 7);
	ck_assert_int_eq(san_log_level, SAN_LOG_INFO);
	/* the environment over the file */
	ck_assert_int_eq(san_config_load_over(&cfg, &base, env_get, env), 0);
	ck_assert_uint_eq(cfg.spin_us, 9);
	ck_assert_uint_eq(cfg.inline_max, 16384);
	ck_assert_int_eq(cfg.provider, SAN_CFG_PROV_SHM);
	/* the rules of this program (the runner is check_unit), by role */
	ck_assert(conf_tcp(SAN_CONF_CLIENT, "127.0.0.1", 80));
	ck_assert(!conf_tcp(SAN_CONF_SERVER, "127.0.0.1", 80));
	ck_assert(!conf_tcp(SAN_CONF_CLIENT, "127.0.0.2", 80));
	ck_assert(!conf_tcp(SAN_CONF_CLIENT, "127.0.0.1", 81)); /* no_such_program's rule */
	ck_assert(conf_tcp(SAN_CONF_SERVER, "::1", 81));
}
END_TEST

/* SANSWITCH_LOG wins over the file's log_level. */
START_TEST(test_init_log_env_wins)
{
	struct san_config base = san_config_defaults;

	write_text("log_level debug\n");
	setenv("SANSWITCH_CONF", path, 1);
	setenv("SANSWITCH_LOG", "warn", 1);
	init_capturing(&base);
	unsetenv("SANSWITCH_LOG");
	ck_assert_int_eq(san_log_level, SAN_LOG_WARN);
}
END_TEST

START_TEST(test_init_bad_file)
{
	static const char text[] = "provider shm\n"
				   "tcp client * 127.0.0.1 80\n"
				   "tcp client * 127.0.0.1 70000\n"
				   "bogus\n";
	struct san_config base = san_config_defaults;
	char want[400];
	const char *out;

	write_text(text);
	setenv("SANSWITCH_CONF", path, 1);
	out = init_capturing(&base);
	/* one warning, naming file:line and the problem; then nothing of the file applies */
	ck_assert_int_eq(unit_count_lines(out), 1);
	snprintf(want, sizeof(want),
		 "warn: %s:3: port 70000 is above 65535; the file is ignored\n", path);
	ck_assert_msg(strstr(out, want), "'%s' lacks '%s'", out, want);
	ck_assert_int_eq(base.provider, SAN_CFG_PROV_AUTO);
	ck_assert(!conf_tcp(SAN_CONF_CLIENT, "127.0.0.1", 80));
	/* a file-level problem names no line */
	setenv("SANSWITCH_CONF", dir, 1);
	out = init_capturing(&base);
	ck_assert_int_eq(unit_count_lines(out), 1);
	snprintf(want, sizeof(want), "warn: %s: not a regular file; the file is ignored\n", dir);
	ck_assert_msg(strstr(out, want), "'%s' lacks '%s'", out, want);
	/* a file named by SANSWITCH_CONF that is missing is worth a warning too */
	unlink(path);
	setenv("SANSWITCH_CONF", path, 1);
	out = init_capturing(&base);
	ck_assert_int_eq(unit_count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "cannot open: No such file or directory"));
}
END_TEST

/* SANSWITCH_CONF empty or "none": no file, not even a bad one */
START_TEST(test_init_no_file)
{
	struct san_config base = san_config_defaults;

	write_text("provider shm\ntcp * * * *\n");
	setenv("SANSWITCH_CONF", path, 1);
	init_capturing(&base);
	ck_assert(conf_tcp(SAN_CONF_CLIENT, "127.0.0.1", 80));
	base = san_config_defaults;
	setenv("SANSWITCH_CONF", "none", 1);
	ck_assert_str_eq(init_capturing(&base), "");
	ck_assert(!conf_tcp(SAN_CONF_CLIENT, "127.0.0.1", 80));
	ck_assert_int_eq(base.provider, SAN_CFG_PROV_AUTO);
	write_text("bogus\n");
	setenv("SANSWITCH_CONF", "", 1);
	ck_assert_str_eq(init_capturing(&base), "");
	ck_assert_ptr_null(san_conf_log_file());
}
END_TEST

Suite *make_conf_suite(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("parse");
	TCase *tf = tcase_create("file");

	tcase_add_checked_fixture(tc, quiet_setup, quiet_teardown);
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_empty_and_comments);
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_rules);
	tcase_add_test(tc, test_limits_ok);
	tcase_add_loop_test(tc, test_errors, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_line_too_long);
	tcase_add_test(tc, test_too_many_rules);
	tcase_add_test(tc, test_file_too_large);
	tcase_add_test(tc, test_match);
	tcase_add_test(tc, test_select_program);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tf, dir_setup, dir_teardown);
	tcase_set_timeout(tf, SAN_UNIT_TIMEOUT);
	tcase_add_test(tf, test_read);
	tcase_add_test(tf, test_read_missing_unreadable);
	tcase_add_test(tf, test_init_good_file);
	tcase_add_test(tf, test_init_log_env_wins);
	tcase_add_test(tf, test_init_bad_file);
	tcase_add_test(tf, test_init_no_file);
	suite_add_tcase(s, tf);
	return s;
}
