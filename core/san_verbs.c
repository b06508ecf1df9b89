/* core — verbs transport: rdma_cm set-up, RC SENDs into posted slots, credits of protocol §11. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "core/san_linkrate.h"
#include "core/san_log.h"
#include "core/san_rdma_syms.h"
#include "core/san_sig.h"
#include "core/san_verbs.h"
#include "core/san_vpool.h"
#include "proto/san_credit.h"
#include "proto/san_wire.h"

#define DEF_NRECV 64
#define DEF_THRESHOLD 16
#define DEF_NSEND 64
#define DEF_MAX_MSG (4096 + 16)
#define MAX_MSG_LIMIT (1u << 24) /* SAN_MSG_MAX */
#define WANT_INLINE 256		 /* asked of the QP; the device may give less */
#define HELLO_BODY 12		 /* pool, threshold, max_msg: 3 x u32 little endian */
#define WC_BATCH 32
#define DEF_NRDMA 16
#define RDMA_TAG (1ULL << 63) /* wr_id of a READ/WRITE: tag | its entry in rdma_cookie */
#define CM_RETRIES 7	      /* transport retries and RNR retries (7: RNR retry forever) */

struct san_verbs_listener {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct san_verbs_params p;
};

struct san_verbs_conn {
	struct rdma_event_channel *ech; /* this connection's own CM events */
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *area;
	size_t area_len, slot_size;
	struct san_vpool pool;
	bool pool_ok;
	struct san_credit cr;
	struct san_verbs_params p;
	uint32_t max_inline, peer_max_msg;
	int err;	/* sticky: -ECONNRESET, -EPROTO, ... once broken */
	bool connected; /* ESTABLISHED seen: close must disconnect */
	bool accepting; /* accepted without waiting: ESTABLISHED comes through san_verbs_poll */
	bool peer_gone; /* DISCONNECTED seen: broken once the CQ is drained */
	struct ibv_wc wc[WC_BATCH];
	int nwc, iwc; /* polled completions not yet processed: wc[iwc .. nwc) */
	uint64_t msgs_tx, msgs_rx, updates_tx, updates_rx, inline_tx, credit_waits;
	/* SENDs posted, and completed with success: RC completes a send queue in order */
	uint64_t sends_posted, sends_done;
	/* Held receive slots (san_verbs_hold/release): cur is the slot being delivered to the
	 * callback (-1 outside it), cur_held whether the callback kept it. */
	int64_t cur;
	bool cur_held;
	uint32_t nheld;
	uint64_t holds, releases;
	/* RDMA READ/WRITE: nrdma entries; rdma_free is a stack of free entries. */
	uint64_t *rdma_cookie;
	uint32_t *rdma_free;
	uint32_t rdma_nfree;
	uint8_t rd_atom;
	san_verbs_rdma_cb rdma_cb;
	void *rdma_arg;
};

/* ---------------------------------------------------------------- helpers */

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before @deadline (-1: none), for poll(). */
static int left_ms(int64_t deadline)
{
	int64_t l;

	if (deadline < 0)
		return -1;
	l = deadline - now_ms();
	return l < 0 ? 0 : (l > 1000000000 ? 1000000000 : (int)l);
}

static int neg_errno(int fallback)
{
	return errno > 0 ? -errno : -fallback;
}

static int params_fix(const struct san_verbs_params *in, struct san_verbs_params *out)
{
	struct san_verbs_params p = in ? *in : (struct san_verbs_params){ 0 };

	if (!p.nrecv)
		p.nrecv = DEF_NRECV;
	if (!p.threshold)
		p.threshold = p.nrecv >= 2 * DEF_THRESHOLD + 1 ? DEF_THRESHOLD : (p.nrecv - 1) / 2;
	if (!p.nsend)
		p.nsend = DEF_NSEND;
	if (!p.max_msg)
		p.max_msg = DEF_MAX_MSG;
	if (!p.nrdma)
		p.nrdma = DEF_NRDMA;
	if (!san_credit_geometry_ok(p.nrecv, p.threshold) || p.max_msg > MAX_MSG_LIMIT ||
	    p.nsend > 1u << 16 || p.nrdma > 1u << 12)
		return -EINVAL;
	*out = p;
	return 0;
}

static int resolve(const char *addr, uint16_t port, bool passive, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	char serv[8];
	int rc;

	hints.ai_family = AF_UNSPEC;
	if (passive) {
		hints.ai_flags = AI_PASSIVE;
		if (!addr || !*addr) {
			addr = NULL;
			hints.ai_family = AF_INET;
		}
	}
	snprintf(serv, sizeof(serv), "%u", (unsigned)port);
	rc = getaddrinfo(addr, serv, &hints, &res);
	if (rc != 0 || !res)
		return rc == EAI_SYSTEM ? neg_errno(EINVAL) : -EHOSTUNREACH;
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* A CM event other than the one awaited, as an errno. */
static int cm_event_errno(const struct rdma_cm_event *ev)
{
	bool tmo = ev->status == -ETIMEDOUT || ev->status == ETIMEDOUT;

	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return tmo ? -ETIMEDOUT : -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
		return tmo ? -ETIMEDOUT : -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNABORTED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return -ECONNRESET;
	default:
		return -EPROTO;
	}
}

/*
 * Wait for the next CM event on @ech until @deadline (-1: none). 0 and *ev (the caller acks
 * it), -ETIMEDOUT, -errno.
 */
static int cm_next(struct rdma_event_channel *ech, int64_t deadline, struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd pfd = { .fd = ech->fd, .events = POLLIN };
		int n;

		if (san_rdma.rdma_get_cm_event(ech, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return neg_errno(EIO);
		n = poll(&pfd, 1, left_ms(deadline));
		if (n < 0 && errno == EINTR)
			san_sig_note_eintr(); /* a handler ran: the application's call learns it */
		else if (n < 0)
			return neg_errno(EIO);
		if (n == 0)
			return -ETIMEDOUT;
	}
}

/* Wait for event @want; any other event ends the wait with its errno. */
static int cm_expect(struct rdma_event_channel *ech, int64_t deadline, enum rdma_cm_event_type want,
		     struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;
	int rc = cm_next(ech, deadline, &ev);

	if (rc < 0)
		return rc;
	if (ev->event == want) {
		*out = ev;
		return 0;
	}
	rc = cm_event_errno(ev);
	san_debug("verbs: waiting for %s, got %s (status %d): %s", san_rdma.rdma_event_str(want),
		  san_rdma.rdma_event_str(ev->event), ev->status, strerror(-rc));
	san_rdma.rdma_ack_cm_event(ev);
	return rc;
}

static void copy_pdata(const struct rdma_conn_param *cp, void *buf, size_t *len)
{
	size_t n = cp->private_data ? cp->private_data_len : 0;

	if (!len)
		return;
	if (n > *len)
		n = *len;
	if (n && buf)
		memcpy(buf, cp->private_data, n);
	*len = n;
}

/* ---------------------------------------------------------------- resources */

/*
 * rdma-core's functions are called through san_rdma (core/san_rdma_syms.h), which the entry
 * points that start from nothing load (san_verbs_listen, san_verbs_connect, open_devices,
 * san_verbs_fork_unneeded): every other one takes a listener or connection that those made.
 * -ENODEV from the load reads as a host without rdma_cm. verbs.h's ibv_reg_mr and
 * ibv_query_port are macros over inline wrappers that call exported functions by name: these
 * two do what those do, through the table.
 */
static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	/* (never a flag of IBV_ACCESS_OPTIONAL_RANGE, for which the wrapper takes
	 * ibv_reg_mr_iova2) */
	return (san_rdma.ibv_reg_mr)(pd, addr, len, access);
}

static int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *pa)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (vctx)
		return vctx->query_port(ctx, port, pa, sizeof(*pa));
	memset(pa, 0, sizeof(*pa));
	return (san_rdma.ibv_query_port)(ctx, port, (struct _compat_ibv_port_attr *)pa);
}

static int post_recv(struct san_verbs_conn *c, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)san_vpool_addr(&c->pool, idx),
		.length = (uint32_t)c->slot_size,
		.lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	int rc = ibv_post_recv(c->qp, &wr, &bad);

	return rc ? -rc : 0;
}

/*
 * A fork child may not use a device context its parent opened: the kernel refuses write() on
 * a uverbs file opened under other credentials (ib_safe_file_access; a child's are a copy of
 * its parent's, not the same), and rxe rings its send doorbell by write() ("ibv_post_send
 * failed" at the first SEND). librdmacm opens a device's context once and keeps it for every
 * id of the process, so in a process that inherited rdma-core (a worker, a fork child of a
 * process that listened), each device gets a context of this process's own, opened here once,
 * and each id's QP is made on it (rdma_create_qp takes the id's context; the CM itself needs
 * none). NULL if none can be opened.
 */
#define OWN_CTX_MAX 8
static struct {
	pid_t pid;
	struct ibv_device *dev;
	struct ibv_context *ctx;
} own_ctxs[OWN_CTX_MAX];
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ibv_context *own_ctx(struct ibv_context *cm)
{
	struct ibv_context *r = NULL;
	pid_t me = getpid();
	int i, slot = -1;

	if (!san_rdma_inherited())
		return cm;
	pthread_mutex_lock(&own_lock);
	for (i = 0; i < OWN_CTX_MAX && !r; i++) {
		if (own_ctxs[i].pid == me && own_ctxs[i].dev == cm->device)
			r = own_ctxs[i].ctx;
		else if (own_ctxs[i].pid != me && slot < 0)
			slot = i; /* (an ancestor's entry: its context is not ours either) */
	}
	if (!r && slot >= 0) {
		r = san_rdma.ibv_open_device(cm->device);
		if (r) {
			own_ctxs[slot].pid = me;
			own_ctxs[slot].dev = cm->device;
			own_ctxs[slot].ctx = r;
			san_debug("verbs: a device context of this process's own (%s): rdma-core "
				  "was loaded before a fork", san_rdma.ibv_get_device_name(cm->device));
		}
	}
	pthread_mutex_unlock(&own_lock);
	return r;
}

/* PD, completion channel, CQ, QP, the registered slot area; all receives posted. */
static int conn_setup(struct san_verbs_conn *c, struct rdma_cm_id *id)
{
	struct ibv_context *ctx = id->verbs ? own_ctx(id->verbs) : NULL;
	uint32_t nslots = c->p.nrecv + c->p.nsend;
	struct ibv_qp_init_attr qa;
	int rc;

	if (!ctx)
		return -ENODEV;
	id->verbs = ctx; /* (rdma_create_qp makes the QP on the id's context) */
	c->id = id;
	id->context = c;
	c->slot_size = ((size_t)SAN_VERBS_HDR + c->p.max_msg + 63) & ~(size_t)63;
	c->area_len = c->slot_size * nslots;

	c->pd = san_rdma.ibv_alloc_pd(ctx);
	if (!c->pd)
		return neg_errno(ENOMEM);
	c->cch = san_rdma.ibv_create_comp_channel(ctx);
	if (!c->cch)
		return neg_errno(ENOMEM);
	rc = set_nonblock(c->cch->fd);
	if (rc < 0)
		return rc;
	c->rdma_cookie = calloc(c->p.nrdma, sizeof(*c->rdma_cookie));
	c->rdma_free = calloc(c->p.nrdma, sizeof(*c->rdma_free));
	if (!c->rdma_cookie || !c->rdma_free)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->p.nrdma; i++)
		c->rdma_free[c->rdma_nfree++] = c->p.nrdma - 1 - i;
	c->cq = san_rdma.ibv_create_cq(ctx, (int)(nslots + c->p.nrdma) + 1, c, c->cch, 0);
	if (!c->cq)
		return neg_errno(ENOMEM);

	for (int attempt = 0; attempt < 2; attempt++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_context = c;
		qa.send_cq = c->cq;
		qa.recv_cq = c->cq;
		qa.qp_type = IBV_QPT_RC;
		qa.sq_sig_all = 1;
		qa.cap.max_send_wr = c->p.nsend + c->p.nrdma;
		qa.cap.max_recv_wr = c->p.nrecv;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = attempt == 0 ? WANT_INLINE : 0;
		if (san_rdma.rdma_create_qp(id, c->pd, &qa) == 0)
			break;
		rc = neg_errno(ENOMEM);
		if (attempt == 1)
			return rc;
		san_debug("verbs: rdma_create_qp with inline %d: %s; retrying without", WANT_INLINE,
			  strerror(-rc));
	}
	c->qp = id->qp;
	c->max_inline = qa.cap.max_inline_data;

	if (posix_memalign((void **)&c->area, 4096, c->area_len) != 0) {
		c->area = NULL;
		return -ENOMEM;
	}
	memset(c->area, 0, c->area_len);
	c->mr = reg_mr(c->pd, c->area, c->area_len, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr) {
		char lim[32] = "?";
		struct rlimit rl;

		rc = neg_errno(ENOMEM);
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
			if (rl.rlim_cur == RLIM_INFINITY)
				snprintf(lim, sizeof(lim), "unlimited");
			else
				snprintf(lim, sizeof(lim), "%llu KiB",
					 (unsigned long long)rl.rlim_cur / 1024);
		}
		san_warn("verbs: cannot register %zu bytes of control slots: %s "
			 "(RLIMIT_MEMLOCK %s; raise ulimit -l)",
			 c->area_len, strerror(-rc), lim);
		return rc;
	}
	rc = san_vpool_init(&c->pool, c->area, c->area_len, c->slot_size, c->p.nrecv, c->p.nsend);
	if (rc < 0)
		return rc;
	c->pool_ok = true;
	rc = san_credit_init(&c->cr, c->p.nrecv, c->p.threshold);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < c->p.nrecv; i++) {
		rc = post_recv(c, i);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void conn_param_init(struct san_verbs_conn *c, struct rdma_conn_param *cp, const void *pdata,
			    size_t len)
{
	struct ibv_device_attr da;
	uint8_t rd = 1;

	if (san_rdma.ibv_query_device(c->id->verbs, &da) == 0) {
		int m = da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom
								   : da.max_qp_init_rd_atom;
		rd = (uint8_t)(m > 16 ? 16 : (m < 0 ? 0 : m));
	}
	c->rd_atom = rd;
	memset(cp, 0, sizeof(*cp));
	cp->private_data = pdata;
	cp->private_data_len = (uint8_t)len;
	cp->responder_resources = rd; /* RDMA READs the peer may have outstanding at us */
	cp->initiator_depth = rd;
	cp->flow_control = 1;
	cp->retry_count = CM_RETRIES;
	cp->rnr_retry_count = CM_RETRIES;
}

/* ---------------------------------------------------------------- sending */

static int broken(struct san_verbs_conn *c, int err, const char *why)
{
	if (!c->err) {
		c->err = err;
		/* the end of a connection is the caller's to judge (an orderly close ends so too) */
		if (err == -ECONNRESET)
			san_debug("verbs: connection down: %s", why);
		else
			san_warn("verbs: connection broken (%s): %s", strerror(-err), why);
	}
	return c->err;
}

/* One message of session type @type: header + @len bytes of @body, spending a credit. */
static int send_msg(struct san_verbs_conn *c, uint8_t type, const void *body, size_t len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	uint16_t returned = 0;
	int64_t idx;
	uint8_t *slot;
	int rc;

	if (c->err)
		return c->err;
	if (!san_can_send(&c->cr, type)) {
		if (type == SAN_T_DATA)
			c->credit_waits++;
		return -EAGAIN;
	}
	idx = san_vpool_send_get(&c->pool);
	if (idx < 0)
		return (int)idx;
	rc = san_credit_on_send(&c->cr, type, &returned);
	if (rc < 0) { /* cannot happen after san_can_send */
		san_vpool_send_put(&c->pool, (uint64_t)idx);
		return rc;
	}
	slot = san_vpool_addr(&c->pool, (uint64_t)idx);
	slot[0] = type;
	slot[1] = 0;
	slot[2] = (uint8_t)(returned & 0xff);
	slot[3] = (uint8_t)(returned >> 8);
	if (len)
		memcpy(slot + SAN_VERBS_HDR, body, len);

	sge.addr = (uintptr_t)slot;
	sge.length = (uint32_t)(SAN_VERBS_HDR + len);
	sge.lkey = c->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)idx;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (sge.length <= c->max_inline) {
		wr.send_flags |= IBV_SEND_INLINE;
		c->inline_tx++;
	}
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		/* The credit is spent and the returns are gone with it: the session cannot go on.
		 */
		san_vpool_send_put(&c->pool, (uint64_t)idx);
		return broken(c, -ECONNRESET, "ibv_post_send failed");
	}
	c->sends_posted++;
	if (type == SAN_T_CREDIT_UPDATE)
		c->updates_tx++;
	else if (type == SAN_T_DATA)
		c->msgs_tx++;
	return 0;
}

static int send_hello(struct san_verbs_conn *c)
{
	uint32_t b[3] = { htole32(c->p.nrecv), htole32(c->p.threshold), htole32(c->p.max_msg) };

	return send_msg(c, SAN_T_HELLO, b, sizeof(b));
}

/* An application's message, checked, as transport type @type (DATA, or READ_DONE: CTRL). */
static int send_app(struct san_verbs_conn *c, uint8_t type, const void *msg, size_t len)
{
	if (!c)
		return -EINVAL;
	if (c->err)
		return c->err;
	if (len == 0 || !msg)
		return -EINVAL;
	if (len > c->p.max_msg || (c->peer_max_msg && len > c->peer_max_msg))
		return -EMSGSIZE;
	return send_msg(c, type, msg, len);
}

int san_verbs_send(struct san_verbs_conn *c, const void *msg, size_t len)
{
	return send_app(c, SAN_T_DATA, msg, len);
}

int san_verbs_send_ctrl(struct san_verbs_conn *c, const void *msg, size_t len)
{
	return send_app(c, SAN_T_READ_DONE, msg, len);
}

int san_verbs_can_send(const struct san_verbs_conn *c)
{
	return c && !c->err && san_can_send(&c->cr, SAN_T_DATA) && c->pool.send_nfree > 0;
}

/* ---------------------------------------------------------------- completions */

static int on_recv(struct san_verbs_conn *c, const struct ibv_wc *wc, san_verbs_msg_cb cb,
		   void *arg)
{
	uint64_t idx = wc->wr_id;
	const uint8_t *m;
	uint32_t len = wc->byte_len, ppool = 0, pthr = 0, pmax = 0;
	uint16_t returned;
	uint8_t type;
	int rc, ret = 0;

	if (san_vpool_recv_take(&c->pool, idx) < 0)
		return broken(c, -EPROTO, "receive completion for a slot not posted");
	m = san_vpool_addr(&c->pool, idx);
	if (len < SAN_VERBS_HDR || len > c->slot_size)
		return broken(c, -EPROTO, "runt or oversized message");
	type = m[0];
	returned = (uint16_t)(m[2] | m[3] << 8);
	if (type == SAN_T_HELLO) {
		uint32_t b[3];

		if (len != SAN_VERBS_HDR + HELLO_BODY)
			return broken(c, -EPROTO, "HELLO of the wrong size");
		memcpy(b, m + SAN_VERBS_HDR, sizeof(b));
		ppool = le32toh(b[0]);
		pthr = le32toh(b[1]);
		pmax = le32toh(b[2]);
		if (pmax == 0 || pmax > MAX_MSG_LIMIT)
			return broken(c, -EPROTO, "HELLO with an impossible max_msg");
	} else if (type != SAN_T_DATA && type != SAN_T_READ_DONE && type != SAN_T_CREDIT_UPDATE) {
		return broken(c, -EPROTO, "unknown transport message type");
	}
	rc = san_credit_on_recv(&c->cr, type, returned, ppool, pthr);
	if (rc < 0) {
		san_warn("verbs: peer broke the credit rules (type 0x%02x, returned %u): %d", type,
			 returned, rc);
		return broken(c, -EPROTO, "credit violation");
	}
	if (type == SAN_T_HELLO) {
		c->peer_max_msg = pmax;
		san_debug("verbs: peer HELLO pool=%u threshold=%u max_msg=%u", ppool, pthr, pmax);
	} else if (type == SAN_T_CREDIT_UPDATE) {
		c->updates_rx++;
	} else {
		c->msgs_rx++;
		if (cb) {
			c->cur = (int64_t)idx;
			c->cur_held = false;
			ret = cb(arg, m + SAN_VERBS_HDR, len - SAN_VERBS_HDR);
			c->cur = -1;
			if (c->cur_held && type == SAN_T_READ_DONE)
				/* its slot was counted on to come back at once (CTRL class) */
				return broken(c, -EPROTO, "a control message kept in its slot");
			if (c->cur_held) /* kept: san_verbs_release re-posts it */
				return c->err ? c->err : ret;
		}
	}
	/* Done with the slot: re-post it at once, and owe the peer its credit. */
	rc = san_vpool_recv_repost(&c->pool, idx);
	if (rc == 0)
		rc = post_recv(c, (uint32_t)idx);
	if (rc < 0)
		return broken(c, -ECONNRESET, "re-posting a receive failed");
	san_credit_slots_freed(&c->cr, 1);
	return ret;
}

static int on_wc(struct san_verbs_conn *c, const struct ibv_wc *wc, san_verbs_msg_cb cb, void *arg)
{
	if (wc->wr_id & RDMA_TAG) {
		uint32_t e = (uint32_t)(wc->wr_id & ~RDMA_TAG);
		int st = wc->status == IBV_WC_SUCCESS ? 0 : -ECONNRESET;

		if (e >= c->p.nrdma || c->rdma_nfree >= c->p.nrdma)
			return broken(c, -EPROTO, "RDMA completion for no outstanding request");
		c->rdma_free[c->rdma_nfree++] = e;
		if (st < 0 && !(wc->status == IBV_WC_WR_FLUSH_ERR && c->err)) {
			char why[96];

			snprintf(why, sizeof(why), "RDMA %s completion status %s (%d)",
				 wc->opcode == IBV_WC_RDMA_READ ? "READ" : "WRITE",
				 san_rdma.ibv_wc_status_str(wc->status), (int)wc->status);
			broken(c, -ECONNRESET, why);
		}
		if (c->rdma_cb)
			c->rdma_cb(c->rdma_arg, c->rdma_cookie[e], st);
		return st < 0 ? c->err : 0;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		char why[96];

		/* Keep the books: a flushed send frees its slot; a flushed receive is simply gone.
		 */
		if (san_vpool_is_send(&c->pool, wc->wr_id))
			san_vpool_send_put(&c->pool, wc->wr_id);
		snprintf(why, sizeof(why), "completion status %s (%d)",
			 san_rdma.ibv_wc_status_str(wc->status), (int)wc->status);
		if (wc->status == IBV_WC_WR_FLUSH_ERR && c->err)
			return c->err;
		return broken(c, -ECONNRESET, why);
	}
	if (wc->opcode & IBV_WC_RECV)
		return on_recv(c, wc, cb, arg);
	if (wc->opcode == IBV_WC_SEND) {
		if (san_vpool_send_put(&c->pool, wc->wr_id) < 0)
			return broken(c, -EPROTO, "send completion for a slot not in flight");
		c->sends_done++;
		return 0;
	}
	return 0;
}

/* Non-blocking look at the connection's CM channel. */
static void cm_check(struct san_verbs_conn *c)
{
	struct rdma_cm_event *ev;

	while (c->ech && san_rdma.rdma_get_cm_event(c->ech, &ev) == 0) {
		san_debug("verbs: CM event %s (status %d)", san_rdma.rdma_event_str(ev->event),
			  ev->status);
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
		    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
		    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT ||
		    (c->accepting && ev->event != RDMA_CM_EVENT_ESTABLISHED))
			c->peer_gone = true; /* an accept that did not complete fails the same way */
		if (c->accepting && ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			/* our HELLO only now: before it the initiator's QP may not take messages */
			c->accepting = false;
			c->connected = true;
			if (send_hello(c) < 0)
				c->peer_gone = true;
		}
		san_rdma.rdma_ack_cm_event(ev);
	}
}

int san_verbs_poll(struct san_verbs_conn *c, san_verbs_msg_cb cb, void *arg)
{
	int done = 0, rc = 0;
	bool gone;

	if (!c)
		return -EINVAL;
	/* CM first: completions that precede a DISCONNECTED are in the CQ by the time we drain it.
	 */
	cm_check(c);
	gone = c->peer_gone;
	for (;;) {
		if (c->iwc == c->nwc) {
			int n = ibv_poll_cq(c->cq, WC_BATCH, c->wc);

			if (n < 0)
				return broken(c, -ECONNRESET, "ibv_poll_cq failed");
			c->iwc = 0;
			c->nwc = n;
			if (n == 0)
				break;
		}
		rc = on_wc(c, &c->wc[c->iwc++], cb, arg);
		done++;
		if (rc != 0 && !c->err)
			return rc; /* the callback's stop */
	}
	if (gone && !c->err)
		broken(c, -ECONNRESET, "the peer disconnected");
	if (c->err)
		return c->err;
	/* T or more freed slots and nothing else going out: an explicit update. */
	if (san_should_return_credits(&c->cr)) {
		rc = send_msg(c, SAN_T_CREDIT_UPDATE, NULL, 0);
		if (rc < 0 && rc != -EAGAIN)
			return rc;
	}
	return done;
}

int san_verbs_hold(struct san_verbs_conn *c)
{
	if (!c || c->cur < 0)
		return -EINVAL;
	if (!c->cur_held) {
		c->cur_held = true;
		c->nheld++;
		c->holds++;
	}
	return (int)c->cur;
}

int san_verbs_release(struct san_verbs_conn *c, int64_t slot)
{
	int rc;

	if (!c || !c->pool_ok || slot < 0 || (uint64_t)slot >= c->p.nrecv)
		return -EINVAL;
	/* A HELD slot that is not the application's is the one being delivered, not yet kept. */
	if (san_vpool_state(&c->pool, (uint64_t)slot) != SAN_VPOOL_RECV_HELD ||
	    (slot == c->cur && !c->cur_held) || c->nheld == 0)
		return -EALREADY;
	rc = san_vpool_recv_repost(&c->pool, (uint64_t)slot);
	if (rc < 0)
		return rc;
	c->nheld--;
	c->releases++;
	if (c->err)
		return 0; /* the QP is gone: nothing to post, nobody to return credits to */
	rc = post_recv(c, (uint32_t)slot);
	if (rc < 0)
		return broken(c, -ECONNRESET, "re-posting a released receive failed");
	san_credit_slots_freed(&c->cr, 1);
	/* The application may be idle now: return the credits without waiting for a poll. */
	if (san_should_return_credits(&c->cr)) {
		rc = send_msg(c, SAN_T_CREDIT_UPDATE, NULL, 0);
		if (rc < 0 && rc != -EAGAIN)
			return rc;
	}
	return 0;
}

int san_verbs_arm(struct san_verbs_conn *c)
{
	int rc, n;

	if (!c)
		return -EINVAL;
	if (c->err)
		return c->err;
	if (c->iwc < c->nwc)
		return 1;
	rc = ibv_req_notify_cq(c->cq, 0);
	if (rc)
		return -rc;
	n = ibv_poll_cq(c->cq, WC_BATCH, c->wc);
	if (n < 0)
		return broken(c, -ECONNRESET, "ibv_poll_cq failed");
	c->iwc = 0;
	c->nwc = n;
	return n > 0;
}

int san_verbs_ack(struct san_verbs_conn *c)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned int n = 0;

	if (!c || !c->cch)
		return -EINVAL;
	while (san_rdma.ibv_get_cq_event(c->cch, &cq, &ctx) == 0)
		n++;
	if (n)
		san_rdma.ibv_ack_cq_events(c->cq, n);
	return (int)n;
}

int san_verbs_fd(const struct san_verbs_conn *c)
{
	return c && c->cch ? c->cch->fd : -EBADF;
}

int san_verbs_cm_fd(const struct san_verbs_conn *c)
{
	return c && c->ech ? c->ech->fd : -EBADF;
}

void san_verbs_send_counts(const struct san_verbs_conn *c, uint64_t *posted, uint64_t *done)
{
	*posted = c ? c->sends_posted : 0;
	*done = c ? c->sends_done : 0;
}

void san_verbs_get_info(const struct san_verbs_conn *c, struct san_verbs_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!c)
		return;
	info->max_inline = c->max_inline;
	info->peer_max_msg = c->peer_max_msg;
	info->tx_credits = c->cr.tx_credits;
	info->sends_busy = c->pool_ok ? c->pool.nsend - c->pool.send_nfree : 0;
	info->msgs_tx = c->msgs_tx;
	info->msgs_rx = c->msgs_rx;
	info->updates_tx = c->updates_tx;
	info->updates_rx = c->updates_rx;
	info->inline_tx = c->inline_tx;
	info->credit_waits = c->credit_waits;
	info->rx_held = c->nheld;
	info->holds = c->holds;
	info->releases = c->releases;
	info->rdma_busy = c->rdma_cookie ? c->p.nrdma - c->rdma_nfree : 0;
	info->rd_atom = c->rd_atom;
	if (c->id && c->id->verbs)
		snprintf(info->dev, sizeof(info->dev), "%s",
			 san_rdma.ibv_get_device_name(c->id->verbs->device));
}

/* ---------------------------------------------------------------- RDMA READ / WRITE */

int san_verbs_reg(struct san_verbs_conn *c, void *addr, size_t len, unsigned int access,
		  struct san_verbs_region *r)
{
	int acc = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr;

	memset(r, 0, sizeof(*r));
	if (!c || !c->pd || !addr || !len)
		return -EINVAL;
	if (access & SAN_VERBS_REMOTE_READ)
		acc |= IBV_ACCESS_REMOTE_READ;
	if (access & SAN_VERBS_REMOTE_WRITE)
		acc |= IBV_ACCESS_REMOTE_WRITE;
	mr = reg_mr(c->pd, addr, len, acc);
	if (!mr) {
		int rc = neg_errno(ENOMEM);

		san_debug("verbs: ibv_reg_mr of %zu bytes: %s", len, strerror(-rc));
		return rc;
	}
	*r = (struct san_verbs_region){
		.addr = addr, .len = len, .lkey = mr->lkey, .rkey = mr->rkey, .mr = mr
	};
	return 0;
}

void san_verbs_dereg(struct san_verbs_region *r)
{
	if (r && r->mr)
		san_rdma.ibv_dereg_mr(r->mr);
	if (r)
		memset(r, 0, sizeof(*r));
}

size_t san_verbs_mr_len(const void *mr)
{
	return mr ? ((const struct ibv_mr *)mr)->length : 0;
}

static struct ibv_context **devices; /* kept: the devices stay open (san_verbs_connect) */

static void open_devices_once(void)
{
	if (san_rdma_load() == 0)
		devices = san_rdma.rdma_get_devices(NULL);
}

/* librdmacm's devices, opened once per process and kept (NULL when there are none). */
static struct ibv_context **open_devices(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, open_devices_once);
	return devices;
}

uint64_t san_verbs_port_rate(void)
{
	struct ibv_context **d = open_devices();
	uint64_t best = 0;

	for (; d && *d; d++) {
		struct ibv_device_attr da;

		if (san_rdma.ibv_query_device(*d, &da))
			continue;
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			uint64_t r;

			if (query_port(*d, p, &pa) || pa.state != IBV_PORT_ACTIVE)
				continue;
			r = san_linkrate_bps(pa.active_width, pa.active_speed);
			if (r > best)
				best = r;
		}
	}
	return best;
}

bool san_verbs_fork_unneeded(void)
{
	return san_rdma_load() == 0 && san_rdma.ibv_is_fork_initialized() == IBV_FORK_UNNEEDED;
}

void san_verbs_set_rdma_cb(struct san_verbs_conn *c, san_verbs_rdma_cb cb, void *arg)
{
	if (c) {
		c->rdma_cb = cb;
		c->rdma_arg = arg;
	}
}

static int post_rdma(struct san_verbs_conn *c, enum ibv_wr_opcode op,
		     const struct san_verbs_region *local, size_t off, uint64_t raddr,
		     uint32_t rkey, size_t len, uint64_t cookie)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	uint32_t e;
	int rc;

	if (!c || !local || !local->mr)
		return -EINVAL;
	if (c->err)
		return c->err;
	if (len == 0 || len > UINT32_MAX || off > local->len || len > local->len - off)
		return -EINVAL;
	if (c->rdma_nfree == 0)
		return -EAGAIN;
	e = c->rdma_free[--c->rdma_nfree];
	c->rdma_cookie[e] = cookie;
	sge.addr = (uintptr_t)local->addr + off;
	sge.length = (uint32_t)len;
	sge.lkey = local->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RDMA_TAG | e;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		c->rdma_free[c->rdma_nfree++] = e;
		return broken(c, -ECONNRESET, "ibv_post_send (RDMA) failed");
	}
	return 0;
}

void san_verbs_kill(struct san_verbs_conn *c)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!c || !c->qp)
		return;
	if (san_rdma.ibv_modify_qp(c->qp, &attr, IBV_QP_STATE))
		san_warn("verbs: moving a QP to the error state failed: %s", strerror(errno));
	broken(c, -ECONNRESET, "killed locally");
}

int san_verbs_read(struct san_verbs_conn *c, const struct san_verbs_region *local, size_t off,
		   uint64_t raddr, uint32_t rkey, size_t len, uint64_t cookie)
{
	return post_rdma(c, IBV_WR_RDMA_READ, local, off, raddr, rkey, len, cookie);
}

int san_verbs_write(struct san_verbs_conn *c, const struct san_verbs_region *local, size_t off,
		    uint64_t raddr, uint32_t rkey, size_t len, uint64_t cookie)
{
	return post_rdma(c, IBV_WR_RDMA_WRITE, local, off, raddr, rkey, len, cookie);
}

/* ---------------------------------------------------------------- set-up and tear-down */

static struct san_verbs_conn *conn_new(const struct san_verbs_params *p)
{
	struct san_verbs_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->p = *p;
	c->cur = -1;
	c->ech = san_rdma.rdma_create_event_channel();
	if (!c->ech || set_nonblock(c->ech->fd) < 0) {
		san_verbs_close(c);
		return NULL;
	}
	return c;
}


int san_verbs_connect(const char *addr, uint16_t port, const struct san_verbs_params *params,
		      const void *pdata, size_t pdata_len, int timeout_ms,
		      struct san_verbs_conn **out, void *reply, size_t *reply_len)
{
	struct san_verbs_params p;
	struct sockaddr_storage dst;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct san_verbs_conn *c;
	int64_t t0 = now_ms(), t_init = -1, t_addr = -1, t_route = -1, t_setup;
	int64_t deadline = -1;
	int rtmo = timeout_ms < 0 ? SAN_VERBS_TIMEOUT_MS : (timeout_ms > 0 ? timeout_ms : 1);
	int rc;

	*out = NULL;
	if (pdata_len > SAN_VERBS_PDATA_CONNECT || (pdata_len && !pdata))
		return -EINVAL;
	rc = params_fix(params, &p);
	if (rc < 0)
		return rc;
	rc = san_rdma_load();
	if (rc < 0)
		return rc;
	rc = resolve(addr, port, false, &dst);
	if (rc < 0)
		return rc;
	c = conn_new(&p);
	if (!c)
		return neg_errno(ENOMEM);
	if (san_rdma.rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP) != 0) {
		rc = neg_errno(ENOMEM);
		c->id = NULL;
		goto fail;
	}
	/*
	 * The budget is for the network (address, route, the peer's answer), not for our own
	 * set-up: a process's first rdma_cm use took over a second under emulation with the CPUs
	 * busy, and the QP and slot registration below take their time too. librdmacm opens a
	 * device only when an event first needs it (inside the address resolution's wait), so the
	 * first connect of a process opens them all here, before the clock starts; they stay open
	 * for the process's life, as librdmacm keeps them once used anyway.
	 */
	(void)open_devices();
	t_init = now_ms() - t0;
	if (timeout_ms >= 0)
		deadline = now_ms() + timeout_ms;
	if (san_rdma.rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, rtmo) != 0) {
		rc = neg_errno(EHOSTUNREACH);
		goto fail;
	}
	rc = cm_expect(c->ech, deadline < 0 ? now_ms() + rtmo + 1000 : deadline,
		       RDMA_CM_EVENT_ADDR_RESOLVED, &ev);
	if (rc < 0)
		goto fail;
	san_rdma.rdma_ack_cm_event(ev);
	t_addr = now_ms() - t0;
	if (timeout_ms >= 0) {
		rtmo = left_ms(deadline);
		if (rtmo <= 0) {
			rc = -ETIMEDOUT;
			goto fail;
		}
	}
	if (san_rdma.rdma_resolve_route(c->id, rtmo) != 0) {
		rc = neg_errno(ENETUNREACH);
		goto fail;
	}
	rc = cm_expect(c->ech, deadline < 0 ? now_ms() + rtmo + 1000 : deadline,
		       RDMA_CM_EVENT_ROUTE_RESOLVED, &ev);
	if (rc < 0)
		goto fail;
	san_rdma.rdma_ack_cm_event(ev);
	t_route = now_ms() - t0;

	t_setup = now_ms();
	rc = conn_setup(c, c->id);
	if (rc < 0)
		goto fail;
	if (deadline >= 0)
		deadline += now_ms() - t_setup;
	conn_param_init(c, &cp, pdata, pdata_len);
	if (san_rdma.rdma_connect(c->id, &cp) != 0) {
		rc = neg_errno(ECONNREFUSED);
		goto fail;
	}
	rc = cm_next(c->ech, deadline, &ev);
	if (rc < 0)
		goto fail;
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		rc = cm_event_errno(ev);
		/* a refusal by the peer's listener says why in its private data */
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			copy_pdata(&ev->param.conn, reply, reply_len);
		else if (reply_len)
			*reply_len = 0;
		/*
		 * A refusal is the peer's answer (no listener there, or ours says why); anything
		 * else is the fabric's or the peer's failure, which a user would want told
		 */
		if (ev->event == RDMA_CM_EVENT_REJECTED || rc == -ETIMEDOUT) /* (the caller says it) */
			san_debug("verbs: connect: %s (status %d)",
				  san_rdma.rdma_event_str(ev->event), ev->status);
		else
			san_info("verbs: connect to %s port %u: %s (status %d): this connection "
				 "stays on TCP", addr, (unsigned)port,
				 san_rdma.rdma_event_str(ev->event), ev->status);
		san_rdma.rdma_ack_cm_event(ev);
		goto fail;
	}
	copy_pdata(&ev->param.conn, reply, reply_len);
	san_rdma.rdma_ack_cm_event(ev);
	c->connected = true;
	rc = send_hello(c);
	if (rc < 0)
		goto fail;
	san_debug("verbs: connected to %s:%u over %s (inline %u; at ms: cm init %" PRId64
		  ", address %" PRId64 ", route %" PRId64 ", established %" PRId64 ")",
		  addr, (unsigned)port, san_rdma.ibv_get_device_name(c->id->verbs->device),
		  c->max_inline, t_init, t_addr, t_route, now_ms() - t0);
	*out = c;
	return 0;
fail:
	san_debug("verbs: connect to %s:%u: %s (at ms: cm init %" PRId64 ", address %" PRId64
		  ", route %" PRId64 ", failed %" PRId64 ")",
		  addr, (unsigned)port, strerror(-rc), t_init, t_addr, t_route, now_ms() - t0);
	san_verbs_close(c);
	return rc;
}

int san_verbs_listen(const char *addr, uint16_t port, const struct san_verbs_params *params,
		     struct san_verbs_listener **out)
{
	struct sockaddr_storage ss;
	struct san_verbs_listener *l;
	int rc;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rc = params_fix(params, &l->p);
	if (rc < 0)
		goto fail;
	rc = san_rdma_load();
	if (rc < 0)
		goto fail;
	rc = resolve(addr, port, true, &ss);
	if (rc < 0)
		goto fail;
	l->ech = san_rdma.rdma_create_event_channel();
	if (!l->ech) {
		rc = neg_errno(ENODEV);
		goto fail;
	}
	rc = set_nonblock(l->ech->fd);
	if (rc < 0)
		goto fail;
	if (san_rdma.rdma_create_id(l->ech, &l->id, l, RDMA_PS_TCP) != 0) {
		l->id = NULL;
		rc = neg_errno(ENOMEM);
		goto fail;
	}
	if (san_rdma.rdma_bind_addr(l->id, (struct sockaddr *)&ss) != 0) {
		rc = neg_errno(EADDRNOTAVAIL);
		goto fail;
	}
	if (san_rdma.rdma_listen(l->id, 64) != 0) {
		rc = neg_errno(EADDRINUSE);
		goto fail;
	}
	*out = l;
	return 0;
fail:
	san_debug("verbs: listen on %s:%u: %s", addr ? addr : "*", (unsigned)port, strerror(-rc));
	san_verbs_listener_close(l);
	return rc;
}

int san_verbs_listener_fd(const struct san_verbs_listener *l)
{
	return l && l->ech ? l->ech->fd : -EBADF;
}

uint16_t san_verbs_listener_port(const struct san_verbs_listener *l)
{
	const struct sockaddr *sa = l && l->id ? &l->id->route.addr.src_addr : NULL;

	if (sa && sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa && sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

struct san_verbs_request {
	struct rdma_cm_id *id;
	uint8_t peer_depth, peer_resources;
};

int san_verbs_request_next(struct san_verbs_listener *l, int timeout_ms,
			   struct san_verbs_request **out, void *pdata_in, size_t *pdata_in_len)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct san_verbs_request *rq;
	struct rdma_cm_event *ev;
	int rc;

	*out = NULL;
	if (!l)
		return -EINVAL;
	for (;;) {
		rc = cm_next(l->ech, deadline, &ev);
		if (rc < 0)
			return rc;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		san_debug("verbs: listener: ignoring CM event %s",
			  san_rdma.rdma_event_str(ev->event));
		san_rdma.rdma_ack_cm_event(ev);
	}
	rq = calloc(1, sizeof(*rq));
	if (!rq) {
		struct rdma_cm_id *id = ev->id;

		san_rdma.rdma_reject(id, NULL, 0);
		san_rdma.rdma_ack_cm_event(ev);
		san_rdma.rdma_destroy_id(id); /* a request's id is ours: destroying it is our job */
		return -ENOMEM;
	}
	rq->id = ev->id;
	copy_pdata(&ev->param.conn, pdata_in, pdata_in_len);
	rq->peer_depth = ev->param.conn.initiator_depth;
	rq->peer_resources = ev->param.conn.responder_resources;
	san_rdma.rdma_ack_cm_event(ev);
	*out = rq;
	return 0;
}

static void copy_sa(const struct sockaddr *sa, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (sa && sa->sa_family == AF_INET)
		memcpy(out, sa, sizeof(struct sockaddr_in));
	else if (sa && sa->sa_family == AF_INET6)
		memcpy(out, sa, sizeof(struct sockaddr_in6));
}

void san_verbs_request_addrs(const struct san_verbs_request *rq, struct sockaddr_storage *peer,
			     struct sockaddr_storage *local)
{
	copy_sa(rdma_get_peer_addr(rq->id), peer);
	copy_sa(rdma_get_local_addr(rq->id), local);
}

void san_verbs_request_reject(struct san_verbs_request *rq, const void *pdata, size_t len)
{
	if (!rq)
		return;
	if (len > SAN_VERBS_PDATA_ACCEPT)
		len = SAN_VERBS_PDATA_ACCEPT;
	san_rdma.rdma_reject(rq->id, pdata, (uint8_t)len);
	san_rdma.rdma_destroy_id(rq->id);
	free(rq);
}

int san_verbs_request_accept(struct san_verbs_listener *l, struct san_verbs_request *rq,
			     int timeout_ms, struct san_verbs_conn **out, const void *pdata_out,
			     size_t pdata_out_len)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = rq->id;
	struct san_verbs_conn *c;
	uint8_t peer_depth = rq->peer_depth, peer_resources = rq->peer_resources;
	int rc;

	*out = NULL;
	free(rq);
	if (pdata_out_len > SAN_VERBS_PDATA_ACCEPT || (pdata_out_len && !pdata_out)) {
		san_rdma.rdma_reject(id, NULL, 0);
		san_rdma.rdma_destroy_id(id);
		return -EINVAL;
	}
	c = conn_new(&l->p);
	if (!c) {
		rc = neg_errno(ENOMEM);
		san_rdma.rdma_reject(id, NULL, 0);
		san_rdma.rdma_destroy_id(id);
		return rc;
	}
	/* From here on the connection's events come on its own channel. */
	if (san_rdma.rdma_migrate_id(id, c->ech) != 0) {
		rc = neg_errno(ENOMEM);
		san_rdma.rdma_reject(id, NULL, 0);
		san_rdma.rdma_destroy_id(id);
		san_verbs_close(c);
		return rc;
	}
	rc = conn_setup(c, id);
	if (rc < 0) {
		san_rdma.rdma_reject(id, NULL, 0);
		goto fail;
	}
	conn_param_init(c, &cp, pdata_out, pdata_out_len);
	if (cp.responder_resources > peer_depth)
		cp.responder_resources = peer_depth;
	if (cp.initiator_depth > peer_resources)
		cp.initiator_depth = peer_resources;
	c->rd_atom = cp.initiator_depth;
	if (san_rdma.rdma_accept(id, &cp) != 0) {
		rc = neg_errno(ECONNABORTED);
		goto fail;
	}
	if (timeout_ms == 0) {
		c->accepting = true;
		*out = c;
		return 0;
	}
	rc = cm_expect(c->ech, deadline, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (rc < 0)
		goto fail;
	san_rdma.rdma_ack_cm_event(ev);
	c->connected = true;
	rc = send_hello(c);
	if (rc < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	san_debug("verbs: accept: %s", strerror(-rc));
	c->id = id; /* close destroys it */
	san_verbs_close(c);
	return rc;
}

int san_verbs_accept_next(struct san_verbs_listener *l, int timeout_ms, struct san_verbs_conn **out,
			  void *pdata_in, size_t *pdata_in_len, const void *pdata_out,
			  size_t pdata_out_len)
{
	struct san_verbs_request *rq;
	int rc;

	*out = NULL;
	if (!l || pdata_out_len > SAN_VERBS_PDATA_ACCEPT || (pdata_out_len && !pdata_out))
		return -EINVAL;
	rc = san_verbs_request_next(l, timeout_ms, &rq, pdata_in, pdata_in_len);
	if (rc < 0)
		return rc;
	return san_verbs_request_accept(l, rq, timeout_ms, out, pdata_out, pdata_out_len);
}

void san_verbs_listener_close(struct san_verbs_listener *l)
{
	if (!l)
		return;
	if (l->id)
		san_rdma.rdma_destroy_id(l->id);
	if (l->ech)
		san_rdma.rdma_destroy_event_channel(l->ech);
	free(l);
}

void san_verbs_close(struct san_verbs_conn *c)
{
	struct rdma_cm_event *ev;

	if (!c)
		return;
	if (c->id && (c->connected || c->accepting))
		san_rdma.rdma_disconnect(c->id); /* QP to error: what is posted is flushed */
	if (c->cq) {
		struct ibv_wc wc[WC_BATCH];

		while (ibv_poll_cq(c->cq, WC_BATCH, wc) > 0)
			;
	}
	if (c->cch && c->cq)
		san_verbs_ack(c);
	if (c->id && c->id->qp)
		san_rdma.rdma_destroy_qp(c->id);
	c->qp = NULL;
	if (c->mr)
		san_rdma.ibv_dereg_mr(c->mr);
	if (c->cq)
		san_rdma.ibv_destroy_cq(c->cq);
	if (c->cch)
		san_rdma.ibv_destroy_comp_channel(c->cch);
	if (c->pd)
		san_rdma.ibv_dealloc_pd(c->pd);
	if (c->pool_ok)
		san_vpool_fini(&c->pool);
	free(c->area);
	free(c->rdma_cookie);
	free(c->rdma_free);
	if (c->ech)
		while (san_rdma.rdma_get_cm_event(c->ech, &ev) == 0)
			san_rdma.rdma_ack_cm_event(ev);
	if (c->id)
		san_rdma.rdma_destroy_id(c->id);
	if (c->ech)
		san_rdma.rdma_destroy_event_channel(c->ech);
	free(c);
}
