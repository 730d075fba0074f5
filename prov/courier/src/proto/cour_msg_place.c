/*
 * Where a message packet's payload may be read straight into place. The UDP wire asks
 * (cour_ep_rx_direct) before it reads a big datagram or a GRO train of them; what is read there
 * saves the copy from a packet buffer, which costs as much as the kernel's own. Each answer is
 * exactly where the handler would copy that payload, had the packet come the usual way; for
 * the pieces of a train it is asked again just before each is handled (handling one may move
 * the next). These functions change nothing.
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

/* plen bytes from byte off of iov[0..count), if they are one contiguous span */
static void *cour_iov_span(const struct iovec *iov, uint32_t count, uint64_t off, size_t plen)
{
	for (uint32_t i = 0; i < count; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		return l - off >= plen ? (char *)iov[i].iov_base + off : NULL;
	}
	return NULL;
}

/* Where an in-order RDATA of plen bytes will go: the receive, or the buffer of an RTS we
 * cleared before its receive came. */
void *cour_msg_rdata_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	struct cour_rxmsg *m;
	uint32_t id = hdr->msg.rx_id;

	HASH_FIND(hh, ep->rdv_by_id, &id, sizeof(id), m);
	if (m && m->adopting && !m->rxe && m->ubuf && m->peer == peer &&
	    hdr->msg.offset == m->received && plen <= m->total_len - m->received)
		return m->ubuf + m->received;
	if (!m || m->peer != peer || m->discard || !m->rxe || m->adopting ||
	    hdr->msg.offset != m->received || plen > m->accept_len - m->received)
		return NULL;
	return cour_iov_span(m->rxe->iov, m->rxe->iov_count, m->slice_off + m->received, plen);
}

/* The first packet of an eager message: only into the plain receive it will match, as
 * cour_msg_short_posted and cour_handle_new_in would find it (not a multi-receive buffer,
 * not a receive context, not past the credits granted: those take the usual way). */
static void *cour_msg_eager_first_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
				       size_t plen)
{
	struct cour_pep *ep = peer->ep;
	bool tagged = hdr->base.flags & COUR_F_TAGGED;
	struct cour_rxe *rxe;

	if (!cour_msg_plain_path(peer, hdr) || hdr->msg.total_len > COUR_EAGER_LIMIT ||
	    plen > hdr->msg.total_len ||
	    !cour_seq_le(peer->rx_units + cour_credit_cost(COUR_PKT_EAGER, hdr->msg.total_len),
			 peer->credits_granted))
		return NULL;
	rxe = cour_msg_find_rxe(ep, tagged, hdr->msg.tag, cour_peer_fi_addr(peer));
	if (!rxe || (rxe->op_flags & FI_MULTI_RECV) || plen > rxe->buf_len)
		return NULL;
	return cour_iov_span(rxe->iov, rxe->iov_count, 0, plen);
}

/* Where an in-order EAGER packet of plen bytes will go: a first one into its receive, a later
 * one into the receive its message matched (within what it accepts) or into the message's
 * unexpected copy. */
void *cour_msg_eager_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen)
{
	struct cour_rxmsg *m = peer->rx_cur;

	if (hdr->msg.offset == 0 && !(m && m->msg_id == hdr->msg.msg_id))
		return cour_msg_eager_first_dest(peer, hdr, plen);
	if (!m || m->msg_id != hdr->msg.msg_id || hdr->msg.offset != m->received ||
	    plen > m->total_len - m->received || m->discard)
		return NULL;
	if (!m->rxe)
		return m->ubuf ? m->ubuf + m->received : NULL;
	if (m->received > m->accept_len || plen > m->accept_len - m->received)
		return NULL;    /* (truncated: the handler copies what the receive keeps) */
	return cour_iov_span(m->rxe->iov, m->rxe->iov_count, m->slice_off + m->received, plen);
}
