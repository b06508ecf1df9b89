/* proto: transfer-mode decision — the seed's small/large split and its WSAENOBUFS rule. */
#include <errno.h>

#include "proto/san_bulk.h"
#include "proto/san_wire.h"

/* The zero-copy mode the peers could use for this send, ignoring size; -1 if none. */
static int san_bulk_zcopy_mode(const struct san_bulk_in *in)
{
	if (in->policy == SAN_BULK_COPY_ONLY || !in->can_register)
		return -1;
	/*
	 * Reading is preferred, as in the WSD switch: the receiver pulls straight into the
	 * application's buffer and no grant round trip precedes the data.
	 */
	if (in->policy == SAN_BULK_AUTO && (in->peer_caps & SAN_CAP_RDMA_READ))
		return SAN_XFER_READ;
	if (in->local_caps & SAN_CAP_RDMA_WRITE)
		return SAN_XFER_GRANT;
	return -1;
}

int san_bulk_choose(const struct san_bulk_in *in)
{
	int zmode;

	if (in->len == 0)
		return -EINVAL;
	/* Small sends ride inside a control message: one copy, no registration, no round trip. */
	if (in->len <= in->inline_max)
		return SAN_XFER_INLINE;

	/*
	 * Zero-copy pays a registration (or a CMA call, ~2.4 us) and a round trip, so it is
	 * chosen for sends of at least zcopy_min; below that, copying through the pre-registered
	 * slots is cheaper. The copy needs temporary memory so the send can complete once its
	 * bytes are the switch's; without it, zero-copy is used whatever the size, and only when
	 * neither is possible does the send fail ENOBUFS (the seed's WSAENOBUFS).
	 */
	zmode = san_bulk_zcopy_mode(in);
	if (zmode >= 0 && in->len >= in->zcopy_min)
		return zmode;
	if (in->can_alloc)
		return SAN_XFER_COPY;
	if (zmode >= 0)
		return zmode;
	return -ENOBUFS;
}

uint32_t san_bulk_first_len(uint64_t len, uint32_t max_payload)
{
	if (len <= 1)
		return 0;
	return len - 1 < max_payload ? (uint32_t)(len - 1) : max_payload;
}

uint32_t san_data_max_payload(uint32_t max_msg, bool first)
{
	uint32_t overhead = SAN_HDR_LEN + (first ? sizeof(struct san_wire_data_first) : 0);

	return max_msg > overhead ? max_msg - overhead : 0;
}
