/* core: an RDMA port's data rate from the codes ibv_query_port reports (pure: no device). */
#ifndef SAN_LINKRATE_H
#define SAN_LINKRATE_H

#include <stdint.h>

/*
 * ibv_port_attr's active_width (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x) and active_speed
 * (1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR) as bits per second; 0 when
 * either code is unknown.
 */
uint64_t san_linkrate_bps(uint8_t active_width, uint32_t active_speed);

#endif /* SAN_LINKRATE_H */
