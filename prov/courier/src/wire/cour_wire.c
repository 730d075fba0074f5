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

void cour_wire_msghdr(struct cour_wire_msg *w, const void *sa, socklen_t sa_len, const void *hdr,
		      size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	w->v[0].iov_base = (void *)hdr;
	w->v[0].iov_len = hdr_len;
	if (iovcnt)
		memcpy(&w->v[1], iov, iovcnt * sizeof(*iov));
	memset(&w->m, 0, sizeof(w->m));
	w->m.msg_name = (void *)sa;
	w->m.msg_namelen = sa_len;
	w->m.msg_iov = w->v;
	w->m.msg_iovlen = iovcnt + 1;
}
