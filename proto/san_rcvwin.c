/* proto: the socket buffer sizes' bound where the peer's reads are not shared memory (verbs). */
#include <errno.h>

#include "proto/san_rcvwin.h"

void san_rcvwin_rx_frame(struct san_rcvwin_rx *r, uint64_t at, uint64_t pad, uint32_t flen)
{
	if (pad) {
		/* the PAD before it is read by now: the unread bytes are less than one lap */
		r->pads_old += r->pad_len;
		r->pad_end = at + pad;
		r->pad_len = pad;
	}
	r->frames += flen;
}

uint64_t san_rcvwin_rx_read(const struct san_rcvwin_rx *r, uint64_t cons)
{
	return cons - r->pads_old - (r->pad_len && r->pad_end <= cons ? r->pad_len : 0);
}

enum san_rcvwin_due san_rcvwin_rx_due(const struct san_rcvwin_rx *r, uint32_t win, uint64_t read,
				      bool asked)
{
	uint64_t step = win / 4 ? win / 4 : 1;

	if (!r->said)
		return win || asked ? SAN_RCVWIN_TELL : SAN_RCVWIN_QUIET;
	if (win != r->win_told)
		return SAN_RCVWIN_TELL;
	if (!win)
		return SAN_RCVWIN_QUIET;
	if (read - r->told >= step)
		return SAN_RCVWIN_TELL;
	return r->frames - r->told >= step ? SAN_RCVWIN_WATCH : SAN_RCVWIN_QUIET;
}

void san_rcvwin_rx_told(struct san_rcvwin_rx *r, uint32_t win, uint64_t read)
{
	r->win_told = win;
	r->told = read;
	r->said = true;
}

int san_rcvwin_tx_report(struct san_rcvwin_tx *t, uint64_t consumed)
{
	if (consumed < t->read || consumed > t->sent)
		return -EPROTO;
	t->read = consumed;
	return 0;
}

uint64_t san_rcvwin_tx_pos(const struct san_rcvwin_tx *t, uint64_t cons)
{
	return cons - (t->sent - t->read);
}
