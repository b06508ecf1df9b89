/* proto: the socket buffer sizes' bound where the peer's reads are not shared memory (verbs). */
#ifndef SAN_RCVWIN_H
#define SAN_RCVWIN_H

#include <stdbool.h>
#include <stdint.h>

/*
 * On shm the sender reads the receiver's consumer index and window in the ring's shared
 * header. On verbs each side's rings are private, so the receiver tells the sender in
 * RCV_WINDOW messages (docs/protocol.md, "Socket buffer sizes"; docs/verbs.md §1): its window
 * (SO_RCVBUF as the kernel reports it, 0: none) and how many frame bytes its application has
 * read. Frame bytes: what a message takes in a ring (san_frame_len: header, body, trailer,
 * alignment), without the PAD a ring writes at its wrap, since the two rings wrap at
 * different places: the same count on both sides for every message that passes.
 */

/* The receiver's side: what went into its inbound ring, and what it told the sender. */
struct san_rcvwin_rx {
	uint64_t frames;    /* frame bytes delivered into the ring */
	uint64_t told;	    /* ... read by the application, as last told */
	uint32_t win_told;  /* the window as last told (0: none) */
	bool said;	    /* the first RCV_WINDOW went (san_rcvwin_rx_due: when it is due) */
	uint64_t pads_old;  /* PAD bytes before the last PAD */
	uint64_t pad_end;   /* the last PAD: the ring position where it ends, and its length */
	uint64_t pad_len;
};

/* A frame of flen bytes was committed at ring position at, behind a PAD of pad bytes. */
void san_rcvwin_rx_frame(struct san_rcvwin_rx *r, uint64_t at, uint64_t pad, uint32_t flen);
/*
 * Frame bytes read when the ring's consumer index is cons: cons less the PADs behind it (a
 * consumer index never stops inside a PAD, which is released with the frame after it; and
 * every PAD but the last is behind it, as the unread bytes are less than one lap).
 */
uint64_t san_rcvwin_rx_read(const struct san_rcvwin_rx *r, uint64_t cons);

enum san_rcvwin_due {
	SAN_RCVWIN_QUIET, /* nothing to say, nor will reading what is there make it due */
	SAN_RCVWIN_WATCH, /* nothing yet; reading what is delivered will: watch the reads */
	SAN_RCVWIN_TELL,  /* say it now */
};
/*
 * With window win now and read frame bytes read: is an RCV_WINDOW due? The first one once a
 * window is set, or once it is asked for (asked: our own SO_SNDBUF is set, so the peer's
 * first must come and ours asks for it; or the peer's first came: it may wait for ours), and
 * not before: a connection where no application set either size exchanges none, as one whose
 * peer predates the message. Then when the window changed, or the application has read a
 * quarter of it since the last one (a sender whose window is full waits for these; more often
 * would cost a message per read).
 */
enum san_rcvwin_due san_rcvwin_rx_due(const struct san_rcvwin_rx *r, uint32_t win, uint64_t read,
				      bool asked);
/* The RCV_WINDOW {win, read} went out. */
void san_rcvwin_rx_told(struct san_rcvwin_rx *r, uint32_t win, uint64_t read);

/* The sender's side. */
struct san_rcvwin_tx {
	uint64_t sent; /* frame bytes sent */
	uint64_t read; /* ... of them read by the peer's application (its last RCV_WINDOW) */
};

/*
 * The peer says its application has read consumed frame bytes: 0, or -EPROTO when that
 * goes backwards or past what we sent (the connection is then reset).
 */
int san_rcvwin_tx_report(struct san_rcvwin_tx *t, uint64_t consumed);
/*
 * The outbound ring position up to which the peer's application has read, when the local
 * consumer (the sender that frames are sent from) has released up to cons: everything sent,
 * less what the peer has not read yet. sent <= cons always (cons counts PADs too).
 */
uint64_t san_rcvwin_tx_pos(const struct san_rcvwin_tx *t, uint64_t cons);

#endif /* SAN_RCVWIN_H */
