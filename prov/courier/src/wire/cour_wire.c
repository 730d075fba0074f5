/*
 * What every wire shares: the lookup by name, and the endpoint's receive batch buffers.
 */
#include "cour_ep.h"

static const struct cour_wire_ops *const cour_wires[] = {
	&cour_udp_wire,
	&cour_loop_wire,
};

const struct cour_wire_ops *cour_wire_lookup(const char *name)
{
	if (!name || !*name)
		return &cour_udp_wire;
	for (size_t i = 0; i < sizeof(cour_wires) / sizeof(cour_wires[0]); i++)
		if (!strcmp(cour_wires[i]->name, name))
			return cour_wires[i];
	COUR_WARN(FI_LOG_EP_CTRL, "FI_COURIER_WIRE=%s: no such wire (udp, loop)\n", name);
	return NULL;
}

int cour_wire_rxbufs_init(struct cour_ep *ep)
{
	for (int i = 0; i < COUR_RX_BATCH; i++) {
		ep->rx_bufs[i] = cour_pool_get(&ep->rxbuf_pool);
		if (!ep->rx_bufs[i]) {
			cour_wire_rxbufs_fini(ep);
			return -FI_ENOMEM;
		}
	}
	return 0;
}

void cour_wire_rxbufs_fini(struct cour_ep *ep)
{
	for (int i = 0; i < COUR_RX_BATCH; i++) {
		if (ep->rx_bufs[i])
			cour_pool_put(&ep->rxbuf_pool, ep->rx_bufs[i]);
		ep->rx_bufs[i] = NULL;
	}
}
