/*
 * The engine's operation records: a send, RMA or atomic (struct cour_txe), a posted receive
 * (cour_rxe), a message being received (cour_rxmsg), the target's share of a split RMA copy
 * (cour_grant) and the receive queues (cour_rxq). Peers are in cour_peer.h, the endpoint in
 * cour_pep.h; proto/cour_engine.h includes them all.
 */
#ifndef COUR_OP_H
#define COUR_OP_H

#include "util/cour_util.h"
#include "util/cour_pool.h"
#include "proto/cour_wire_fmt.h"
#include "wire/cour_wire.h"

#include <sys/uio.h>
#include <uthash.h>

#define COUR_IOV_MAX     8     /* iov_limit advertised (tx and rx) */
_Static_assert(COUR_IOV_MAX <= COUR_WIRE_IOV_MAX, "a packet's payload iovecs fit a wire's");

struct cour_pep;
struct cour_peer;
struct cour_region;

enum cour_txe_state {
	COUR_TXE_QUEUED,      /* in peer->txq: packets still to be built */
	COUR_TXE_WAIT_ACK,    /* every packet built; waiting for acknowledgements */
	COUR_TXE_WAIT_CTS,    /* RTS acknowledged or not; waiting for the receiver's CTS */
	COUR_TXE_WAIT_DONE,   /* acknowledged; waiting for DONE (FI_DELIVERY_COMPLETE) */
	COUR_TXE_WAIT_RESP,   /* RMA or atomic acknowledged; waiting for the target's answer */
};

/* One send operation (or one internal control message when op_type is CTS or DONE). */
struct cour_txe {
	struct cour_txe     *next, *prev;     /* one of the peer's txe lists */
	struct cour_txe    **list;            /* which one */
	struct cour_peer    *peer;
	uint8_t              op_type;         /* EAGER, RTS (becomes RDATA), WRITE, READ_REQ, ATOMIC;
					       * internal: CTS, DONE, READ_RESP, RMA_RESP */
	uint8_t              state;
	uint16_t             hdr_flags;       /* COUR_F_* */
	uint32_t             msg_id;
	uint32_t             rx_id;           /* RDATA: the receiver's id from CTS */
	void                *context;
	void                *owner;           /* a scalable endpoint's transmit context: where
					       * its completion goes (NULL: the endpoint's) */
	void                *group;           /* one part of an RMA with several remote iovecs:
					       * the object layer completes the whole once */
	uint64_t             op_flags;        /* FI_COMPLETION, FI_INJECT, FI_DELIVERY_COMPLETE... */
	uint64_t             cq_flags;        /* FI_SEND | FI_MSG or FI_TAGGED */
	uint64_t             tag, data;
	uint64_t             total_len;       /* bytes this txe sends (RDATA: accepted by CTS) */
	uint64_t             msg_len;         /* the application's message length */
	uint64_t             built;           /* bytes put into packets so far */
	uint32_t             pkts_out;        /* packets built and not yet acknowledged */
	uint32_t             iov_count;
	struct iovec         iov[COUR_IOV_MAX];
	void                *inject_buf;      /* copy of the data for FI_INJECT (ep->inject_pool) */
	/* RMA and atomics (tag holds the key) */
	uint64_t             raddr;           /* target address (or offset) of byte 0 */
	uint64_t             received;        /* READ_REQ: bytes of READ_RESP placed so far */
	bool                 resp_done;       /* the target's answer arrived (RMA_RESP/all data) */
	bool                 split_wait;      /* split copy: the receiver still reads our buffer */
	bool                 notice;          /* the engine's own RDATA (a split hole filled) */
	bool                 short_rts;       /* an eager message sent as RTS (cour_credit.c) */
	bool                 rts_plain;       /* an RTS without single copy, waiting for CTS */
	bool                 rts_cma;         /* an RTS by single copy, waiting for CTS */
	uint64_t             split_at;        /* split copy: where the receiver's half ends... */
	uint64_t             split_base;      /* ...and its buffer (byte 0), for a refused half */
	int                  resp_err;        /* ... and its courier prov_errno, 0: success */
	void                *snap;            /* READ_RESP: private copy of the data (malloc) */
	uint32_t             res_count;       /* fetching atomics: where the old values go */
	struct iovec         res_iov[COUR_IOV_MAX];
};

/* The iovecs of bytes [off, off + len) of iov[0..count): at most count of them, in out. */
static inline size_t cour_iov_slice(const struct iovec *iov, size_t count, uint64_t off,
				    size_t len, struct iovec *out)
{
	size_t n = 0;

	for (size_t i = 0; i < count && len; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = COUR_MIN(l - off, len);
		len -= out[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

/* Packet types whose txe is the engine's own, never reported to the application. */
static inline bool cour_txe_internal(const struct cour_txe *txe)
{
	return txe->op_type == COUR_PKT_CTS || txe->op_type == COUR_PKT_DONE ||
	       txe->op_type == COUR_PKT_READ_RESP || txe->op_type == COUR_PKT_RMA_RESP ||
	       txe->notice;
}

/* One posted receive. */
struct cour_rxe {
	struct cour_rxe     *next, *prev;     /* q->msg / tag */
	struct cour_rxq     *q;               /* the queue it was posted to */
	void                *context;
	uint64_t             op_flags;        /* FI_COMPLETION, FI_MULTI_RECV, FI_PEEK, FI_CLAIM.. */
	uint64_t             tag, ignore;
	fi_addr_t            src;             /* FI_ADDR_UNSPEC: any */
	uint32_t             iov_count;
	struct iovec         iov[COUR_IOV_MAX];
	size_t               buf_len;         /* sum of iov */
	/* FI_MULTI_RECV: bytes of iov[0] handed out so far and slices still being filled */
	size_t               multi_off;
	uint32_t             multi_pending;
	bool                 multi_retired;
};

/*
 * A message being received: matched (into an rxe slice) or unexpected (into its own buffer).
 * For rendezvous the sender's data arrives later as RDATA keyed by rx_id.
 */
struct cour_rxmsg {
	struct cour_rxmsg   *next, *prev;     /* ep->rxq->umsg / utag while unexpected */
	UT_hash_handle       hh;              /* ep->rdv_by_id while waiting for RDATA */
	struct cour_peer    *peer;
	struct cour_rxe     *rxe;             /* NULL while unexpected */
	struct cour_rxq     *q;               /* the queue it arrived at */
	uint32_t             rx_id;
	uint32_t             msg_id;          /* the sender's id (RTS, DONE) */
	uint32_t             session;         /* the peer session (our nonce) it arrived in */
	uint16_t             hdr_flags;
	bool                 rts;             /* rendezvous: no data until CTS */
	bool                 claimed;         /* FI_CLAIM: reserved for claim_ctx */
	bool                 nomem;           /* unexpected copy failed: report FI_ENOMEM */
	bool                 discard;         /* FI_DISCARD: drop the data as it arrives */
	bool                 credit_early;    /* unexpected: credit given back when buffered */
	bool                 adopting;        /* an RTS we cleared before its receive, whose data
					       * still comes as RDATA (in rdv_by_id) into ubuf or
					       * the receive: then it is an eager message */
	bool                 held;            /* an RTS|WANT left unexpected (peer->rx_rts_held) */
	uint32_t             units;           /* credit units it took */
	size_t               unexp_cost;      /* bytes it counts in stats.unexp_bytes, 0: none */
	fi_addr_t            dgram_src;       /* datagrams have no peer: their source */
	struct cour_pep     *dgram_ep;        /* ...and where an unexpected one arrived */
	void                *claim_ctx;
	uint64_t             tag, data;
	uint64_t             total_len;       /* the sender's message length */
	uint64_t             received;        /* bytes arrived so far */
	/* where the data goes: the matched rxe's buffer (from slice_off) or the unexpected copy */
	char                *ubuf;            /* unexpected: malloc'd total_len bytes */
	size_t               slice_off;       /* multi-recv: offset of this message in iov[0] */
	size_t               accept_len;      /* bytes the receiver keeps (truncation) */
	uint64_t             cma_addr;        /* RTS|CMA: the sender's buffer, to pull from */
	uint64_t             split;           /* split copy: the sender writes from here on */
	bool                 split_failed;    /* ...and our own half could not be pulled */
	bool                 split_hole;      /* ...refused: the sender writes it (DONE asked) */
	uint64_t             hole_filled;     /* ...or sends it in packets: bytes of it arrived */
};

/* Target side of a big RMA whose copy the initiator shares (proto/cour_rma_split.c): we copy
 * [0, split), the initiator [split, total) under a lease in our ring. */
struct cour_grant {
	struct cour_grant   *next, *prev;     /* ep->grants, oldest first */
	struct cour_peer    *peer;
	struct cour_region  *mr;              /* its region: closing it settles the grant first */
	uint8_t              type;            /* WRITE or READ_REQ */
	uint16_t             hdr_flags;       /* the request's (COUR_F_CQ_DATA) */
	uint32_t             msg_id;
	uint32_t             slot;            /* the lease in our ring */
	uint64_t             gen;
	uint64_t             data;            /* remote CQ data */
	uint64_t             total, split;
	char                *dst;             /* our memory of byte 0 */
	uint64_t             iaddr;           /* the initiator's buffer of byte 0 */
	uint64_t             opened_us;
};

/*
 * Posted receives and unexpected messages: an endpoint's own, or a shared receive context's
 * (fi_srx_context) that several endpoints of one domain take from. A message that arrives at
 * one of them is matched against the shared receives and reported to that endpoint's CQ; an
 * unexpected message keeps its peer (m->peer->ep: where it arrived) while it waits here.
 */
struct cour_rxq {
	struct cour_rxe     *msg, *tag;       /* posted receives, utlist DL, in posting order */
	struct cour_rxmsg   *umsg, *utag;     /* unexpected messages, in arrival order */
	struct cour_pool     rxe_pool;
	size_t               dgram_bytes;     /* unexpected datagrams held (FI_EP_DGRAM) */
	void                *owner;           /* a scalable endpoint's receive context: where
					       * its completions go (NULL: the endpoint's) */
	bool                 closed;          /* ...closed: arrivals dropped, completions too */
};

#endif /* COUR_OP_H */
