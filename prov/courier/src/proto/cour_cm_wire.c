/*
 * CM packets on the wire (struct cour_cm_hdr, cour_wire_fmt.h): built and checked here for both
 * ends of a handshake, the passive endpoint's own socket (cour_cm_passive.c) and an engine
 * endpoint's (the connecting and the accepting endpoint), so the two cannot disagree on the
 * format.
 */
#include "proto/cour_engine.h"

size_t cour_cm_pack(void *buf, struct cour_mac *mac, const struct cour_addr *self,
		    const struct cour_addr *to, uint32_t op, uint64_t conn_id, uint64_t cookie,
		    const void *data, size_t len)
{
	struct cour_base_hdr *h = buf;
	struct cour_mac_ends e;
	struct cour_cm_hdr cm = { .conn_id = conn_id, .op = op, .data_len = (uint32_t)len };

	assert(len <= COUR_CM_DATA_MAX);
	memset(h, 0, sizeof(*h));
	h->version = COUR_WIRE_VERSION;
	h->type = COUR_PKT_CM;
	h->flags = COUR_F_PCSUM | (mac ? COUR_F_MAC : 0);
	h->ack = (uint32_t)cookie;
	h->sack = (uint32_t)(cookie >> 32);
	memcpy(h + 1, &cm, sizeof(cm));
	if (len)
		memcpy((char *)(h + 1) + sizeof(cm), data, len);
	len += sizeof(*h) + sizeof(cm);
	h->crc = cour_crc32c(0, buf, len);
	if (!mac)
		return len;
	cour_mac_ends_of(&e, self, to);
	cour_mac_sign_buf(mac, &e, buf, len);
	return len + COUR_MAC_LEN;
}

bool cour_cm_unpack(const void *buf, size_t len, bool keyed, struct cour_cm_hdr *cm,
		    uint64_t *cookie, const uint8_t **data)
{
	struct cour_base_hdr h;
	uint32_t want;

	if (len < sizeof(h) + sizeof(*cm) || len > COUR_CM_PKT_MAX)
		return false;
	memcpy(&h, buf, sizeof(h));
	memcpy(cm, (const char *)buf + sizeof(h), sizeof(*cm));
	if (h.version != COUR_WIRE_VERSION || h.type != COUR_PKT_CM ||
	    h.flags != (COUR_F_PCSUM | (keyed ? COUR_F_MAC : 0)) ||
	    h.src_session || h.dst_session || h.seq ||
	    cm->op == 0 || cm->op >= COUR_CM_OP_MAX || cm->data_len > COUR_CM_DATA_MAX ||
	    len != sizeof(h) + sizeof(*cm) + cm->data_len)
		return false;
	want = h.crc;
	h.crc = 0;
	if (cour_crc32c(cour_crc32c(0, &h, sizeof(h)), (const char *)buf + sizeof(h),
			len - sizeof(h)) != want)
		return false;
	*cookie = (uint64_t)h.sack << 32 | h.ack;
	*data = (const uint8_t *)buf + sizeof(h) + sizeof(*cm);
	return true;
}

void cour_pep_send_cm(struct cour_pep *ep, const struct cour_addr *to, uint32_t op,
		      uint64_t conn_id, uint64_t cookie, const void *data, size_t len)
{
	_Alignas(8) char buf[COUR_CM_DGRAM_MAX];
	struct sockaddr_storage ss;
	size_t n = cour_cm_pack(buf, ep->wire.mac, &ep->wire.addr, to, op, conn_id, cookie,
				data, len);
	socklen_t sl = (socklen_t)cour_addr_to_sockaddr(to, &ss);

	ep->wire.ops->send_raw(&ep->wire, &ss, sl, buf, n);
}

/* A CM packet that reached an engine endpoint: checked, then handed to the object layer */
void cour_ep_rx_cm(struct cour_pep *ep, const void *buf, size_t len, const struct cour_addr *from)
{
	struct cour_cm_hdr cm;
	const uint8_t *data;
	uint64_t cookie;

	if (!ep->up->cm_rx ||
	    !cour_cm_unpack(buf, len, ep->wire.mac != NULL, &cm, &cookie, &data)) {
		COUR_DROP_BAD(ep, "CM packet failed validation, or not a connected endpoint");
		return;
	}
	ep->up->cm_rx(ep, from, &cm, cookie, data);
}
