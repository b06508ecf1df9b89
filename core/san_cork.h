/*
 * core — a corked switched connection's held doorbells, and the tick that bounds the hold.
 *
 * TCP_CORK (nginx's tcp_nopush: corked around a response's header and body, uncorked at its
 * end) asks TCP to hold partial segments until the uncork, for 200 ms at most. On a switched
 * connection each send commits its frame to the ring at once, and rang the sleeping peer at
 * once: nginx rang twice per response (after the header, after the body), and a client woke
 * twice, to read a header alone and sleep again. A corked send now commits without looking
 * for a sleeping peer (the frame is published: a peer that looks finds it) and the doorbell
 * is rung once, at the uncork (core/san_conn.c, san_conn_cork_flush). The hold also ends at
 * SAN_CONN_CORK_HOLD bytes (TCP sends a full segment while corked), before a send waits for
 * room, and at the progress thread's cork tick 150 to 200 ms after it began (never longer than
 * TCP's 200 ms). Only connections this process holds alone: the count
 * of holds and the tick are the process's own (a fork's shared connection is never held).
 */
#ifndef SAN_CORK_H
#define SAN_CORK_H

#include <stdbool.h>
#include <stdint.h>

struct san_sock;

/* The cork tick's count (a hold notes when it began). */
uint32_t san_cork_now(void);

/*
 * A hold began (lock held): the tick must run. false: no progress thread to run it (the
 * caller ends the hold now, san_conn_cork_flush, which counts it off).
 */
bool san_cork_begin(void);

/* A hold ended (lock held). */
void san_cork_end(void);

/* false once the tick could not be started (no progress thread): nothing is held. */
bool san_cork_usable(void);

void san_cork_atfork_child(void);

#endif
