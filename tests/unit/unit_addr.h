/* tests/unit: building struct san_addr from text, shared by the owner and side-channel suites. */
#ifndef SAN_UNIT_ADDR_H
#define SAN_UNIT_ADDR_H

#include <stdint.h>

#include "core/san_owner.h"

/* ip is dotted IPv4 (stored v4-mapped, as san_owner_tuple() does) or IPv6 text; asserts on junk. */
void unit_addr_set(struct san_addr *a, const char *ip, uint16_t port);

#endif /* SAN_UNIT_ADDR_H */
