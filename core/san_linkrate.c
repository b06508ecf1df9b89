/* core: an RDMA port's data rate from the codes ibv_query_port reports (docs/verbs.md §4). */
#include <stddef.h>

#include "core/san_linkrate.h"

/*
 * Lanes x the lane's signalling rate, as the InfiniBand specification names them (RoCE and
 * iWARP devices report the nearest InfiniBand width and speed). The signalling rate, not the
 * data rate after line coding: an estimate for sizing, erring a little high.
 */
uint64_t san_linkrate_bps(uint8_t active_width, uint32_t active_speed)
{
	static const struct {
		uint32_t code;
		uint64_t mbps; /* one lane */
	} speeds[] = {
		{ 1, 2500 },   /* SDR */
		{ 2, 5000 },   /* DDR */
		{ 4, 10000 },  /* QDR */
		{ 8, 10313 },  /* FDR10 */
		{ 16, 14063 }, /* FDR */
		{ 32, 25781 }, /* EDR */
		{ 64, 53125 }, /* HDR */
		{ 128, 106250 }, /* NDR (XDR needs active_speed_ex, which this rdma-core lacks) */
	};
	uint64_t lanes;

	switch (active_width) {
	case 1: lanes = 1; break;
	case 2: lanes = 4; break;
	case 4: lanes = 8; break;
	case 8: lanes = 12; break;
	case 16: lanes = 2; break;
	default: return 0;
	}
	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].code == active_speed)
			return lanes * speeds[i].mbps * 1000000ull;
	return 0;
}
