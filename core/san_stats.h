/* core — per-process statistics: counters in a shared file sanstat can read, a line at exit. */
#ifndef SAN_STATS_H
#define SAN_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/san_config.h"
#include "core/san_fdtable.h"
#include "proto/san_wire.h"

/*
 * The counters, one process each. Connections are counted when they end on TCP (fallback) or
 * when they switch; bytes by the path that carried them. Values are fixed: they index the
 * counters[] of the file, which sanstat reads by number.
 */
enum san_stat {
	SAN_STAT_SWITCHED = 0,	   /* connections moved onto a SAN provider */
	SAN_STAT_FALLBACK = 1,	   /* connections that ended on TCP: sum of fallback[] */
	SAN_STAT_SAN_TX_BYTES = 2, /* application bytes sent over a SAN provider */
	SAN_STAT_SAN_RX_BYTES = 3, /* application bytes received over a SAN provider */
	SAN_STAT_TCP_TX_BYTES = 4, /* application bytes sent over kernel TCP */
	SAN_STAT_TCP_RX_BYTES = 5, /* application bytes received over kernel TCP */
	SAN_STAT_ENOBUFS = 6,	   /* sends that failed with ENOBUFS (no memory, nothing lost) */
	SAN_STAT_CONNECTS = 7,	   /* tracked active opens (connect() started) */
	SAN_STAT_ACCEPTS = 8,	   /* tracked passive opens (accepted on a tracked listener) */
	SAN_STAT_READ_TX_BYTES = 9, /* of san_tx_bytes, those the peer read (READ transfers) */
	SAN_STAT_GRANT_TX_BYTES = 10, /* of san_tx_bytes, those written into the peer's grant */
	SAN_STAT_DIRECT_TX_BYTES = 11, /* of san_tx_bytes, written straight into the peer's
					* waiting receive buffer (process_vm_writev) */
	SAN_STAT_DREAD_TX_BYTES = 12,  /* of san_tx_bytes, read by the peer straight from the
					* buffer of our waiting send (process_vm_readv) */
	SAN_STAT_SWITCHED_VERBS = 13,  /* of switched, those carried by the verbs provider */
	SAN_STAT_VDIRECT_RX_BYTES = 14, /* of san_rx_bytes, RDMA-READ straight into the
					 * application's receive buffer (verbs) */
	SAN_STAT_VREG_HITS = 15,	/* ... whose registration the cache already had */
	SAN_STAT_VREG_MISSES = 16,	/* ... that had to be registered (or could not be) */
	SAN_STAT_VAHEAD_RX_BYTES = 17,	/* of san_rx_bytes, READ into the mirror ahead of the
					 * application's look (it was behind) */
	SAN_STAT_VCQ_ENGINE = 18, /* verbs completions taken by the engine thread */
	SAN_STAT_VCQ_APP = 19,	  /* ... and by application threads (in their own calls) */
	SAN_STAT_SHM_BELLS = 20,  /* doorbells rung to shm peers (a system call each, and the
				   * peer's to take it off: what its waits' spins spare) */
	SAN_STAT_SHM_ARMS = 21,	  /* shm receive flags put up (each lets the peer ring once) */
	SAN_STAT_SHM_READ_ARMS = 22, /* ... of them by a read that emptied the ring and left
				      * the flag up for a wait not its own thread's (another
				      * thread's, poll's), or could not leave it down (not
				      * watchable, SANSWITCH_SPIN_US=0, a doorbell late) */
	SAN_STAT_SHM_EMPTY_ARMS = 23, /* ... of them by a nonblocking read that found the ring
				       * empty (EAGAIN) of a connection no wait of ours watched,
				       * or whose flag stands for another's wait */
	SAN_STAT_NR,
};

/*
 * Fallback reasons: one number space, so sanstat shows one table. 0..SAN_R_MAX are the wire
 * reasons of proto/san_wire.h (enum san_reason: what a REJECT or ABORT carried), same values;
 * the reasons that never travel on the wire start at SAN_FB_LOCAL. A reason this build does
 * not know (a newer peer's) is counted in the SAN_FB_UNKNOWN slot.
 */
enum san_fb_reason {
	SAN_FB_LOCAL = 32,
	SAN_FB_NOT_ATTEMPTED = SAN_FB_LOCAL, /* ended before an upgrade was tried (today: all) */
	SAN_FB_NO_PEER = 33,		     /* no switch answered at the other end */
	SAN_FB_NO_PROVIDER = 34,	     /* no provider can reach the peer (policy, device) */
	SAN_FB_CONF = 35,		     /* a "tcp" rule of /etc/sanswitch.conf (san_conf.h) */
	SAN_FB_UNKNOWN = 47,		     /* a reason value this build has no name for */
	SAN_FB_SLOTS = 48,
};

_Static_assert((int)SAN_R_MAX < (int)SAN_FB_LOCAL, "wire reasons grew into the local ones: move "
						   "SAN_FB_LOCAL up and bump SAN_STATS_VERSION");

/*
 * The shared file, SAN_STATS_DIR/sanswitch.<pid>: this struct, in host byte order (it never
 * leaves the host). Created mode 0600 at the process's first tracked socket, unlinked at exit; at an
 * exec handed to the new image (same pid, same file, counts going on) when it will run the
 * library, else unlinked; a fork child makes its own. A reader (sanstat) reads it and checks
 * magic, version and the sizes in the header (san_stats_file_read). A process killed by a
 * signal leaves its file behind:
 * the next process of the same user to make its file removes such leftovers (a pid that is
 * gone from the same pid namespace, or now belongs to a process with another start time).
 * Every counter is a 64-bit value written with relaxed atomics: each one is consistent, a
 * set of them is not a snapshot. docs/sanstat.md describes the layout for readers.
 *
 * Version 2 added the connection table (conns[], nr_conns, conn_len, conn_off, conn_overflow).
 */
#define SAN_STATS_DIR "/dev/shm"
#define SAN_STATS_MAGIC 0x54534e53u /* "SNST" read as little-endian bytes */
#define SAN_STATS_VERSION 2
#define SAN_STATS_COUNTERS 32 /* slots in counters[]: room to add without a new version */
#define SAN_STATS_CONNS 256   /* connection slots per process (more: conn_overflow) */

#define SAN_STATS_F_EXITED 0x1u /* the process has run its exit hook */
#define SAN_STATS_F_EXEC 0x2u	/* the process execs: the new image takes the file over */

struct san_stats_hdr {
	uint32_t magic;	      /* SAN_STATS_MAGIC */
	uint16_t version;     /* SAN_STATS_VERSION: readers refuse others */
	uint16_t hdr_len;     /* bytes: offset of counters[] */
	uint32_t nr_counters; /* slots in counters[] */
	uint32_t nr_reasons;  /* slots in fallback[] */
	int32_t pid;	      /* the process, as seen in its own pid namespace */
	uint32_t flags;	      /* SAN_STATS_F_* */
	uint64_t
		start_ticks; /* field 22 of /proc/<pid>/stat (clock ticks after boot); 0: unknown */
	uint64_t created_ns; /* CLOCK_REALTIME when the file was made */
	char comm[16];	     /* the process name at that time, NUL-terminated */
	uint64_t pidns;	     /* inode of /proc/self/ns/pid: what namespace pid is in; 0: unknown */
	uint32_t nr_conns;   /* slots in conns[] */
	uint32_t conn_len;   /* bytes per slot */
	uint32_t conn_off;   /* offset of conns[] in the file */
	uint32_t reserved;
	uint64_t conn_overflow; /* connections that found every slot taken (not shown) */
};

/*
 * The state of one connection as sanstat shows it. FREE (0) is an unused slot.
 *   CANDIDATE  on TCP, may still switch (the upgrade not begun, or refused for now)
 *   UPGRADING  committed to the SAN, the stream moving over (until the swap)
 *   SWITCHED   carried by its provider
 *   FALLBACK   stays on TCP for good: reason says why
 *   CLOSING    switched, and ending: our DISCONNECT is out, or the connection was reset
 */
enum san_stats_cstate {
	SAN_CS_FREE = 0,
	SAN_CS_CANDIDATE = 1,
	SAN_CS_UPGRADING = 2,
	SAN_CS_SWITCHED = 3,
	SAN_CS_FALLBACK = 4,
	SAN_CS_CLOSING = 5,
	SAN_CS_NR,
};

enum san_stats_role {
	SAN_ROLE_CLIENT = 1, /* connect() side */
	SAN_ROLE_SERVER = 2, /* accept() side (or a connection inherited at exec) */
};

/* Which path carries the connection's stream (TCP until a provider takes it). */
enum san_stats_prov {
	SAN_CP_TCP = 0,
	SAN_CP_SHM = 1,
	SAN_CP_VERBS = 2,
	SAN_CP_NR,
};

/*
 * One connection slot. seq is a sequence lock over every field before san_tx: a writer makes
 * it odd, changes the fields, makes it even again, so a reader that sees the same even value
 * before and after its copy has a whole record. Writers are rare (claim, state change,
 * release) and take the slot by turning seq odd (compare-and-swap). The byte counters only
 * grow and are added to with relaxed atomics outside the lock; a claim zeroes them inside it.
 * gen counts the claims of the slot: a reader that compares two looks sees whether they are
 * of the same connection. Addresses are 16 bytes, IPv4 as ::ffff:a.b.c.d; ports host order;
 * addr_known: bit 0 the local end, bit 1 the peer's (a connection that never got near the
 * switch has neither: the reader asks the kernel, by the fd's socket inode).
 */
struct san_stats_conn {
	uint32_t seq;
	uint32_t gen;
	int32_t fd;	      /* the application's fd number (one of them, if it dup()ed) */
	uint8_t state;	      /* enum san_stats_cstate */
	uint8_t role;	      /* enum san_stats_role */
	uint8_t prov;	      /* enum san_stats_prov */
	uint8_t addr_known;   /* SAN_CA_LOCAL | SAN_CA_PEER */
	uint16_t reason;      /* fallback reason (san_fb_name), 0: none */
	uint16_t local_port;
	uint16_t peer_port;
	uint16_t reserved16;
	uint8_t local_addr[16];
	uint8_t peer_addr[16];
	uint64_t reserved;
	/* outside the sequence lock: */
	uint64_t san_tx, san_rx; /* application bytes over the SAN, each way */
	uint64_t tcp_tx, tcp_rx; /* application bytes this library moved over TCP, each way */
	uint64_t reserved_cnt[4];
};

#define SAN_CA_LOCAL 0x1u
#define SAN_CA_PEER 0x2u

struct san_stats_file {
	struct san_stats_hdr hdr;
	uint64_t counters[SAN_STATS_COUNTERS]; /* enum san_stat */
	uint64_t fallback[SAN_FB_SLOTS]; /* per reason: enum san_reason / enum san_fb_reason */
	struct san_stats_conn conns[SAN_STATS_CONNS] __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct san_stats_hdr) == 88, "the header is 88 bytes: change "
						   "SAN_STATS_VERSION and sanstat with it");
_Static_assert(sizeof(struct san_stats_conn) == 128 &&
		       offsetof(struct san_stats_conn, san_tx) == 64,
	       "connection slot layout changed: bump SAN_STATS_VERSION");
_Static_assert(offsetof(struct san_stats_file, counters) == 88 &&
		       offsetof(struct san_stats_file, fallback) == 88 + 8 * SAN_STATS_COUNTERS &&
		       offsetof(struct san_stats_file, conns) == 768,
	       "file layout changed: bump SAN_STATS_VERSION");
_Static_assert(SAN_STAT_NR <= SAN_STATS_COUNTERS, "more counters than file slots");

/* ---- life of the process (called from core/san_core.c) -------------------------------- */

/*
 * Once at load, after san_config_init(): arms the exit hook unless SANSWITCH_STATS=0, and takes
 * over the counters an exec handed to this image (san_stats_take_over).
 */
void san_stats_init(void);
/* fork() child: drop the parent's file and counters; the child makes its own, lazily. */
void san_stats_atfork_child(void);
/*
 * Before an exec whose new program gets @envp: the counts go on in that program if it will
 * take them over (the file stays, flagged), else this image's line is printed now (if
 * SANSWITCH_STATS=1) and the name freed.
 */
void san_stats_before_exec(char *const envp[]);
/*
 * The exit hook: count the connections still open, print the line (only if the process had
 * TCP sockets or counts: see san_stats.c), remove the file.
 */
void san_stats_exit(void);

/* ---- counting (anywhere in core; never on a read/write fast path) --------------------- */

void san_stats_add(enum san_stat s, uint64_t n);
void san_stats_fallback(unsigned int reason);
uint64_t san_stats_get(enum san_stat s);
uint64_t san_stats_get_fallback(unsigned int reason);

/* The live counters, made (the file, or private memory) if they are not yet. */
struct san_stats_file *san_stats_live_file(void);

/* A socket became tracked (socket() or accept()): the file exists from now on. */
void san_stats_track(void);

/*
 * The connection of tracked fd @fd ends for this process: its TCP payload bytes (read from
 * TCP_INFO) are added and, if @reason is not 0, one fallback with that reason. @active: the
 * connecting side (its SYN is in the kernel's byte count). @fd must still be open.
 */
void san_stats_conn_end(int fd, bool active, unsigned int reason);

/*
 * Close path of a tracked fd (close, close_range, dup2 over it), before the real close while
 * @fd is still open: counts its connection if @fd is the process's last tracked fd of it, and
 * forgets @fd's entry. Returns the state the entry had.
 */
enum san_fd_state san_stats_fd_close(int fd);

/* ---- pure helpers, exported for the tests and for sanstat ----------------------------- */

/* The slot of reason @reason in fallback[], and its name ("not_attempted", "timeout", ...). */
unsigned int san_fb_slot(unsigned int reason);
const char *san_fb_name(unsigned int reason);
const char *san_stat_name(enum san_stat s);

/* What TCP_INFO says about one connection (the fields the statistics use). */
struct san_tcp_counts {
	uint8_t state;		 /* tcpi_state: TCP_ESTABLISHED ... */
	bool have_sent;		 /* tcpi_bytes_sent/_retrans/notsent present (Linux >= 4.19) */
	uint64_t bytes_acked;	 /* includes our SYN (active side) and our FIN once acked */
	uint64_t bytes_received; /* includes the peer's FIN once received */
	uint64_t bytes_sent;	 /* data bytes put on the wire, retransmissions included */
	uint64_t bytes_retrans;	 /* of which retransmitted */
	uint64_t notsent_bytes;	 /* data still queued, not yet sent */
};

/*
 * Payload bytes of one connection from its kernel counters; false if it never got
 * established (a refused or abandoned connect: not a connection to count).
 */
bool san_stats_tcp_payload(const struct san_tcp_counts *tc, bool active, uint64_t *tx,
			   uint64_t *rx);

/* The exit line ("sanswitch: pid=... switched=..."), newline included; its length. */
size_t san_stats_format_line(char *buf, size_t size, const struct san_stats_file *f);

/* Field 2 (comm) and field 22 (starttime) of a /proc/<pid>/stat line; 0 or -EINVAL. */
int san_stats_parse_procstat(const char *line, char comm[16], uint64_t *start_ticks);

/*
 * Create DIR/sanswitch.<pid> (0600, O_EXCL: a leftover of a dead process with the same pid is
 * replaced, anything else is refused) and map it; the header is filled in. 0 or -errno.
 */
int san_stats_file_create(const char *dir, pid_t pid, struct san_stats_file **out);
void san_stats_file_unmap(struct san_stats_file *f);

/*
 * Map DIR/sanswitch.<pid> if it is the file an exec handed to this image (flagged
 * SAN_STATS_F_EXEC, our pid, pid namespace and start time, this layout), and clear the flag.
 * 0; -ENOENT: no file; -ESTALE: a file that is not that.
 */
int san_stats_file_adopt(const char *dir, pid_t pid, struct san_stats_file **out);
/* At load: adopt the file an exec handed over, if any, as the counters; true if it did. */
bool san_stats_take_over(void);
/*
 * Will the program an exec starts with environment @envp take the counts over: run the library
 * (its name in LD_PRELOAD, unless @preload_by_env is false), count, and print a line if @ours
 * (this image's SANSWITCH_STATS) prints one?
 */
bool san_stats_exec_hands_over(char *const envp[], bool preload_by_env, enum san_cfg_stats ours);

/*
 * Read and validate a stats file (the sanstat side, core/san_stats_file.c): 0, -errno,
 * -EPROTONOSUPPORT for a stats file of another version, or -EPROTO for a file that is no stats
 * file (wrong magic, sizes that do not add up, not a regular file, larger than 4 MiB). @out is in this build's layout: a
 * later layout's extra counters and slots are left out. Only whole connection records are
 * taken: a slot being written while it was read, or holding values no writer makes, is left
 * free in @out and counted in *@skipped (may be NULL). Never blocks on the writer.
 */
int san_stats_file_read(const char *path, struct san_stats_file *out, unsigned int *skipped);

/* Names of enum san_stats_cstate, enum san_stats_prov, enum san_stats_role values ("?" if none). */
const char *san_conn_state_name(unsigned int state);
const char *san_conn_prov_name(unsigned int prov);
const char *san_conn_role_name(unsigned int role);

/*
 * Remove from @dir the files of this user's processes that died without their exit hook,
 * in pid namespace @pidns; never @self's. Returns how many were removed.
 */
int san_stats_gc(const char *dir, uint64_t pidns, pid_t self);

/*
 * Start over with fresh counters and no file (what a fork child does); the file, when one is
 * made, goes to @dir (NULL: /dev/shm). For the tests.
 */
void san_stats_reset(const char *dir);
/* The live counters: the mapped file, or private memory when there is none. */
const struct san_stats_file *san_stats_current(void);
/* The path of this process's file, or NULL if it has none. */
const char *san_stats_path(void);

/* False with SANSWITCH_STATS=0: then every counting call returns at once. */
static inline bool san_stats_enabled(void)
{
	return san_cfg.stats != SAN_CFG_STATS_OFF;
}

#endif /* SAN_STATS_H */
