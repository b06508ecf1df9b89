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
 * The shared file, /dev/shm/sanswitch.<pid>: this struct, in host byte order (it never leaves
 * the host). Created mode 0600 at the process's first tracked socket, unlinked at exit; at an
 * exec handed to the new image (same pid, same file, counts going on) when it will run the
 * library, else unlinked; a fork child makes its own. A reader (sanstat) maps or reads it,
 * checks magic, version and the sizes in the header. A process killed by a signal leaves its file behind:
 * the next process of the same user to make its file removes such leftovers (a pid that is
 * gone from the same pid namespace, or now belongs to a process with another start time).
 * Every counter is a 64-bit value written with relaxed atomics: each one is consistent, a
 * set of them is not a snapshot.
 */
#define SAN_STATS_MAGIC 0x54534e53u /* "SNST" read as little-endian bytes */
#define SAN_STATS_VERSION 1
#define SAN_STATS_COUNTERS 32 /* slots in counters[]: room to add without a new version */

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
};

struct san_stats_file {
	struct san_stats_hdr hdr;
	uint64_t counters[SAN_STATS_COUNTERS]; /* enum san_stat */
	uint64_t fallback[SAN_FB_SLOTS]; /* per reason: enum san_reason / enum san_fb_reason */
};

_Static_assert(sizeof(struct san_stats_hdr) == 64, "the header is 64 bytes: change "
						   "SAN_STATS_VERSION and sanstat with it");
_Static_assert(offsetof(struct san_stats_file, counters) == 64 &&
		       offsetof(struct san_stats_file, fallback) == 64 + 8 * SAN_STATS_COUNTERS,
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

/* Read and validate a stats file (the sanstat side): 0, -errno, or -EPROTO for a bad file. */
int san_stats_file_read(const char *path, struct san_stats_file *out);

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
