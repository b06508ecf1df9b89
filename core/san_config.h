/* core — policy: the SANSWITCH_* environment, read once at load, and the fault-injection switch. */
#ifndef SAN_CONFIG_H
#define SAN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/* SANSWITCH_BULK: how sends above the inline threshold travel (tests force one mode). */
enum san_cfg_bulk {
	SAN_CFG_BULK_AUTO,   /* RDMA read if the peer can, else write grant, else copy */
	SAN_CFG_BULK_READ,   /* always RDMA read (copy only where it cannot be had) */
	SAN_CFG_BULK_GRANT,  /* always write grant */
	SAN_CFG_BULK_INLINE, /* never zero-copy: everything through the control messages */
};

/* SANSWITCH_PROVIDER: which SAN provider may carry a switched connection. */
enum san_cfg_provider {
	SAN_CFG_PROV_AUTO,  /* shm for a peer on this host, verbs for one across the fabric */
	SAN_CFG_PROV_SHM,   /* only shm: remote peers stay on TCP */
	SAN_CFG_PROV_VERBS, /* only verbs, even for a peer on this host */
	SAN_CFG_PROV_NONE,  /* none: preloaded, every connection stays TCP (pass-through) */
};

/* SANSWITCH_STATS. */
enum san_cfg_stats {
	SAN_CFG_STATS_OFF,   /* "0": nothing counted, no file, no line */
	SAN_CFG_STATS_LIVE,  /* unset: counters in /dev/shm/sanswitch.<pid> for sanstat, no line */
	SAN_CFG_STATS_PRINT, /* "1": the same, plus one line on stderr at exit */
	SAN_CFG_STATS_LOG,   /* "log": that line where the log goes (SANSWITCH_LOG_FILE, or stderr) */
};

/* Does @s print a line at exit (where: san_stats.c)? */
static inline bool san_cfg_stats_line(enum san_cfg_stats s)
{
	return s == SAN_CFG_STATS_PRINT || s == SAN_CFG_STATS_LOG;
}

/*
 * SANSWITCH_FAULT: failures the engine pretends to hit, so tests can reach the paths real
 * machines rarely take. Each one names the place that consults it; adding one means a name in
 * san_fault_names[] (san_config.c) and a line in man/libsanswitch.7.
 */
enum san_fault {
	SAN_FAULT_REG_FAIL,    /* bulk "registration" of a send or receive buffer fails */
	SAN_FAULT_ALLOC_FAIL,  /* staging / copy memory cannot be allocated */
	SAN_FAULT_CMA_FAIL,    /* process_vm_readv/writev refused, as with EPERM */
	SAN_FAULT_SIDE_REFUSE, /* the acceptor REJECTs every PROPOSE (reason POLICY) */
	SAN_FAULT_SIDE_DROP,   /* the acceptor ignores every PROPOSE: the proposer's timer fires */
	SAN_FAULT_MARK_BAD,    /* the switch-over MARK carries a wrong nonce */
	SAN_FAULT_SRC_LATE,    /* a send whose direct-read offer was given up sleeps 100 ms */
	SAN_FAULT_RING_GARBAGE, /* shm: a data send scribbles on the shared ring and area instead */
	SAN_FAULT_COUNTS_BUSY, /* a connection's first look at the kernel's counts finds them moving */
	SAN_FAULT_BELL_LATE,   /* shm: a producer that took the peer's flag rings 300 us later */
	SAN_FAULT_FORK_DIE_LOCKED, /* a fork child sharing a connection dies in its first send, locked */
	SAN_FAULT_FORK_NOMEM,  /* fork(): no memory for the child's records of its connections */
	SAN_FAULT_BELL_STUCK,  /* shm: as bell_late, 50 ms: longer than a reader waits for it */
	SAN_FAULT_SWITCH_LATE, /* A (shm, paused) sends its SWITCH 500 ms after B's ACCEPT */
	SAN_FAULT_ACCEPT_LATE, /* A gives up on B's answer to a PROPOSE it will repeat (san_up.c) */
	SAN_FAULT_NR,
};

#define SAN_FAULT_BIT(f) (1u << (f))

#define SAN_CFG_INLINE_MAX_DEFAULT 4096u
#define SAN_CFG_INLINE_MAX_LIMIT (1u << 20) /* inline payloads live in pre-registered slots */
#define SAN_CFG_SPIN_US_DEFAULT 50u
#define SAN_CFG_SPIN_US_LIMIT 1000000u
/*
 * SANSWITCH_SWITCH_AFTER: how many request/reply exchanges a connection to a peer on this host
 * makes over TCP before it is proposed for the switch (docs/protocol.md §9.7); 0: at once.
 */
#define SAN_CFG_SWITCH_AFTER_DEFAULT 16u
#define SAN_CFG_SWITCH_AFTER_LIMIT 1000u

/*
 * The process's policy. Written only by san_config_init(), from the library's one-time init,
 * before any wrapper can act on it; read-only afterwards, so readers take no lock. Until then
 * (and in the unit runner) it holds the defaults.
 */
struct san_config {
	bool disable;			/* SANSWITCH_DISABLE=1: inert, pure pass-through */
	enum san_cfg_bulk bulk;		/* SANSWITCH_BULK */
	uint32_t inline_max;		/* SANSWITCH_INLINE_MAX, bytes */
	uint32_t spin_us;		/* SANSWITCH_SPIN_US, microseconds */
	enum san_cfg_provider provider; /* SANSWITCH_PROVIDER */
	enum san_cfg_stats stats;	/* SANSWITCH_STATS */
	uint32_t faults;		/* SANSWITCH_FAULT: SAN_FAULT_BIT()s */
	uint32_t direct;		/* SANSWITCH_DIRECT: direct grants (1, the default) or not */
	uint32_t lite;			/* SANSWITCH_LITE: a server's candidates lite (san_lite.h); 1 default */
	uint32_t other_users;		/* SANSWITCH_OTHER_USERS: switch with another user's peer */
	uint32_t nopause;		/* SANSWITCH_NOPAUSE: switch without a pause (shm; 1, the
					 * default); 2: the due call waits for the handshake all
					 * the same (tests); 0: the paused switch-over */
	uint32_t stdio;			/* SANSWITCH_STDIO: bridge an adopted connection's stdio */
	uint32_t read_ahead;		/* SANSWITCH_READ_AHEAD: verbs READs posted ahead */
	uint32_t verbs_area;		/* SANSWITCH_VERBS_AREA: MiB each way, or AUTO */
	uint32_t switch_after;		/* SANSWITCH_SWITCH_AFTER: exchanges on TCP first */
	uint32_t log_rate;		/* SANSWITCH_LOG_RATE: lines a second per call site */
};

/*
 * SANSWITCH_VERBS_AREA: the verbs bulk area per direction, in MiB. auto (the default): a
 * connection we open proposes twice the path's bandwidth-delay product as estimated at set-up,
 * plus one region; one we accept takes what the peer proposes (up to MAX); 1..MAX: we propose
 * that and take no more (docs/verbs.md section 4, "Window").
 */
#define SAN_CFG_VERBS_AREA_MAX 16
#define SAN_CFG_VERBS_AREA_AUTO UINT32_MAX

/*
 * SANSWITCH_READ_AHEAD: auto (the default: as many as the link's bandwidth-delay product asks
 * for, up to SAN_CFG_READ_AHEAD_MAX; docs/verbs.md §4), 0 (never), or a fixed 1..MAX.
 */
#define SAN_CFG_READ_AHEAD_MAX 16
#define SAN_CFG_READ_AHEAD_AUTO UINT32_MAX

extern struct san_config san_cfg;

extern const struct san_config san_config_defaults;

/* Where san_config_load() reads a variable: getenv() in the library, a table in tests. */
typedef const char *(*san_config_getenv_fn)(const char *name, void *ctx);

/*
 * Fill @cfg from the variables @get returns. A bad value gets one warning (the variable, the
 * value, what is accepted) and the default. SANSWITCH_DISABLE=1 short-cuts everything: nothing
 * else is read and nothing is printed. Returns the number of variables rejected.
 */
int san_config_load(struct san_config *cfg, san_config_getenv_fn get, void *ctx);

/*
 * The same over @base instead of the defaults (the options of /etc/sanswitch.conf: san_conf.h):
 * a variable that is unset, empty or rejected leaves the field as @base has it.
 */
int san_config_load_over(struct san_config *cfg, const struct san_config *base,
			 san_config_getenv_fn get, void *ctx);

/*
 * The library's one-time init: san_cfg from the configuration file (SANSWITCH_CONF or
 * /etc/sanswitch.conf, core/san_conf.c) and the environment over it, and the log level
 * (SANSWITCH_LOG, core/san_log.c, else the file's), silenced entirely when the library is
 * disabled (the file is not even read then).
 */
void san_config_init(void);

/* The parsers, one per variable: 0, or -EINVAL/-ERANGE with *out untouched. */
int san_config_parse_bool(const char *s, bool *out);
int san_config_parse_bulk(const char *s, enum san_cfg_bulk *out);
int san_config_parse_provider(const char *s, enum san_cfg_provider *out);
int san_config_parse_stats(const char *s, enum san_cfg_stats *out);
int san_config_parse_size(const char *s, uint32_t limit, uint32_t *out);
int san_config_parse_uint(const char *s, uint32_t limit, uint32_t *out);
int san_config_parse_faults(const char *s, uint32_t *out);

const char *san_cfg_bulk_name(enum san_cfg_bulk b);
const char *san_cfg_provider_name(enum san_cfg_provider p);
const char *san_fault_name(enum san_fault f);

/*
 * The engine asks before each place a fault can be injected:
 *	if (san_fault(SAN_FAULT_REG_FAIL))
 *		return -ENOMEM;
 * One load and a never-taken branch when no fault is configured.
 */
static inline bool san_fault(enum san_fault f)
{
	return unlikely(san_cfg.faults & SAN_FAULT_BIT(f));
}

#endif /* SAN_CONFIG_H */
