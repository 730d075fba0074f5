/*
 * The engine's own messages: CTS, DONE and the other internal control txes (the credits of
 * received messages are in cour_credit.c).
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

#include <stdlib.h>

/* ---- internal control messages (CTS, DONE) ---- */

void cour_send_ctrl(struct cour_peer *peer, uint8_t type, uint32_t msg_id, uint32_t rx_id,
		    uint64_t len)
{
	cour_send_ctrl_flags(peer, type, msg_id, rx_id, len, 0);
}

struct cour_txe *cour_ctrl_txe(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			       uint32_t rx_id, uint16_t flags)
{
	struct cour_txe *txe = cour_pool_get(&peer->ep->txe_pool);

	/* the txe pool has no cap (applications are held to tx_size by a count), so this
	 * only fails when malloc does */
	if (!txe) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a control message\n");
		return NULL;
	}
	memset(txe, 0, sizeof(*txe));   /* no payload: total_len 0 */
	txe->op_type = type;
	txe->msg_id = msg_id;
	txe->rx_id = rx_id;
	txe->hdr_flags = flags;
	return txe;
}

void cour_send_ctrl_flags(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			  uint32_t rx_id, uint64_t len, uint16_t flags)
{
	struct cour_txe *txe = cour_ctrl_txe(peer, type, msg_id, rx_id, flags);

	if (!txe)
		return;
	txe->msg_len = len;             /* CTS: the bytes the receiver accepts */
	cour_peer_enqueue(peer, txe);
}
