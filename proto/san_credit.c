/* proto: credit accounting — what may be sent, what must be returned, what the peer broke. */
#include <errno.h>

#include "proto/san_credit.h"
#include "proto/san_wire.h"

bool san_credit_geometry_ok(uint32_t pool, uint32_t threshold)
{
	/*
	 * T >= 2: an update costs the peer one slot and is only sent for T freed slots, so
	 * updates answering updates die out. 2T + 1 <= N: after a drained receiver has returned
	 * all it owes, at least N - (T - 1) >= T + 2 credits remain, enough for DATA.
	 */
	return threshold >= 2 && pool <= SAN_POOL_MAX && 2 * threshold + 1 <= pool;
}

int san_credit_init(struct san_credit *c, uint32_t pool, uint32_t threshold)
{
	if (!san_credit_geometry_ok(pool, threshold))
		return -EINVAL;
	*c = (struct san_credit){
		/* Every pool starts with one slot granted implicitly, for the peer's HELLO. */
		.tx_credits = 1,
		.rx_pool = pool,
		.rx_threshold = threshold,
		.rx_free = 1,
	};
	return 0;
}

enum san_credit_class san_credit_class_of(uint8_t type)
{
	switch (type) {
	case SAN_T_HELLO:
		return SAN_CC_HELLO;
	case SAN_T_DATA:
	case SAN_T_SRC_AVAIL:
		return SAN_CC_DATA;
	case SAN_T_READ_DONE:
	case SAN_T_WRITE_GRANT:
	case SAN_T_WRITE_DONE:
	case SAN_T_DISCONNECT:
	case SAN_T_KEEPALIVE:
	case SAN_T_RCV_WINDOW:
		return SAN_CC_CTRL;
	case SAN_T_CREDIT_UPDATE:
		return SAN_CC_UPDATE;
	case SAN_T_ABORT:
		return SAN_CC_LAST;
	default:
		return SAN_CC_NONE;
	}
}

bool san_can_send(const struct san_credit *c, uint8_t type)
{
	switch (san_credit_class_of(type)) {
	case SAN_CC_HELLO:
		return !c->hello_tx && c->tx_credits >= 1;
	case SAN_CC_DATA:
		/* Before the peer's HELLO tx_reserve is 0 but tx_credits is at most 1: no DATA. */
		return c->hello_tx && c->hello_rx && c->tx_credits >= c->tx_reserve + 1;
	case SAN_CC_CTRL:
		return c->hello_tx && c->hello_rx && c->tx_credits >= 2;
	case SAN_CC_UPDATE:
		return c->hello_tx && c->tx_credits >= 1 && c->rx_pending >= 1;
	case SAN_CC_LAST:
		return c->hello_tx && c->tx_credits >= 1;
	default:
		return false;
	}
}

bool san_should_return_credits(const struct san_credit *c)
{
	return c->rx_pending >= c->rx_threshold && san_can_send(c, SAN_T_CREDIT_UPDATE);
}

uint32_t san_credit_data_window(const struct san_credit *c)
{
	if (!c->hello_tx || !c->hello_rx || c->tx_credits <= c->tx_reserve)
		return 0;
	return c->tx_credits - c->tx_reserve;
}

int san_credit_on_send(struct san_credit *c, uint8_t type, uint16_t *returned)
{
	if (!san_can_send(c, type))
		return -EAGAIN;
	c->tx_credits--;
	/* rx_pending never exceeds rx_pool <= SAN_POOL_MAX, so it fits the 16-bit field. */
	*returned = (uint16_t)c->rx_pending;
	c->rx_free += c->rx_pending;
	c->rx_pending = 0;
	if (type == SAN_T_HELLO) {
		/* Our HELLO grants the rest of the pool; the HELLO slot was granted at start. */
		c->rx_free += c->rx_pool - 1;
		c->hello_tx = true;
	}
	return 0;
}

int san_credit_on_recv(struct san_credit *c, uint8_t type, uint16_t returned, uint32_t peer_pool,
		       uint32_t peer_threshold)
{
	uint64_t credits = c->tx_credits;

	if (c->rx_free == 0)
		return -SAN_PROTO_ECREDIT; /* sent without a credit */
	if ((type == SAN_T_HELLO) == c->hello_rx)
		return -SAN_PROTO_ECREDIT; /* the first message must be HELLO, and only it */
	if (type == SAN_T_HELLO) {
		if (!san_credit_geometry_ok(peer_pool, peer_threshold))
			return -SAN_PROTO_ERANGE;
		/* Our HELLO slot was counted at init (and is spent or about to be). */
		credits += peer_pool - 1;
	}
	credits += returned;
	if (credits > (type == SAN_T_HELLO ? peer_pool : c->tx_pool))
		return -SAN_PROTO_ECREDIT; /* returned slots it never had */

	if (type == SAN_T_HELLO) {
		c->tx_pool = peer_pool;
		c->tx_reserve = peer_threshold + 1;
		c->hello_rx = true;
	}
	c->tx_credits = (uint32_t)credits;
	c->rx_free--;
	c->rx_busy++;
	return 0;
}

int san_credit_slots_freed(struct san_credit *c, uint32_t n)
{
	if (n > c->rx_busy)
		return -EINVAL;
	c->rx_busy -= n;
	c->rx_pending += n;
	return 0;
}
