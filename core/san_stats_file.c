/* core — the stats file as a reader sees it: names of its numbers, reading and checking it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/san_stats.h"

/*
 * This file has no state and calls nothing of the library's: sanstat links it alone
 * (Makefile), and the library and the unit runner link it with the rest of core/.
 */

/* clang-format off */
static const char *const san_stat_names[SAN_STAT_NR] = {
	[SAN_STAT_SWITCHED] = "switched",
	[SAN_STAT_FALLBACK] = "fallback",
	[SAN_STAT_SAN_TX_BYTES] = "san_tx_bytes",
	[SAN_STAT_SAN_RX_BYTES] = "san_rx_bytes",
	[SAN_STAT_TCP_TX_BYTES] = "tcp_tx_bytes",
	[SAN_STAT_TCP_RX_BYTES] = "tcp_rx_bytes",
	[SAN_STAT_ENOBUFS] = "enobufs",
	[SAN_STAT_CONNECTS] = "connects",
	[SAN_STAT_ACCEPTS] = "accepts",
	[SAN_STAT_READ_TX_BYTES] = "read_tx_bytes",
	[SAN_STAT_GRANT_TX_BYTES] = "grant_tx_bytes",
	[SAN_STAT_DIRECT_TX_BYTES] = "direct_tx_bytes",
	[SAN_STAT_DREAD_TX_BYTES] = "direct_read_tx_bytes",
	[SAN_STAT_SWITCHED_VERBS] = "switched_verbs",
	[SAN_STAT_VDIRECT_RX_BYTES] = "verbs_direct_rx_bytes",
	[SAN_STAT_VREG_HITS] = "verbs_reg_hits",
	[SAN_STAT_VREG_MISSES] = "verbs_reg_misses",
	[SAN_STAT_VAHEAD_RX_BYTES] = "verbs_ahead_rx_bytes",
	[SAN_STAT_VCQ_ENGINE] = "verbs_cq_engine",
	[SAN_STAT_VCQ_APP] = "verbs_cq_app",
	[SAN_STAT_SHM_BELLS] = "shm_bells",
	[SAN_STAT_SHM_ARMS] = "shm_arms",
	[SAN_STAT_SHM_READ_ARMS] = "shm_read_arms",
	[SAN_STAT_SHM_EMPTY_ARMS] = "shm_empty_arms",
};
/* clang-format on */

/* One token each: they appear as "fallback_<name>=<n>" in the exit line. */
static const char *const san_fb_names[SAN_FB_SLOTS] = {
	[SAN_R_NONE] = "none",
	[SAN_R_VERSION] = "version",
	[SAN_R_NOT_OWNER] = "not_owner",
	[SAN_R_CREDENTIALS] = "credentials",
	[SAN_R_POLICY] = "policy",
	[SAN_R_RESOURCES] = "resources",
	[SAN_R_PROVIDER] = "provider",
	[SAN_R_BUSY] = "busy",
	[SAN_R_STATE] = "state",
	[SAN_R_MALFORMED] = "malformed",
	[SAN_R_TIMEOUT] = "timeout",
	[SAN_R_LOCAL] = "local",
	[SAN_R_PROTOCOL] = "protocol",
	[SAN_R_MARK] = "mark",
	[SAN_R_CHANNEL] = "channel",
	[SAN_R_TCP] = "tcp",
	[SAN_R_APP_RESET] = "app_reset",
	[SAN_R_KEEPALIVE] = "keepalive",
	[SAN_FB_NOT_ATTEMPTED] = "not_attempted",
	[SAN_FB_NO_PEER] = "no_peer",
	[SAN_FB_NO_PROVIDER] = "no_provider",
	[SAN_FB_CONF] = "conf",
	[SAN_FB_UNKNOWN] = "unknown",
};

_Static_assert(SAN_R_MAX == 17, "a new wire reason needs its token in san_fb_names[]");

const char *san_stat_name(enum san_stat s)
{
	return (unsigned int)s < SAN_STAT_NR ? san_stat_names[s] : "?";
}

unsigned int san_fb_slot(unsigned int reason)
{
	if (reason < SAN_FB_SLOTS && san_fb_names[reason])
		return reason;
	return SAN_FB_UNKNOWN;
}

const char *san_fb_name(unsigned int reason)
{
	return san_fb_names[san_fb_slot(reason)];
}

static const char *const san_conn_state_names[SAN_CS_NR] = {
	[SAN_CS_FREE] = "free",		  [SAN_CS_CANDIDATE] = "candidate",
	[SAN_CS_UPGRADING] = "upgrading", [SAN_CS_SWITCHED] = "switched",
	[SAN_CS_FALLBACK] = "fallback",	  [SAN_CS_CLOSING] = "closing",
};

static const char *const san_conn_prov_names[SAN_CP_NR] = {
	[SAN_CP_TCP] = "tcp",
	[SAN_CP_SHM] = "shm",
	[SAN_CP_VERBS] = "verbs",
};

const char *san_conn_state_name(unsigned int state)
{
	return state < SAN_CS_NR ? san_conn_state_names[state] : "?";
}

const char *san_conn_prov_name(unsigned int prov)
{
	return prov < SAN_CP_NR ? san_conn_prov_names[prov] : "?";
}

const char *san_conn_role_name(unsigned int role)
{
	return role == SAN_ROLE_CLIENT ? "client" : role == SAN_ROLE_SERVER ? "server" : "?";
}

/* ---------------------------------------------------------------- /proc/<pid>/stat */

int san_stats_parse_procstat(const char *line, char comm[16], uint64_t *start_ticks)
{
	const char *lp = strchr(line, '(');
	const char *rp = strrchr(line, ')');
	const char *p;
	size_t len;
	int field;

	/* comm may hold spaces and parentheses itself: it ends at the last ')'. */
	if (!lp || !rp || rp < lp)
		return -EINVAL;
	len = (size_t)(rp - lp - 1);
	if (len > 15)
		len = 15;
	memcpy(comm, lp + 1, len);
	comm[len] = '\0';
	/* ") S ppid ...": the state is field 3, starttime field 22. */
	p = rp + 1;
	for (field = 3; field <= 22; field++) {
		char *end;
		unsigned long long v;

		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			return -EINVAL;
		if (field < 22) {
			p += strcspn(p, " ");
			continue;
		}
		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		*start_ticks = v;
	}
	return 0;
}

/* ---------------------------------------------------------------- TCP byte counts */

/*
 * TCP states as tcpi_state reports them (include/net/tcp_states.h). <netinet/tcp.h> has them
 * too, but it cannot be included with <linux/tcp.h>, whose struct tcp_info is the only one
 * with the byte counters.
 */
enum {
	SAN_TCP_ESTABLISHED = 1,
	SAN_TCP_SYN_SENT = 2,
	SAN_TCP_FIN_WAIT1 = 4,
	SAN_TCP_FIN_WAIT2 = 5,
	SAN_TCP_TIME_WAIT = 6,
	SAN_TCP_CLOSE = 7,
	SAN_TCP_CLOSE_WAIT = 8,
	SAN_TCP_LAST_ACK = 9,
	SAN_TCP_CLOSING = 11,
};

/*
 * The kernel counts sequence space, not payload: bytes_acked includes the active side's SYN
 * (acked at once when the connection is established) and our FIN once acked; bytes_received
 * includes the peer's FIN once received. Payload is therefore:
 *  - tx: bytes_sent - bytes_retrans (data put on the wire once; no SYN or FIN in it) plus
 *    notsent_bytes (queued at close, sent after it). On kernels without those fields
 *    (< 4.19): bytes_acked minus the SYN and minus our FIN where the state shows it acked.
 *  - rx: bytes_received minus the peer's FIN where the state shows it received.
 * In state CLOSE the state no longer tells whether a FIN or a RST ended the connection, so
 * there a count may include one FIN byte: never less than the payload, at most one more.
 * An active connection whose SYN was never acked (refused, timed out, abandoned) was no
 * connection at all.
 */
bool san_stats_tcp_payload(const struct san_tcp_counts *tc, bool active, uint64_t *tx, uint64_t *rx)
{
	bool fin_in, fin_out_acked;
	uint64_t t, r;

	if (active && (tc->bytes_acked == 0 || tc->state == SAN_TCP_SYN_SENT))
		return false;
	fin_in = tc->state == SAN_TCP_CLOSE_WAIT || tc->state == SAN_TCP_LAST_ACK ||
		 tc->state == SAN_TCP_CLOSING || tc->state == SAN_TCP_TIME_WAIT;
	fin_out_acked = tc->state == SAN_TCP_FIN_WAIT2 || tc->state == SAN_TCP_TIME_WAIT;

	r = tc->bytes_received;
	if (fin_in && r > 0)
		r--;
	if (tc->have_sent) {
		t = tc->bytes_sent >= tc->bytes_retrans ? tc->bytes_sent - tc->bytes_retrans : 0;
		t += tc->notsent_bytes;
	} else {
		t = tc->bytes_acked;
		if (active && t > 0)
			t--;
		if (fin_out_acked && t > 0)
			t--;
	}
	*tx = t;
	*rx = r;
	return true;
}

/* ---------------------------------------------------------------- the exit line */

size_t san_stats_format_line(char *buf, size_t size, const struct san_stats_file *f)
{
	size_t len = 0;
	unsigned int i;
	int n;

	if (size < 2)
		return 0;
	n = snprintf(buf, size - 1, "sanswitch: pid=%d", (int)f->hdr.pid);
	len = n > 0 ? (size_t)n : 0;
	for (i = 0; i < SAN_STAT_NR && len < size - 1; i++) {
		n = snprintf(buf + len, size - 1 - len, " %s=%" PRIu64,
			     san_stat_name((enum san_stat)i),
			     __atomic_load_n(&f->counters[i], __ATOMIC_RELAXED));
		len += n > 0 ? (size_t)n : 0;
	}
	for (i = 0; i < SAN_FB_SLOTS && len < size - 1; i++) {
		uint64_t v = __atomic_load_n(&f->fallback[i], __ATOMIC_RELAXED);

		if (!v)
			continue;
		n = snprintf(buf + len, size - 1 - len, " fallback_%s=%" PRIu64, san_fb_name(i), v);
		len += n > 0 ? (size_t)n : 0;
	}
	if (len > size - 2)
		len = size - 2; /* truncated: still one line */
	buf[len++] = '\n';
	buf[len] = '\0';
	return len;
}

/* ---------------------------------------------------------------- reading a file */

#define SAN_STATS_READ_MAX (4u << 20) /* a file larger than this is no stats file */
#define SAN_STATS_READ_TRIES 4	      /* double reads before a torn slot is left out */

/* The whole file at @fd into @buf (@len bytes); 0 or -errno, -EPROTO if it is shorter now. */
static int san_stats_pread_all(int fd, unsigned char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPROTO; /* truncated under us */
		got += (size_t)n;
	}
	return 0;
}

/* Do the header's sizes describe a file of @size bytes that this build can read? */
static bool san_stats_hdr_sane(const struct san_stats_hdr *h, size_t size)
{
	uint64_t counts_end, conns_end;

	if (h->magic != SAN_STATS_MAGIC || h->version != SAN_STATS_VERSION ||
	    h->hdr_len < sizeof(*h) || h->hdr_len % 8 || h->nr_counters > 4096 ||
	    h->nr_reasons > 4096 || h->nr_conns > 65536 ||
	    h->conn_len < sizeof(struct san_stats_conn) || h->conn_len > 4096 || h->conn_len % 8 ||
	    h->conn_off % 8)
		return false;
	counts_end = (uint64_t)h->hdr_len + 8 * ((uint64_t)h->nr_counters + h->nr_reasons);
	conns_end = (uint64_t)h->conn_off + (uint64_t)h->nr_conns * h->conn_len;
	return counts_end <= size && h->conn_off >= counts_end && conns_end <= size;
}

/* Is this record, copied whole, one that a writer of this layout can have made? */
static bool san_stats_conn_sane(const struct san_stats_conn *c)
{
	return c->fd >= 0 && c->state > SAN_CS_FREE && c->state < SAN_CS_NR &&
	       (c->role == SAN_ROLE_CLIENT || c->role == SAN_ROLE_SERVER) && c->prov < SAN_CP_NR &&
	       c->addr_known <= (SAN_CA_LOCAL | SAN_CA_PEER);
}

/*
 * The slots of @a, a copy of the file, whose records were whole: @b is a second copy made
 * after it, and a slot whose seq is the same even value in both was not written while @a was
 * copied (a read copies the file from its start, seq first in each slot). @a's counters are
 * taken, they were copied inside that window. Returns how many slots in use were torn.
 */
static unsigned int san_stats_take_conns(const unsigned char *a, const unsigned char *b,
					 const struct san_stats_hdr *h, struct san_stats_file *out,
					 unsigned int *bad)
{
	unsigned int n = h->nr_conns < SAN_STATS_CONNS ? h->nr_conns : SAN_STATS_CONNS;
	unsigned int i, torn = 0;

	*bad = 0;
	for (i = 0; i < n; i++) {
		struct san_stats_conn ca, cb;
		size_t off = h->conn_off + (size_t)i * h->conn_len;

		memcpy(&ca, a + off, sizeof(ca));
		memcpy(&cb, b + off, sizeof(cb));
		memset(&out->conns[i], 0, sizeof(out->conns[i]));
		if ((ca.seq & 1) || ca.seq != cb.seq) {
			torn += ca.state != SAN_CS_FREE || cb.state != SAN_CS_FREE;
			continue;
		}
		if (ca.state == SAN_CS_FREE)
			continue;
		if (!san_stats_conn_sane(&ca)) {
			(*bad)++;
			continue;
		}
		out->conns[i] = ca;
	}
	return torn;
}

int san_stats_file_read(const char *path, struct san_stats_file *out, unsigned int *skipped)
{
	unsigned char *a = NULL, *b = NULL;
	struct san_stats_hdr h;
	unsigned int torn = 0, bad = 0, tries;
	struct stat st;
	size_t size;
	int fd, err;

	if (skipped)
		*skipped = 0;
	/* O_NONBLOCK: a FIFO put there under our name must not hang the reader */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	err = -EPROTO;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(h) ||
	    st.st_size > (off_t)SAN_STATS_READ_MAX)
		goto out;
	size = (size_t)st.st_size;
	a = malloc(size);
	b = malloc(size);
	if (!a || !b) {
		err = -ENOMEM;
		goto out;
	}
	for (tries = 0; tries < SAN_STATS_READ_TRIES; tries++) {
		if ((err = san_stats_pread_all(fd, a, size)) ||
		    (err = san_stats_pread_all(fd, b, size)))
			goto out;
		memcpy(&h, a, sizeof(h));
		err = h.magic == SAN_STATS_MAGIC && h.version != SAN_STATS_VERSION
			      ? -EPROTONOSUPPORT
			      : -EPROTO;
		if (!san_stats_hdr_sane(&h, size))
			goto out;
		memset(out, 0, sizeof(*out));
		memcpy(&out->hdr, &h, sizeof(h));
		out->hdr.nr_counters =
			h.nr_counters < SAN_STATS_COUNTERS ? h.nr_counters : SAN_STATS_COUNTERS;
		out->hdr.nr_reasons = h.nr_reasons < SAN_FB_SLOTS ? h.nr_reasons : SAN_FB_SLOTS;
		out->hdr.nr_conns = h.nr_conns < SAN_STATS_CONNS ? h.nr_conns : SAN_STATS_CONNS;
		/* (what this build's reader hands on: its own layout) */
		out->hdr.hdr_len = sizeof(h);
		out->hdr.conn_len = sizeof(struct san_stats_conn);
		out->hdr.conn_off = offsetof(struct san_stats_file, conns);
		memcpy(out->counters, a + h.hdr_len, 8 * (size_t)out->hdr.nr_counters);
		memcpy(out->fallback, a + h.hdr_len + 8 * (size_t)h.nr_counters,
		       8 * (size_t)out->hdr.nr_reasons);
		out->hdr.comm[sizeof(out->hdr.comm) - 1] = '\0'; /* a foreign file's may not end */
		torn = san_stats_take_conns(a, b, &h, out, &bad);
		err = 0;
		if (!torn)
			break;
	}
	if (skipped)
		*skipped = torn + bad;
out:
	free(a);
	free(b);
	close(fd);
	return err;
}
