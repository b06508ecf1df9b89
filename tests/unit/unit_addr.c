/* tests/unit: building struct san_addr from text, shared by the owner and side-channel suites. */
#include <check.h>
#include <string.h>
#include <arpa/inet.h>

#include "tests/unit/unit_addr.h"

void unit_addr_set(struct san_addr *a, const char *ip, uint16_t port)
{
	struct in_addr a4;

	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, ip, &a4) == 1) {
		a->addr[10] = a->addr[11] = 0xff;
		memcpy(a->addr + 12, &a4, 4);
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, ip, a->addr), 1);
	}
	a->port = port;
}
