/* sanstat — the connections of processes running libsanswitch, read from their stats files. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/san_stats.h"

/*
 * Each process running the library keeps its counters and a slot per connection in
 * DIR/sanswitch.<pid> (core/san_stats.h; docs/sanstat.md). This reads those files, never
 * writes or locks them, and asks the kernel about what the library does not record: the
 * addresses of a connection that never came near a switch, and the bytes of one that stays
 * on TCP (the library does not count a pass-through fd's calls). Both come from the
 * connection's socket inode (/proc/PID/fd/FD) looked up in a sock_diag dump of the TCP
 * sockets of our network namespace. Exit: 0, 1 (nothing to read, or an error), 2 (usage).
 */

#define EXIT_USAGE 2

struct opts {
	const char *dir;
	pid_t pid; /* 0: every process */
	int port;  /* -1: any */
	int state; /* -1: any, else enum san_stats_cstate */
	bool json;
	bool summary;
	double interval; /* 0: once */
	long count;	 /* repetitions with -i; 0: until interrupted */
};

/* ---------------------------------------------------------------- the kernel's view */

/* One TCP socket of our network namespace, as sock_diag reports it. */
struct ksock {
	uint64_t ino;
	uint8_t local[16], peer[16]; /* IPv4 as ::ffff:a.b.c.d */
	uint16_t lport, pport;
	bool have_info;
	struct san_tcp_counts tc;
};

static struct ksock *ks;
static size_t nks, cap_ks;

static void v4_mapped(uint8_t out[16], const uint32_t *in, int family)
{
	memset(out, 0, 16);
	if (family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, in, 4);
	} else {
		memcpy(out, in, 16);
	}
}

static void ksock_add(const struct inet_diag_msg *m, size_t len)
{
	const struct rtattr *a = (const void *)(m + 1);
	size_t rest = len - sizeof(*m);
	struct ksock *k;

	if (!m->idiag_inode)
		return; /* a socket no process holds (TIME_WAIT, orphans) */
	if (nks == cap_ks) {
		size_t ncap = cap_ks ? 2 * cap_ks : 256;
		struct ksock *n = realloc(ks, ncap * sizeof(*n));

		if (!n)
			return; /* (a connection then shows without the kernel's figures) */
		ks = n;
		cap_ks = ncap;
	}
	k = &ks[nks++];
	memset(k, 0, sizeof(*k));
	k->ino = m->idiag_inode;
	v4_mapped(k->local, m->id.idiag_src, m->idiag_family);
	v4_mapped(k->peer, m->id.idiag_dst, m->idiag_family);
	k->lport = ntohs(m->id.idiag_sport);
	k->pport = ntohs(m->id.idiag_dport);
	for (; RTA_OK(a, rest); a = RTA_NEXT(a, rest)) {
		struct tcp_info ti;
		size_t n = RTA_PAYLOAD(a);

		if (a->rta_type != INET_DIAG_INFO)
			continue;
		memset(&ti, 0, sizeof(ti));
		memcpy(&ti, RTA_DATA(a), n < sizeof(ti) ? n : sizeof(ti));
		k->tc.state = ti.tcpi_state;
		k->tc.bytes_acked = ti.tcpi_bytes_acked;
		k->tc.bytes_received = ti.tcpi_bytes_received;
		if (n >= offsetof(struct tcp_info, tcpi_notsent_bytes) + 4) {
			k->tc.have_sent = true;
			k->tc.bytes_sent = ti.tcpi_bytes_sent;
			k->tc.bytes_retrans = ti.tcpi_bytes_retrans;
			k->tc.notsent_bytes = ti.tcpi_notsent_bytes;
		}
		k->have_info = n >= offsetof(struct tcp_info, tcpi_bytes_received) + 8;
	}
}

/* Every TCP socket of @family in our network namespace, with its tcp_info. 0 or -errno. */
static int kernel_dump(int family)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	static char buf[32768];
	int fd, err = 0;
	bool done = false;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.r.sdiag_family = (uint8_t)family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_ext = 1u << (INET_DIAG_INFO - 1);
	req.r.idiag_states = ~0u;
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		goto out;
	}
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h = (const void *)buf;
		size_t len;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		len = (size_t)n;
		for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				err = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error
					      ? e->error
					      : -EIO;
				done = true;
				break;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
			    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				ksock_add(NLMSG_DATA(h), h->nlmsg_len - NLMSG_LENGTH(0));
		}
	}
out:
	close(fd);
	return err;
}

static int ksock_cmp(const void *a, const void *b)
{
	const struct ksock *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static bool kernel_warned;

static void kernel_load(void)
{
	int e4, e6;

	nks = 0;
	e4 = kernel_dump(AF_INET);
	e6 = kernel_dump(AF_INET6);
	if ((e4 || e6) && !kernel_warned) {
		fprintf(stderr,
			"sanstat: the kernel's socket table (sock_diag) could not be read: %s; "
			"connections the library has no addresses for show none\n",
			strerror(-(e4 ? e4 : e6)));
		kernel_warned = true;
	}
	qsort(ks, nks, sizeof(*ks), ksock_cmp);
}

/* The TCP socket behind fd @fd of process @pid, if it is one the dump has. */
static const struct ksock *kernel_find(pid_t pid, int fd)
{
	char path[64], link[64];
	struct ksock key;
	unsigned long long ino;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return NULL;
	link[n] = '\0';
	if (sscanf(link, "socket:[%llu]", &ino) != 1)
		return NULL; /* a switched fd is the notification socket: the slot says */
	key.ino = ino;
	return bsearch(&key, ks, nks, sizeof(*ks), ksock_cmp);
}

/* ---------------------------------------------------------------- one connection */

/* What is shown of a connection: the slot, completed from the kernel where it is silent. */
struct row {
	pid_t pid;
	const char *comm;
	const struct san_stats_conn *c;
	char local[64], peer[64];
	uint16_t lport, pport;
	bool have_local, have_peer;
	uint64_t tcp_tx, tcp_rx;
	bool tcp_kernel; /* the TCP figures are the kernel's (a connection on TCP) */
};

static void fmt_addr(char *out, size_t size, const uint8_t a[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(a, mapped, 12))
		inet_ntop(AF_INET, a + 12, out, (socklen_t)size);
	else
		inet_ntop(AF_INET6, a, out, (socklen_t)size);
}

static void row_fill(struct row *r, pid_t pid, const char *comm, const struct san_stats_conn *c,
		     bool same_ns)
{
	const struct ksock *k = same_ns ? kernel_find(pid, c->fd) : NULL;
	bool on_tcp = c->state == SAN_CS_CANDIDATE || c->state == SAN_CS_FALLBACK;

	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->comm = comm;
	r->c = c;
	if (c->addr_known & SAN_CA_LOCAL) {
		fmt_addr(r->local, sizeof(r->local), c->local_addr);
		r->lport = c->local_port;
		r->have_local = true;
	} else if (k) {
		fmt_addr(r->local, sizeof(r->local), k->local);
		r->lport = k->lport;
		r->have_local = true;
	}
	if (c->addr_known & SAN_CA_PEER) {
		fmt_addr(r->peer, sizeof(r->peer), c->peer_addr);
		r->pport = c->peer_port;
		r->have_peer = true;
	} else if (k) {
		fmt_addr(r->peer, sizeof(r->peer), k->peer);
		r->pport = k->pport;
		r->have_peer = true;
	}
	r->tcp_tx = c->tcp_tx;
	r->tcp_rx = c->tcp_rx;
	/*
	 * On TCP the kernel's counts are the whole truth: the library stops counting a connection
	 * that falls back (its calls pass through). Switched, the slot's are: the TCP socket left
	 * behind (the anchor) also carried the switch's own marks.
	 */
	if (on_tcp && k && k->have_info) {
		uint64_t tx, rx;

		if (san_stats_tcp_payload(&k->tc, c->role == SAN_ROLE_CLIENT, &tx, &rx)) {
			r->tcp_tx = tx;
			r->tcp_rx = rx;
			r->tcp_kernel = true;
		}
	}
}

static bool row_wanted(const struct row *r, const struct opts *o)
{
	if (o->state >= 0 && r->c->state != o->state)
		return false;
	if (o->port >= 0 &&
	    !((r->have_local && r->lport == o->port) || (r->have_peer && r->pport == o->port)))
		return false;
	return true;
}

static void endpoint(char *out, size_t size, bool have, const char *addr, uint16_t port)
{
	if (!have)
		snprintf(out, size, "*");
	else if (strchr(addr, ':'))
		snprintf(out, size, "[%s]:%u", addr, port);
	else
		snprintf(out, size, "%s:%u", addr, port);
}

static void print_header(void)
{
	printf("%-10s %-5s %-6s %-28s %-28s %5s %-22s %14s %14s %14s %14s %s\n", "State", "Prov",
	       "Role", "Local", "Peer", "Fd", "Pid/Program", "SAN-tx", "SAN-rx", "TCP-tx", "TCP-rx",
	       "Reason");
}

static void print_row(const struct row *r)
{
	char l[96], p[96], who[48];
	const struct san_stats_conn *c = r->c;
	bool show_reason = c->state != SAN_CS_SWITCHED && c->reason;

	endpoint(l, sizeof(l), r->have_local, r->local, r->lport);
	endpoint(p, sizeof(p), r->have_peer, r->peer, r->pport);
	snprintf(who, sizeof(who), "%d/%s", (int)r->pid, r->comm);
	printf("%-10s %-5s %-6s %-28s %-28s %5d %-22s %14" PRIu64 " %14" PRIu64 " %14" PRIu64
	       " %14" PRIu64 " %s\n",
	       san_conn_state_name(c->state), san_conn_prov_name(c->prov),
	       san_conn_role_name(c->role), l, p, c->fd, who, c->san_tx, c->san_rx, r->tcp_tx,
	       r->tcp_rx, show_reason ? san_fb_name(c->reason) : "-");
}

/* @s as a JSON string (comm may hold anything but NUL). */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f) /* (above 0x7f as Latin-1: valid JSON always) */
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_row(const struct row *r, bool first)
{
	const struct san_stats_conn *c = r->c;

	printf("%s{\"fd\":%d,\"state\":\"%s\",\"provider\":\"%s\",\"role\":\"%s\",",
	       first ? "" : ",", c->fd, san_conn_state_name(c->state), san_conn_prov_name(c->prov),
	       san_conn_role_name(c->role));
	printf("\"local\":");
	if (r->have_local)
		printf("{\"addr\":\"%s\",\"port\":%u}", r->local, r->lport);
	else
		printf("null");
	printf(",\"peer\":");
	if (r->have_peer)
		printf("{\"addr\":\"%s\",\"port\":%u}", r->peer, r->pport);
	else
		printf("null");
	printf(",\"san_tx_bytes\":%" PRIu64 ",\"san_rx_bytes\":%" PRIu64
	       ",\"tcp_tx_bytes\":%" PRIu64 ",\"tcp_rx_bytes\":%" PRIu64
	       ",\"tcp_bytes_from\":\"%s\"",
	       c->san_tx, c->san_rx, r->tcp_tx, r->tcp_rx, r->tcp_kernel ? "kernel" : "library");
	printf(",\"fallback_reason\":");
	if (c->state != SAN_CS_SWITCHED && c->reason)
		printf("\"%s\"", san_fb_name(c->reason));
	else
		printf("null");
	printf(",\"generation\":%u}", c->gen);
}

/* ---------------------------------------------------------------- one process */

/* The process a file names, as far as this reader can tell. */
struct proc {
	pid_t pid;
	char comm[64];
	bool same_ns; /* its pid is one of our pid namespace (its /proc is readable) */
	bool alive;   /* that pid runs, and is the process that made the file */
};

static uint64_t own_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) ? 0 : (uint64_t)st.st_ino;
}

/* Is @f's process alive here, and what is its name now? */
static void proc_look(const struct san_stats_file *f, struct proc *p)
{
	char path[64], line[1024], comm[16];
	uint64_t start = 0;
	FILE *s;

	p->pid = f->hdr.pid;
	snprintf(p->comm, sizeof(p->comm), "%s", f->hdr.comm);
	p->same_ns = f->hdr.pidns && f->hdr.pidns == own_pidns();
	p->alive = !p->same_ns; /* another namespace's process: not ours to judge */
	if (!p->same_ns)
		return;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)f->hdr.pid);
	s = fopen(path, "re");
	if (!s)
		return;
	if (fgets(line, sizeof(line), s) && !san_stats_parse_procstat(line, comm, &start) &&
	    (!f->hdr.start_ticks || start == f->hdr.start_ticks)) {
		p->alive = true;
		snprintf(p->comm, sizeof(p->comm), "%s", comm); /* the name after an exec */
	}
	fclose(s);
}

static void print_summary_text(const struct san_stats_file *f, const struct proc *p,
			       unsigned int shown, unsigned int skipped)
{
	char line[4096];

	san_stats_format_line(line, sizeof(line), f);
	printf("%d/%s: %u connection%s open", (int)p->pid, p->comm, shown, shown == 1 ? "" : "s");
	if (f->hdr.conn_overflow)
		printf(", %" PRIu64 " more without a slot", f->hdr.conn_overflow);
	if (skipped)
		printf(", %u record%s unreadable", skipped, skipped == 1 ? "" : "s");
	/* the exit line's fields, without its "sanswitch: pid=N" */
	printf("\n   %s", strchr(line, ' ') ? strchr(strchr(line, ' ') + 1, ' ') + 1 : line);
}

static void print_summary_json(const struct san_stats_file *f)
{
	unsigned int i;
	bool first = true;

	printf(",\"counters\":{");
	for (i = 0; i < SAN_STAT_NR; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", san_stat_name((enum san_stat)i),
		       f->counters[i]);
	printf("},\"fallback\":{");
	for (i = 0; i < SAN_FB_SLOTS; i++) {
		if (!f->fallback[i])
			continue;
		printf("%s\"%s\":%" PRIu64, first ? "" : ",", san_fb_name(i), f->fallback[i]);
		first = false;
	}
	printf("}");
}

/* State of one pass over the directory. */
struct pass {
	const struct opts *o;
	unsigned int files, rows, procs_json; /* files: of live processes, shown or filtered out */
	bool header_done;
};

/* Does the file hold a connection that the options' filters keep? */
static bool file_has_wanted(const struct san_stats_file *f, const struct proc *p,
			    const struct opts *o)
{
	for (unsigned int i = 0; i < f->hdr.nr_conns && i < SAN_STATS_CONNS; i++) {
		struct row r;

		if (f->conns[i].state == SAN_CS_FREE)
			continue;
		row_fill(&r, p->pid, p->comm, &f->conns[i], p->same_ns);
		if (row_wanted(&r, o))
			return true;
	}
	return false;
}

static void show_file(struct pass *ps, const char *path, const struct san_stats_file *f,
		      unsigned int skipped)
{
	const struct opts *o = ps->o;
	struct proc p;
	unsigned int i, shown = 0;
	bool first = true;

	proc_look(f, &p);
	if (!p.alive)
		return; /* a killed process's leftover: the next process of its user removes it */
	ps->files++;
	if ((o->port >= 0 || o->state >= 0) && !file_has_wanted(f, &p, o))
		return; /* a filter on connections shows only the processes that have one */
	if (o->json) {
		printf("%s{\"pid\":%d,\"comm\":", ps->procs_json++ ? "," : "", (int)p.pid);
		json_str(p.comm);
		printf(",\"file\":");
		json_str(path);
		printf(",\"conn_overflow\":%" PRIu64 ",\"unreadable_records\":%u,\"connections\":[",
		       f->hdr.conn_overflow, skipped);
	}
	for (i = 0; i < f->hdr.nr_conns && i < SAN_STATS_CONNS; i++) {
		struct row r;

		if (f->conns[i].state == SAN_CS_FREE)
			continue;
		row_fill(&r, p.pid, p.comm, &f->conns[i], p.same_ns);
		if (!row_wanted(&r, o))
			continue;
		shown++;
		ps->rows++;
		if (o->json) {
			json_row(&r, first);
			first = false;
		} else if (!o->summary) {
			if (!ps->header_done)
				print_header();
			ps->header_done = true;
			print_row(&r);
		}
	}
	if (o->json) {
		printf("]");
		if (o->summary)
			print_summary_json(f);
		printf("}");
	} else if (o->summary) {
		print_summary_text(f, &p, shown, skipped);
	}
}

/* One file: read, check, show. A file that is not one we can read is skipped with a note. */
static void do_file(struct pass *ps, const char *dir, const char *name)
{
	static struct san_stats_file f;
	char path[PATH_MAX], want[32];
	unsigned int skipped;
	int err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	err = san_stats_file_read(path, &f, &skipped);
	if (err == -EACCES || err == -EPERM) {
		/* another user's (mode 0600): only root sees every process; say so for -p */
		if (ps->o->pid)
			fprintf(stderr, "sanstat: %s: %s (another user's process: run as root)\n",
				path, strerror(-err));
		return;
	}
	if (err == -ENOENT)
		return; /* the process exited meanwhile */
	if (err == -EPROTONOSUPPORT) {
		fprintf(stderr,
			"sanstat: %s: skipped: made by another version of libsanswitch "
			"(this sanstat reads file version %d)\n",
			path, SAN_STATS_VERSION);
		return;
	}
	if (err == -EPROTO) {
		fprintf(stderr, "sanstat: %s: skipped: not a stats file (bad header or sizes)\n",
			path);
		return;
	}
	if (err) {
		fprintf(stderr, "sanstat: %s: skipped: %s\n", path, strerror(-err));
		return;
	}
	snprintf(want, sizeof(want), "sanswitch.%d", (int)f.hdr.pid);
	if (strcmp(want, name)) {
		fprintf(stderr, "sanstat: %s: skipped: it says it is pid %d's\n", path,
			(int)f.hdr.pid);
		return;
	}
	if (ps->o->pid && f.hdr.pid != ps->o->pid)
		return;
	show_file(ps, path, &f, skipped);
}

/* A file name of the library's: sanswitch.<pid>, pid a positive decimal number. */
static bool stats_name(const char *name, long *pid)
{
	char *end;

	if (strncmp(name, "sanswitch.", 10) || name[10] < '1' || name[10] > '9')
		return false;
	errno = 0;
	*pid = strtol(name + 10, &end, 10);
	return !*end && !errno && *pid > 0 && *pid <= INT_MAX;
}

/* One look at every file. 0, or 1 when the directory cannot be read or -p found nothing. */
static int one_pass(const struct opts *o)
{
	struct pass ps = { .o = o };
	struct dirent *d;
	DIR *dir;

	dir = opendir(o->dir);
	if (!dir) {
		fprintf(stderr, "sanstat: cannot read the directory %s: %s\n", o->dir,
			strerror(errno));
		return 1;
	}
	kernel_load();
	if (o->json) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		printf("{\"time_ns\":%" PRIu64 ",\"processes\":[",
		       (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	}
	while ((d = readdir(dir))) {
		long pid;

		if (!stats_name(d->d_name, &pid) || (o->pid && pid != o->pid))
			continue;
		do_file(&ps, o->dir, d->d_name);
	}
	closedir(dir);
	if (o->json)
		printf("]}\n");
	if (o->pid && !ps.files) {
		fflush(stdout);
		fprintf(stderr,
			"sanstat: no stats file for pid %d in %s (not running under "
			"libsanswitch, SANSWITCH_STATS=0, no TCP socket yet, or another user's)\n",
			(int)o->pid, o->dir);
		return 1;
	}
	if (!o->json && !o->summary && !ps.header_done)
		print_header(); /* (no connection: the header alone, as ss prints it) */
	fflush(stdout);
	return 0;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: sanstat [options]\n"
		"  one line per connection of the processes running libsanswitch (sanstat(8))\n"
		"  -p, --pid PID        only that process\n"
		"      --port N         only connections with local or peer port N\n"
		"      --state S        only connections in state S: candidate, upgrading,\n"
		"                       switched, fallback, closing\n"
		"  -s, --summary        per process: its counters (the exit line's), no "
		"connections\n"
		"  -j, --json           JSON (one document per look)\n"
		"  -i, --interval SECS  look again every SECS seconds (until interrupted)\n"
		"  -c, --count N        with -i: N looks, then exit\n"
		"  -d, --dir DIR        where the files are (default %s)\n"
		"  -h, --help           this text\n",
		SAN_STATS_DIR);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return *s && !*end && !errno && *out >= lo && *out <= hi;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "port", required_argument, NULL, 'P' },
		{ "state", required_argument, NULL, 'S' },
		{ "summary", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;
	long v;

	*o = (struct opts){ .dir = SAN_STATS_DIR, .port = -1, .state = -1 };
	while ((ch = getopt_long(argc, argv, "p:sji:c:d:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (!parse_long(optarg, 1, INT_MAX, &v)) {
				fprintf(stderr, "sanstat: -p %s: not a process id\n", optarg);
				return EXIT_USAGE;
			}
			o->pid = (pid_t)v;
			break;
		case 'P':
			if (!parse_long(optarg, 0, 65535, &v)) {
				fprintf(stderr, "sanstat: --port %s: not a port (0-65535)\n",
					optarg);
				return EXIT_USAGE;
			}
			o->port = (int)v;
			break;
		case 'S':
			for (o->state = SAN_CS_CANDIDATE; o->state < SAN_CS_NR; o->state++)
				if (!strcmp(optarg, san_conn_state_name((unsigned int)o->state)))
					break;
			if (o->state == SAN_CS_NR) {
				fprintf(stderr,
					"sanstat: --state %s: want candidate, upgrading, "
					"switched, fallback or closing\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			o->summary = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'i': {
			char *end;

			errno = 0;
			o->interval = strtod(optarg, &end);
			if (!*optarg || *end || errno ||
			    !(o->interval > 0 && o->interval <= 86400)) {
				fprintf(stderr, "sanstat: -i %s: want seconds, above 0\n", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'c':
			if (!parse_long(optarg, 1, LONG_MAX, &v)) {
				fprintf(stderr, "sanstat: -c %s: want a count above 0\n", optarg);
				return EXIT_USAGE;
			}
			o->count = v;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sanstat: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (o->count && !o->interval) {
		fprintf(stderr, "sanstat: -c needs -i\n");
		return EXIT_USAGE;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_opts(argc, argv, &o);
	long n;

	if (rc)
		return rc;
	signal(SIGPIPE, SIG_DFL); /* `sanstat -i 1 | head` ends quietly */
	for (n = 1;; n++) {
		struct timespec ts;

		rc = one_pass(&o);
		if (!o.interval || (o.count && n >= o.count))
			break;
		if (!o.json)
			putchar('\n');
		ts.tv_sec = (time_t)o.interval;
		ts.tv_nsec = (long)((o.interval - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	return rc;
}
