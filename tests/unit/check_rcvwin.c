/* tests/unit: proto/san_rcvwin — the verbs receiver's read count across ring wraps, when an
 * RCV_WINDOW is due, and the sender's checks of what the peer reports. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/san_shm_ring.h"
#include "proto/san_frame.h"
#include "proto/san_msg.h"
#include "proto/san_rcvwin.h"
#include "tests/unit/suites.h"
#include "tests/unit/unit_require.h"

#define RING 4096u

static uint64_t rnd = 0x2545f4914f6cdd1dull;

static uint32_t next_rnd(void)
{
	rnd ^= rnd << 13;
	rnd ^= rnd >> 7;
	rnd ^= rnd << 17;
	return (uint32_t)(rnd >> 11);
}

/*
 * A real ring, many laps: messages of random sizes go in (counted as the verbs provider's
 * deliver counts them: position, PAD, frame bytes) and are read out at random moments; at every
 * step the read count from the consumer index must be the frame bytes of the messages read
 * so far, PADs left out: what the sender counts for the same messages.
 */
START_TEST(test_read_count_across_wraps)
{
	void *b = aligned_alloc(SAN_SHM_RING_ALIGN, san_shm_ring_bytes(RING));
	struct san_shm_prod p;
	struct san_shm_cons c;
	struct san_rcvwin_rx rx;
	uint32_t fifo[512], head = 0, n = 0, pads = 0;
	uint64_t read_frames = 0;

	memset(&rx, 0, sizeof(rx));
	REQUIRE_EQ(san_shm_ring_init(b, san_shm_ring_bytes(RING), RING), 0);
	REQUIRE_EQ(san_shm_ring_prod_attach(&p, b, san_shm_ring_bytes(RING), 1024), 0);
	REQUIRE_EQ(san_shm_ring_cons_attach(&c, b, san_shm_ring_bytes(RING), 1024), 0);
	for (int step = 0; step < 20000; step++) {
		if (next_rnd() % 3) {
			struct san_msg m = { .type = SAN_T_DATA };
			void *buf;
			int room;

			m.u.data.payload_len = 1 + next_rnd() % 700;
			room = san_shm_ring_prod_reserve(&p, (uint32_t)san_msg_size(&m), &buf);
			if (room == -EAGAIN)
				continue;
			REQUIRE(room > 0);
			pads += p.res_pad != 0;
			san_rcvwin_rx_frame(&rx, p.prod, p.res_pad, (uint32_t)room);
			REQUIRE(san_msg_encode(&m, buf, (size_t)room) > 0);
			REQUIRE(san_shm_ring_prod_commit(&p) >= 0);
			fifo[(head + n++) % 512] = (uint32_t)room;
		} else {
			struct san_shm_frame f;
			uint64_t cons;

			if (san_shm_ring_cons_peek(&c, &f) == -EAGAIN)
				continue;
			REQUIRE(san_shm_ring_cons_consume(&c) >= 0);
			read_frames += fifo[head];
			head = (head + 1) % 512;
			n--;
			REQUIRE_EQ(san_shm_ring_prod_released(&p, &cons), 0);
			REQUIRE_EQ(san_rcvwin_rx_read(&rx, cons), read_frames);
		}
		REQUIRE(rx.frames >= read_frames);
	}
	ck_assert_uint_gt(pads, 100); /* the ring wrapped, with PADs, many times */
	free(b);
}
END_TEST

START_TEST(test_due)
{
	struct san_rcvwin_rx rx;

	memset(&rx, 0, sizeof(rx));
	/*
	 * no size set and nobody waits: no first, whatever is delivered and read (a connection
	 * where neither application set one goes as it did before the message)
	 */
	rx.frames = 1 << 20;
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 0, false), SAN_RCVWIN_QUIET);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 1 << 20, false), SAN_RCVWIN_QUIET);
	rx.frames = 0;
	/* the first is due once a window is set, or asked for (a bounded sender waits for it) */
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 0, false), SAN_RCVWIN_TELL);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 0, true), SAN_RCVWIN_TELL);
	san_rcvwin_rx_told(&rx, 0, 0);
	/* then no window: never a message more, whatever is read */
	rx.frames = 1 << 20;
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 1 << 20, true), SAN_RCVWIN_QUIET);
	rx.frames = 0;
	/* a window set: said at once */
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 0, false), SAN_RCVWIN_TELL);
	san_rcvwin_rx_told(&rx, 8192, 0);
	rx.frames = 1000;
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 0, false), SAN_RCVWIN_QUIET);
	rx.frames = 5000;
	/* enough delivered that reading it makes one due: watch; a quarter read: tell */
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 2047, false), SAN_RCVWIN_WATCH);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 2048, false), SAN_RCVWIN_TELL);
	san_rcvwin_rx_told(&rx, 8192, 2048);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 4000, false), SAN_RCVWIN_WATCH);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 8192, 4096, false), SAN_RCVWIN_TELL);
	/* a changed window is said at once; one taken back to 0 too, then nothing more */
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 65536, 2048, false), SAN_RCVWIN_TELL);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 2048, false), SAN_RCVWIN_TELL);
	san_rcvwin_rx_told(&rx, 0, 2048);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 0, 5000, false), SAN_RCVWIN_QUIET);
	/* a tiny window still asks for a step of at least one byte */
	san_rcvwin_rx_told(&rx, 3, 5000);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 3, 5000, false), SAN_RCVWIN_QUIET);
	ck_assert_int_eq(san_rcvwin_rx_due(&rx, 3, 5001, false), SAN_RCVWIN_TELL);
}
END_TEST

/*
 * The sender: the peer's read count may only grow, up to what was sent; anything else is
 * refused (and leaves the state alone). The position the peer has read to is the local
 * consumer's, less what was sent and not read.
 */
START_TEST(test_tx_report)
{
	struct san_rcvwin_tx tx = { 0, 0 };

	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 0), 0);
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 1), -EPROTO); /* nothing sent yet */
	tx.sent = 10000;
	ck_assert_uint_eq(san_rcvwin_tx_pos(&tx, 10400), 400); /* (400 bytes of PADs) */
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 6000), 0);
	ck_assert_uint_eq(tx.read, 6000);
	ck_assert_uint_eq(san_rcvwin_tx_pos(&tx, 10400), 6400);
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 5999), -EPROTO); /* backwards */
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 10001), -EPROTO); /* beyond what was sent */
	ck_assert_uint_eq(tx.read, 6000);
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 6000), 0); /* the same count again: fine */
	ck_assert_int_eq(san_rcvwin_tx_report(&tx, 10000), 0);
	ck_assert_uint_eq(san_rcvwin_tx_pos(&tx, 10400), 10400);
}
END_TEST

Suite *make_rcvwin_suite(void)
{
	Suite *s = suite_create("rcvwin");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, SAN_UNIT_TIMEOUT);
	tcase_add_test(tc, test_read_count_across_wraps);
	tcase_add_test(tc, test_due);
	tcase_add_test(tc, test_tx_report);
	suite_add_tcase(s, tc);
	return s;
}
