/*
 * Test doubles for test_attr: the provider object and the parameters that cour_init.c owns,
 * with its defaults, so that cour_attr.c links alone. Drop this file once test_attr links
 * libcourier_core.la.
 */
#include "fi/cour_fi.h"

struct cour_params cour_params = {
	.mtu = 0,
	.window = 256,
	.credits = 64,
	.eager_max = 65536,
	.inject_size = 4096,
	.tx_size = 1024,
	.rx_size = 1024,
	.ack_delay_us = 20,
	.rto_min_us = 1000,
	.rto_max_us = 500000,
	.peer_timeout_ms = 10000,
	.sockbuf = 8u << 20,
};

struct fi_provider cour_prov = {
	.version = COUR_PROV_VERSION,
	.fi_version = COUR_FI_VERSION,
	.name = COUR_PROV_NAME,
	.getinfo = cour_getinfo,
};
