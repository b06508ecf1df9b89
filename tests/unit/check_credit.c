/* tests/unit: credit rules — the predicates, the violations, and an exhaustive model check. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/san_credit.h"
#include "proto/san_wire.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_stateset.h"

/* Two fresh sides with HELLOs exchanged: A's pool (na, ta), B's pool (nb, tb). */
static void pair_up(struct san_credit *a, struct san_credit *b, uint32_t na, uint32_t ta,
		    uint32_t nb, uint32_t tb)
{
	uint16_t ra, rb;

	ck_assert_int_eq(san_credit_init(a, na, ta), 0);
	ck_assert_int_eq(san_credit_init(b, nb, tb), 0);
	ck_assert_int_eq(san_credit_on_send(a, SAN_T_HELLO, &ra), 0);
	ck_assert_int_eq(san_credit_on_send(b, SAN_T_HELLO, &rb), 0);
	ck_assert_int_eq(san_credit_on_recv(b, SAN_T_HELLO, ra, na, ta), 0);
	ck_assert_int_eq(san_credit_on_recv(a, SAN_T_HELLO, rb, nb, tb), 0);
	ck_assert_int_eq(san_credit_slots_freed(a, 1), 0);
	ck_assert_int_eq(san_credit_slots_freed(b, 1), 0);
}

START_TEST(test_geometry)
{
	struct san_credit c;

	ck_assert_int_eq(san_credit_init(&c, 5, 2), 0);
	ck_assert_int_eq(san_credit_init(&c, 4, 2), -EINVAL);  /* 2T + 1 > N */
	ck_assert_int_eq(san_credit_init(&c, 64, 1), -EINVAL); /* T < 2: updates would ping-pong */
	ck_assert_int_eq(san_credit_init(&c, 65535, 32767), 0);
	ck_assert_int_eq(san_credit_init(&c, 65536, 2), -EINVAL);
	ck_assert(!san_credit_geometry_ok(0, 0));
}
END_TEST

START_TEST(test_classes)
{
	ck_assert_int_eq(san_credit_class_of(SAN_T_HELLO), SAN_CC_HELLO);
	ck_assert_int_eq(san_credit_class_of(SAN_T_DATA), SAN_CC_DATA);
	ck_assert_int_eq(san_credit_class_of(SAN_T_SRC_AVAIL), SAN_CC_DATA);
	ck_assert_int_eq(san_credit_class_of(SAN_T_READ_DONE), SAN_CC_CTRL);
	ck_assert_int_eq(san_credit_class_of(SAN_T_WRITE_GRANT), SAN_CC_CTRL);
	ck_assert_int_eq(san_credit_class_of(SAN_T_WRITE_DONE), SAN_CC_CTRL);
	ck_assert_int_eq(san_credit_class_of(SAN_T_DISCONNECT), SAN_CC_CTRL);
	ck_assert_int_eq(san_credit_class_of(SAN_T_KEEPALIVE), SAN_CC_CTRL);
	ck_assert_int_eq(san_credit_class_of(SAN_T_CREDIT_UPDATE), SAN_CC_UPDATE);
	ck_assert_int_eq(san_credit_class_of(SAN_T_ABORT), SAN_CC_LAST);
	ck_assert_int_eq(san_credit_class_of(SAN_T_PROPOSE), SAN_CC_NONE);
	ck_assert_int_eq(san_credit_class_of(SAN_T_SWITCH), SAN_CC_NONE);
}
END_TEST

START_TEST(test_hello_first_and_once)
{
	struct san_credit c;
	uint16_t r;

	ck_assert_int_eq(san_credit_init(&c, 8, 2), 0);
	ck_assert(!san_can_send(&c, SAN_T_DATA));
	ck_assert(!san_can_send(&c, SAN_T_KEEPALIVE));
	ck_assert(!san_can_send(&c, SAN_T_ABORT));
	ck_assert(!san_can_send(&c, SAN_T_PROPOSE));
	ck_assert_int_eq(san_credit_on_send(&c, SAN_T_DATA, &r), -EAGAIN);
	ck_assert(san_can_send(&c, SAN_T_HELLO));
	ck_assert_int_eq(san_credit_on_send(&c, SAN_T_HELLO, &r), 0);
	ck_assert_uint_eq(r, 0);
	ck_assert_uint_eq(c.tx_credits, 0);
	ck_assert_uint_eq(c.rx_free, 8);
	ck_assert(!san_can_send(&c, SAN_T_HELLO));
	/* The peer's HELLO grants its pool minus the slot our HELLO already used. */
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_HELLO, 0, 16, 4), 0);
	ck_assert_uint_eq(c.tx_credits, 15);
	ck_assert_uint_eq(c.tx_reserve, 5);
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_HELLO, 0, 16, 4), -SAN_PROTO_ECREDIT);
}
END_TEST

/* Our HELLO returning the slot of the peer's HELLO, which arrived first. */
START_TEST(test_hello_crossing)
{
	struct san_credit a, b;
	uint16_t ra, rb;

	ck_assert_int_eq(san_credit_init(&a, 8, 2), 0);
	ck_assert_int_eq(san_credit_init(&b, 8, 2), 0);
	ck_assert_int_eq(san_credit_on_send(&a, SAN_T_HELLO, &ra), 0);
	ck_assert_int_eq(san_credit_on_recv(&b, SAN_T_HELLO, ra, 8, 2), 0);
	ck_assert_int_eq(san_credit_slots_freed(&b, 1), 0);
	ck_assert_int_eq(san_credit_on_send(&b, SAN_T_HELLO, &rb), 0);
	ck_assert_uint_eq(rb, 1);
	ck_assert_int_eq(san_credit_on_recv(&a, SAN_T_HELLO, rb, 8, 2), 0);
	ck_assert_uint_eq(a.tx_credits, 8); /* the whole pool: nothing of A's is in B's slots */
	ck_assert_uint_eq(b.tx_credits, 7); /* B's HELLO sits in one of A's 8 slots */
}
END_TEST

START_TEST(test_send_gates)
{
	struct san_credit a, b;
	uint16_t r;

	pair_up(&a, &b, 11, 3, 11, 4);
	/* A sends into B's pool: DATA must leave T_B + 1 = 5 credits, CTRL 1, UPDATE/ABORT 0. */
	ck_assert_uint_eq(a.tx_credits, 10);
	ck_assert_uint_eq(san_credit_data_window(&a), 5);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(san_credit_on_send(&a, SAN_T_DATA, &r), 0);
	ck_assert_uint_eq(a.tx_credits, 5);
	ck_assert(!san_can_send(&a, SAN_T_DATA));
	ck_assert(!san_can_send(&a, SAN_T_SRC_AVAIL));
	ck_assert_uint_eq(san_credit_data_window(&a), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(san_credit_on_send(&a, SAN_T_WRITE_GRANT, &r), 0);
	ck_assert_uint_eq(a.tx_credits, 2);
	ck_assert_int_eq(san_credit_on_send(&a, SAN_T_READ_DONE, &r), 0);
	ck_assert(!san_can_send(&a, SAN_T_KEEPALIVE));
	ck_assert(!san_can_send(&a, SAN_T_DISCONNECT));
	/* The last credit: an update only with something to return; ABORT always. */
	ck_assert(!san_can_send(&a, SAN_T_CREDIT_UPDATE));
	ck_assert(san_can_send(&a, SAN_T_ABORT));
	a.rx_busy = 1;
	ck_assert_int_eq(san_credit_slots_freed(&a, 1), 0);
	ck_assert(san_can_send(&a, SAN_T_CREDIT_UPDATE));
	ck_assert(!san_should_return_credits(&a)); /* 1 pending < T_A = 3 */
	ck_assert_int_eq(san_credit_on_send(&a, SAN_T_CREDIT_UPDATE, &r), 0);
	ck_assert_uint_eq(r, 1);
	ck_assert_uint_eq(a.tx_credits, 0);
	ck_assert(!san_can_send(&a, SAN_T_ABORT));
	ck_assert(!san_can_send(&a, SAN_T_CREDIT_UPDATE));
}
END_TEST

START_TEST(test_return_threshold)
{
	struct san_credit a, b;
	uint16_t r;

	pair_up(&a, &b, 9, 3, 9, 3);
	/* B consumed A's HELLO: 1 pending. Two more consumed messages reach T = 3. */
	ck_assert_uint_eq(b.rx_pending, 1);
	ck_assert(!san_should_return_credits(&b));
	ck_assert_int_eq(san_credit_on_send(&a, SAN_T_DATA, &r), 0);
	ck_assert_int_eq(san_credit_on_recv(&b, SAN_T_DATA, r, 0, 0), 0);
	ck_assert_int_eq(san_credit_on_send(&a, SAN_T_KEEPALIVE, &r), 0);
	ck_assert_int_eq(san_credit_on_recv(&b, SAN_T_KEEPALIVE, r, 0, 0), 0);
	ck_assert_int_eq(san_credit_slots_freed(&b, 1), 0);
	ck_assert(!san_should_return_credits(&b)); /* the DATA is still held for the app */
	ck_assert_int_eq(san_credit_slots_freed(&b, 1), 0);
	ck_assert(san_should_return_credits(&b));
	ck_assert_int_eq(san_credit_on_send(&b, SAN_T_CREDIT_UPDATE, &r), 0);
	ck_assert_uint_eq(r, 3);
	ck_assert_int_eq(san_credit_on_recv(&a, SAN_T_CREDIT_UPDATE, r, 0, 0), 0);
	ck_assert_int_eq(san_credit_slots_freed(&a, 1), 0);
	ck_assert_uint_eq(a.tx_credits, 8 - 2 + 3);
	ck_assert_int_eq(san_credit_slots_freed(&b, 1), -EINVAL); /* nothing busy */
}
END_TEST

START_TEST(test_violations)
{
	struct san_credit a, b, c;
	uint16_t r;

	pair_up(&a, &b, 5, 2, 5, 2);
	/* B returns more than A ever had out. */
	c = a;
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_DATA, 2, 0, 0), -SAN_PROTO_ECREDIT);
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_DATA, 1, 0, 0), 0);
	/* B sends into a pool with no slot granted to it. */
	c = a;
	c.rx_free = 0;
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_KEEPALIVE, 0, 0, 0), -SAN_PROTO_ECREDIT);
	/* Anything before HELLO, and HELLO with an impossible geometry. */
	ck_assert_int_eq(san_credit_init(&c, 5, 2), 0);
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_CREDIT_UPDATE, 1, 0, 0), -SAN_PROTO_ECREDIT);
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_HELLO, 0, 4, 2), -SAN_PROTO_ERANGE);
	/* We sent no HELLO, so the peer cannot return the slot of one. */
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_HELLO, 1, 5, 2), -SAN_PROTO_ECREDIT);
	ck_assert_int_eq(san_credit_on_recv(&c, SAN_T_HELLO, 0, 5, 2), 0);
	(void)r;
}
END_TEST

/* One-way streaming with a reading receiver: never stalls, about one update per T messages. */
START_TEST(test_streaming)
{
	struct san_credit a, b;
	uint16_t q[64];
	unsigned int head = 0, tail = 0, updates = 0, sent = 0;
	uint16_t r;

	pair_up(&a, &b, 32, 8, 32, 8);
	while (sent < 10000) {
		int progress = 0;

		while (san_can_send(&a, SAN_T_DATA)) {
			ck_assert_int_eq(san_credit_on_send(&a, SAN_T_DATA, &r), 0);
			q[tail++ % 64] = r;
			sent++;
			progress = 1;
		}
		while (head != tail) {
			ck_assert_int_eq(san_credit_on_recv(&b, SAN_T_DATA, q[head++ % 64], 0, 0),
					 0);
			ck_assert_int_eq(san_credit_slots_freed(&b, 1), 0); /* the app reads it */
			progress = 1;
		}
		if (san_should_return_credits(&b)) {
			ck_assert_int_eq(san_credit_on_send(&b, SAN_T_CREDIT_UPDATE, &r), 0);
			ck_assert_int_eq(san_credit_on_recv(&a, SAN_T_CREDIT_UPDATE, r, 0, 0), 0);
			ck_assert_int_eq(san_credit_slots_freed(&a, 1), 0);
			updates++;
			progress = 1;
		}
		ck_assert_msg(progress, "stalled after %u messages", sent);
	}
	ck_assert_uint_le(updates, sent / 8 + 2);
	ck_assert_uint_ge(updates, sent / 32);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/*
 * Exhaustive model check of the rules, driven through the real predicates. Two sides, one
 * FIFO per direction, every interleaving of:
 *   engine: send HELLO; receive the next message (non-DATA slots are freed at once);
 *           send CREDIT_UPDATE when san_should_return_credits();
 *   app:    read one held DATA (frees its slot); send DATA; need a CTRL message and send it.
 * Checked in every reachable state: no false violation from on_recv; slot conservation;
 * the engine-only moves contain no cycle (no livelock of updates answering updates); in
 * every state where the engines have nothing left to do, each side can send a CTRL message
 * (so protocol progress never waits on an application), and a side whose peer's application
 * has read everything can send DATA (so flow control never deadlocks).
 */

#define MQ 10 /* longest FIFO: messages in flight are bounded by the pool (<= 9 here) */

enum { K_NONE, K_HELLO, K_DATA, K_CTRL, K_UPDATE };

struct mstate {
	struct san_credit c[2];
	uint8_t qlen[2]; /* FIFO from side i to side 1 - i */
	uint8_t qkind[2][MQ];
	uint8_t qret[2][MQ];
};

struct mcfg {
	uint32_t pool[2], thr[2];
	uint32_t hello_thr[2]; /* threshold announced in HELLO when not thr (0: thr) */
};

#define KEY_SIDE 8
#define KEY_LEN (2 * KEY_SIDE + 2 * (1 + 2 * MQ))

static void mkey(const struct mstate *s, uint8_t *k)
{
	memset(k, 0, KEY_LEN);
	for (int i = 0; i < 2; i++) {
		const struct san_credit *c = &s->c[i];
		uint8_t *p = k + i * KEY_SIDE;

		p[0] = (uint8_t)c->tx_credits;
		p[1] = (uint8_t)c->tx_pool;
		p[2] = (uint8_t)c->tx_reserve;
		p[3] = (uint8_t)(c->hello_tx | c->hello_rx << 1);
		p[4] = (uint8_t)c->rx_free;
		p[5] = (uint8_t)c->rx_busy;
		p[6] = (uint8_t)c->rx_pending;
		p = k + 2 * KEY_SIDE + i * (1 + 2 * MQ);
		p[0] = s->qlen[i];
		for (int j = 0; j < s->qlen[i]; j++) {
			p[1 + j] = s->qkind[i][j];
			p[1 + MQ + j] = s->qret[i][j];
		}
	}
}

static void munkey(const uint8_t *k, const struct mcfg *cfg, struct mstate *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < 2; i++) {
		struct san_credit *c = &s->c[i];
		const uint8_t *p = k + i * KEY_SIDE;

		c->tx_credits = p[0];
		c->tx_pool = p[1];
		c->tx_reserve = p[2];
		c->hello_tx = p[3] & 1;
		c->hello_rx = p[3] >> 1;
		c->rx_free = p[4];
		c->rx_busy = p[5];
		c->rx_pending = p[6];
		c->rx_pool = cfg->pool[i];
		c->rx_threshold = cfg->thr[i];
		p = k + 2 * KEY_SIDE + i * (1 + 2 * MQ);
		s->qlen[i] = p[0];
		for (int j = 0; j < s->qlen[i]; j++) {
			s->qkind[i][j] = p[1 + j];
			s->qret[i][j] = p[1 + MQ + j];
		}
	}
}

static const uint8_t kind_type[] = {
	[K_HELLO] = SAN_T_HELLO,
	[K_DATA] = SAN_T_DATA,
	[K_CTRL] = SAN_T_READ_DONE,
	[K_UPDATE] = SAN_T_CREDIT_UPDATE,
};

static void msend(struct mstate *s, int x, int kind)
{
	uint16_t r;

	ck_assert_int_eq(san_credit_on_send(&s->c[x], kind_type[kind], &r), 0);
	ck_assert_int_lt(s->qlen[x], MQ);
	s->qkind[x][s->qlen[x]] = (uint8_t)kind;
	s->qret[x][s->qlen[x]] = (uint8_t)r;
	s->qlen[x]++;
}

static void mrecv(struct mstate *s, const struct mcfg *cfg, int x)
{
	int y = 1 - x, kind = s->qkind[y][0];
	uint32_t thr = cfg->hello_thr[y] ? cfg->hello_thr[y] : cfg->thr[y];
	int err = san_credit_on_recv(&s->c[x], kind_type[kind], s->qret[y][0], cfg->pool[y], thr);

	ck_assert_msg(err == 0, "false violation: %s", san_proto_strerror(err));
	memmove(s->qkind[y], s->qkind[y] + 1, MQ - 1);
	memmove(s->qret[y], s->qret[y] + 1, MQ - 1);
	s->qlen[y]--;
	if (kind != K_DATA)
		ck_assert_int_eq(san_credit_slots_freed(&s->c[x], 1), 0);
}

/* Moves: 0-5 per side (x * 6 + m). Engine moves are 0-2. Returns false if not enabled. */
#define NMOVES 6
static bool mmove(const struct mstate *from, const struct mcfg *cfg, int mv, struct mstate *to)
{
	int x = mv / NMOVES, m = mv % NMOVES, y = 1 - x;
	const struct san_credit *c = &from->c[x];

	*to = *from;
	switch (m) {
	case 0: /* engine: HELLO */
		if (!san_can_send(c, SAN_T_HELLO))
			return false;
		msend(to, x, K_HELLO);
		return true;
	case 1: /* engine: receive */
		if (!from->qlen[y])
			return false;
		mrecv(to, cfg, x);
		return true;
	case 2: /* engine: return credits */
		if (!san_should_return_credits(c))
			return false;
		msend(to, x, K_UPDATE);
		return true;
	case 3: /* app reads one held DATA */
		if (!c->rx_busy)
			return false;
		ck_assert_int_eq(san_credit_slots_freed(&to->c[x], 1), 0);
		return true;
	case 4: /* app sends DATA */
		if (!san_can_send(c, SAN_T_DATA))
			return false;
		msend(to, x, K_DATA);
		return true;
	default: /* engine needs to send a CTRL message */
		if (!san_can_send(c, SAN_T_READ_DONE))
			return false;
		msend(to, x, K_CTRL);
		return true;
	}
}

static bool is_engine_move(int mv)
{
	return mv % NMOVES <= 2;
}

static void mcheck_invariants(const struct mstate *s, const struct mcfg *cfg)
{
	for (int y = 0; y < 2; y++) {
		int x = 1 - y;
		const struct san_credit *cy = &s->c[y];
		uint32_t inflight_grant = 0;

		/*
		 * Every slot y has granted is free (possibly about to be filled by a message in
		 * flight), busy, or freed and waiting to be returned.
		 */
		ck_assert_uint_eq(cy->rx_free + cy->rx_busy + cy->rx_pending,
				  cy->hello_tx ? cfg->pool[y] : 1);
		/* y's free slots are x's credits, grants on their way to x, or x's messages. */
		for (int j = 0; j < s->qlen[y]; j++)
			inflight_grant +=
				s->qret[y][j] + (s->qkind[y][j] == K_HELLO ? cfg->pool[y] - 1 : 0);
		ck_assert_uint_eq(s->c[x].tx_credits + inflight_grant + s->qlen[x], cy->rx_free);
	}
}

/* Iterative DFS over engine-only moves; returns true if a cycle exists. */
static bool engine_cycle(const struct unit_stateset *set, const struct mcfg *cfg)
{
	size_t n = set->count;
	uint8_t *color = calloc(n, 1);
	uint32_t *stack = malloc(n * sizeof(*stack));
	uint8_t *next = malloc(n);
	bool cycle = false;
	uint8_t key[KEY_LEN];

	ck_assert(color && stack && next);
	for (size_t root = 0; root < n && !cycle; root++) {
		size_t sp = 0;

		if (color[root])
			continue;
		stack[sp++] = (uint32_t)root;
		color[root] = 1;
		next[root] = 0;
		while (sp && !cycle) {
			uint32_t v = stack[sp - 1];
			struct mstate s, t;
			long w = -1;

			munkey(unit_stateset_get(set, v), cfg, &s);
			while (next[v] < 2 * NMOVES) {
				int mv = next[v]++;

				if (!is_engine_move(mv) || !mmove(&s, cfg, mv, &t))
					continue;
				mkey(&t, key);
				w = unit_stateset_find(set, key);
				ck_assert_int_ge(w, 0);
				break;
			}
			if (w < 0) {
				color[v] = 2;
				sp--;
			} else if (color[w] == 1) {
				cycle = true;
			} else if (color[w] == 0) {
				color[w] = 1;
				next[w] = 0;
				stack[sp++] = (uint32_t)w;
			}
		}
	}
	free(color);
	free(stack);
	free(next);
	return cycle;
}

static const struct mcfg model_cfgs[] = {
	{ { 5, 5 }, { 2, 2 }, { 0, 0 } },
	{ { 5, 7 }, { 2, 3 }, { 0, 0 } },
	{ { 6, 6 }, { 2, 2 }, { 0, 0 } },
	{ { 7, 7 }, { 3, 3 }, { 0, 0 } },
};

START_TEST(test_model)
{
	const struct mcfg *cfg = &model_cfgs[_i];
	struct unit_stateset set;
	struct mstate s, t;
	uint8_t key[KEY_LEN];
	size_t quiescent = 0;
	bool added;

	ck_assert_int_eq(unit_stateset_init(&set, KEY_LEN, 4u << 20), 0);
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(san_credit_init(&s.c[i], cfg->pool[i], cfg->thr[i]), 0);
	mkey(&s, key);
	unit_stateset_add(&set, key, &added);

	for (size_t i = 0; i < set.count; i++) {
		bool engine_idle = true;

		munkey(unit_stateset_get(&set, i), cfg, &s);
		mcheck_invariants(&s, cfg);
		for (int mv = 0; mv < 2 * NMOVES; mv++) {
			if (!mmove(&s, cfg, mv, &t))
				continue;
			if (is_engine_move(mv))
				engine_idle = false;
			mkey(&t, key);
			ck_assert_int_ge(unit_stateset_add(&set, key, &added), 0);
		}
		if (!engine_idle)
			continue;
		quiescent++;
		for (int x = 0; x < 2; x++) {
			const struct san_credit *c = &s.c[x];

			ck_assert(c->hello_tx && c->hello_rx);
			ck_assert_msg(san_can_send(c, SAN_T_READ_DONE),
				      "side %d cannot send control with %u credits", x,
				      c->tx_credits);
			if (s.c[1 - x].rx_busy == 0)
				ck_assert_msg(
					san_can_send(c, SAN_T_DATA),
					"side %d cannot send DATA to a drained peer (%u credits)",
					x, c->tx_credits);
		}
	}
	ck_assert_uint_gt(quiescent, 0);
	ck_assert_msg(!engine_cycle(&set, cfg), "credit updates can livelock");
	fprintf(stderr, "credit model N=%u/%u T=%u/%u: %zu states, %zu quiescent\n", cfg->pool[0],
		cfg->pool[1], cfg->thr[0], cfg->thr[1], set.count, quiescent);
	unit_stateset_free(&set);
}
END_TEST

/*
 * The same model with a return threshold of 1 (which the geometry rule forbids) does livelock:
 * each update frees a slot that is returned by the next update, forever. The rule matters.
 */
START_TEST(test_model_t1_livelocks)
{
	/* Announce T = 2 in HELLO (on_recv refuses 1) but return credits at 1. */
	const struct mcfg cfg = { { 5, 5 }, { 1, 1 }, { 2, 2 } };
	struct unit_stateset set;
	struct mstate s, t;
	uint8_t key[KEY_LEN];
	bool added;

	ck_assert_int_eq(unit_stateset_init(&set, KEY_LEN, 1u << 20), 0);
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(san_credit_init(&s.c[i], 5, 2), 0);
	mkey(&s, key);
	unit_stateset_add(&set, key, &added);
	for (size_t i = 0; i < set.count; i++) {
		munkey(unit_stateset_get(&set, i), &cfg, &s);
		for (int mv = 0; mv < 2 * NMOVES; mv++) {
			if (!mmove(&s, &cfg, mv, &t))
				continue;
			mkey(&t, key);
			ck_assert_int_ge(unit_stateset_add(&set, key, &added), 0);
		}
	}
	ck_assert(engine_cycle(&set, &cfg));
	unit_stateset_free(&set);
}
END_TEST

Suite *make_credit_suite(void)
{
	Suite *s = suite_create("credit");
	TCase *tc;

	tc = tcase_create("rules");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_geometry);
	tcase_add_test(tc, test_classes);
	tcase_add_test(tc, test_hello_first_and_once);
	tcase_add_test(tc, test_hello_crossing);
	tcase_add_test(tc, test_send_gates);
	tcase_add_test(tc, test_return_threshold);
	tcase_add_test(tc, test_violations);
	tcase_add_test(tc, test_streaming);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT_MODEL);
	tcase_add_loop_test(tc, test_model, 0, sizeof(model_cfgs) / sizeof(model_cfgs[0]));
	tcase_add_test(tc, test_model_t1_livelocks);
	suite_add_tcase(s, tc);
	return s;
}
