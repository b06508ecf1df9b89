/* proto: credit-based flow control of the SAN channel, as small named predicates. */
#ifndef SAN_CREDIT_H
#define SAN_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/san_err.h"

/*
 * Each side posts a pool of N receive slots for its peer; one slot holds one message. A sender
 * spends one credit per message and learns of freed slots from the credits field that every
 * message carries. The rules (docs/protocol.md §Credits has the argument and the model check):
 *
 *   class   messages                                      may be sent while credits >=
 *   HELLO   HELLO (once, first)                           1 (the slot every pool starts with)
 *   DATA    DATA, SRC_AVAIL: held until the app reads     T_peer + 2
 *   CTRL    READ_DONE, WRITE_GRANT, WRITE_DONE,           2
 *           DISCONNECT, KEEPALIVE, RCV_WINDOW: freed by
 *           the engine
 *   UPDATE  CREDIT_UPDATE, only with >= 1 to return       1
 *   LAST    ABORT: nothing follows it                     1
 *
 * and a receiver sends a CREDIT_UPDATE when T or more freed slots are waiting to be returned
 * and nothing else is about to carry them. With 2 <= T and 2T + 1 <= N this can neither
 * deadlock (engine messages always get through, whatever the applications do) nor livelock
 * (updates cannot answer each other forever).
 */

enum san_credit_class {
	SAN_CC_HELLO,
	SAN_CC_DATA,
	SAN_CC_CTRL,
	SAN_CC_UPDATE,
	SAN_CC_LAST,
	SAN_CC_NONE, /* not a session message */
};

struct san_credit {
	/* Sending: the peer's pool. */
	uint32_t tx_credits; /* peer slots we may fill now */
	uint32_t tx_pool;    /* N_peer, from its HELLO; 0 before */
	uint32_t tx_reserve; /* T_peer + 1: slots a DATA-class message must leave unspent */
	bool hello_tx;	     /* our HELLO is out */
	/* Receiving: our pool. */
	uint32_t rx_pool;      /* N */
	uint32_t rx_threshold; /* T */
	uint32_t rx_free;      /* slots granted to the peer and not yet filled */
	uint32_t rx_busy;      /* slots filled, not yet freed (held for the app, or in process) */
	uint32_t rx_pending;   /* slots freed, not yet returned */
	bool hello_rx;	       /* the peer's HELLO has arrived */
};

/* Valid pool geometry: 2 <= threshold, 2 * threshold + 1 <= pool <= SAN_POOL_MAX. */
bool san_credit_geometry_ok(uint32_t pool, uint32_t threshold);

/* Start a connection: one credit each way (the HELLO slot). Returns 0 or -EINVAL. */
int san_credit_init(struct san_credit *c, uint32_t pool, uint32_t threshold);

enum san_credit_class san_credit_class_of(uint8_t type);

/* May a message of this type be sent now? */
bool san_can_send(const struct san_credit *c, uint8_t type);

/* Should an explicit CREDIT_UPDATE go out (when no other message is about to)? */
bool san_should_return_credits(const struct san_credit *c);

/* DATA-class messages that could be sent back to back right now. */
uint32_t san_credit_data_window(const struct san_credit *c);

/*
 * Account for sending one message of this type: spends a credit, takes every pending return
 * into *returned (the header's credits field). Returns 0 or -EAGAIN if san_can_send() is false.
 */
int san_credit_on_send(struct san_credit *c, uint8_t type, uint16_t *returned);

/*
 * Account for one received message: it filled a slot and returned `returned` credits; a HELLO
 * also brings the peer's pool and threshold. Returns 0, or -SAN_PROTO_ECREDIT if the peer sent
 * without a credit, returned more than it held, sent something before its HELLO or a second
 * HELLO, or -SAN_PROTO_ERANGE for an impossible pool geometry.
 */
int san_credit_on_recv(struct san_credit *c, uint8_t type, uint16_t returned, uint32_t peer_pool,
		       uint32_t peer_threshold);

/* n received slots were freed (message consumed, buffer re-posted). Returns 0 or -EINVAL. */
int san_credit_slots_freed(struct san_credit *c, uint32_t n);

#endif /* SAN_CREDIT_H */
