/*
 * fi_getinfo: what courier offers (one template per endpoint type), how hints narrow it, and
 * which addresses node, service and flags name. The rules are summarised in cour_attr.h.
 */
#include "cour_fi.h"
#include "cour_attr.h"
#include "util/cour_addr.h"

#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the offer ---- */

/* Domain capabilities (fi_domain(3)): in info->caps and domain_attr->caps, never in tx/rx caps,
 * whose allowed bits fi_endpoint(3) lists. */
#define COUR_COMM_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define COUR_TX_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_TRIGGER)
#define COUR_RX_CAPS (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE)
#define COUR_CAPS (COUR_TX_CAPS | COUR_RX_CAPS | COUR_COMM_CAPS | FI_SHARED_AV)
/* One-sided operations need the reliable engine: RDM endpoints only. FI_NAMED_RX_CTX is the
 * initiator's (fi_rx_addr), a transmit capability: receive contexts simply are named. */
#define COUR_RDM_TX_CAPS (COUR_TX_CAPS | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE | \
			  FI_NAMED_RX_CTX)
#define COUR_RDM_RX_CAPS (COUR_RX_CAPS | FI_RMA | FI_ATOMIC | FI_REMOTE_READ | \
			  FI_REMOTE_WRITE | FI_RMA_EVENT)
#define COUR_RDM_CAPS (COUR_RDM_TX_CAPS | COUR_RDM_RX_CAPS | COUR_COMM_CAPS | FI_SHARED_AV)
/* Every sequenced packet is processed in order, and reads are copied aside before a later
 * write could reach their memory (proto/cour_rma_proto.c). Sends may overtake earlier RMA
 * waiting for credits, so no WAS or RAS. */
#define COUR_RDM_ORDER (FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | \
			FI_ORDER_WAW | FI_ORDER_SAR | FI_ORDER_SAW | FI_ORDER_ATOMIC_RAR | \
			FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW)

/* fi_getinfo(3) capability classes; they decide what a hint of some capabilities returns. */
#define COUR_PRIMARY_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | \
			   FI_NAMED_RX_CTX | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_HMEM | \
			   FI_COLLECTIVE)
#define COUR_MSG_DIR_CAPS (FI_SEND | FI_RECV)
#define COUR_RMA_DIR_CAPS (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/* Sizes left 0 come from parameters when an offer is made (cour_attr_apply_params). */
static const struct fi_tx_attr cour_rdm_tx_attr = {
	.caps = COUR_RDM_TX_CAPS,
	.msg_order = COUR_RDM_ORDER,
	.comp_order = COUR_ORDER_NONE,
	.iov_limit = COUR_IOV_LIMIT,
	.rma_iov_limit = COUR_RMA_IOV_MAX,   /* parts of one operation (cour_rma.c) */
};

static const struct fi_rx_attr cour_rdm_rx_attr = {
	.caps = COUR_RDM_RX_CAPS,
	.msg_order = COUR_RDM_ORDER,
	.comp_order = COUR_ORDER_NONE,
	.iov_limit = COUR_IOV_LIMIT,
};

/* Datagrams are neither retransmitted nor reordered back: no ordering to promise. */
static const struct fi_tx_attr cour_dgram_tx_attr = {
	.caps = COUR_TX_CAPS,
	.msg_order = COUR_ORDER_NONE,
	.comp_order = COUR_ORDER_NONE,
	.iov_limit = COUR_IOV_LIMIT,
};

static const struct fi_rx_attr cour_dgram_rx_attr = {
	.caps = COUR_RX_CAPS,
	.msg_order = COUR_ORDER_NONE,
	.comp_order = COUR_ORDER_NONE,
	.iov_limit = COUR_IOV_LIMIT,
};

/* RDM and MSG endpoints: the reliable engine (a connected one talks to one peer, cour_cm.h) */
#define COUR_RELIABLE_EP_ATTR(ep_type) {					\
	.type = (ep_type),							\
	.protocol = FI_PROTO_UDP,						\
	.protocol_version = COUR_PROTO_VERSION,					\
	.max_msg_size = COUR_MAX_MSG_SIZE,					\
	.max_order_raw_size = COUR_MAX_MSG_SIZE,				\
	.max_order_war_size = COUR_MAX_MSG_SIZE,				\
	.max_order_waw_size = COUR_MAX_MSG_SIZE,				\
	.mem_tag_format = COUR_TAG_FORMAT,					\
	.tx_ctx_cnt = 1,							\
	.rx_ctx_cnt = 1,							\
}
static const struct fi_ep_attr cour_rdm_ep_attr = COUR_RELIABLE_EP_ATTR(FI_EP_RDM);
static const struct fi_ep_attr cour_msg_ep_attr = COUR_RELIABLE_EP_ATTR(FI_EP_MSG);

static const struct fi_ep_attr cour_dgram_ep_attr = {
	.type = FI_EP_DGRAM,
	.protocol = FI_PROTO_UDP,
	.protocol_version = COUR_PROTO_VERSION,
	.max_msg_size = COUR_DGRAM_MAX_MSG,
	.mem_tag_format = COUR_TAG_FORMAT,
	.tx_ctx_cnt = 1,
	.rx_ctx_cnt = 1,
};

static const struct fi_domain_attr cour_domain_attr = {
	.name = COUR_DOMAIN_NAME,
	.threading = FI_THREAD_SAFE,
	.control_progress = FI_PROGRESS_AUTO,
	.data_progress = FI_PROGRESS_AUTO,
	.resource_mgmt = FI_RM_ENABLED,
	.av_type = FI_AV_UNSPEC,
	.mr_key_size = COUR_MR_KEY_SIZE,
	.cq_data_size = COUR_CQ_DATA_SIZE,
	.cq_cnt = 256,
	.ep_cnt = 1024,
	.tx_ctx_cnt = 1024,
	.rx_ctx_cnt = 1024,
	.max_ep_tx_ctx = COUR_SEP_MAX_CTX,   /* scalable endpoints: RDM only (offer_dup) */
	.max_ep_rx_ctx = COUR_SEP_MAX_CTX,
	.max_ep_stx_ctx = 1024,       /* endpoints sharing one context: as many as ep_cnt */
	.max_ep_srx_ctx = 1024,
	.cntr_cnt = 256,
	.mr_iov_limit = 1,
	.caps = COUR_COMM_CAPS | FI_SHARED_AV,     /* the domain capabilities of fi_domain(3) */
	.mr_cnt = 65536,
};

/* prov_name stays NULL: libfabric's core fills it in, and appends to one a provider sets. */
static const struct fi_fabric_attr cour_fabric_attr = {
	.name = COUR_FABRIC_NAME,
	.prov_version = COUR_PROV_VERSION,
};

/* The casts drop const only to fit struct fi_info; templates are read through fi_dupinfo. */
static const struct fi_info cour_rdm_info = {
	.caps = COUR_RDM_CAPS,
	.addr_format = FI_SOCKADDR_IN,
	.tx_attr = (struct fi_tx_attr *)&cour_rdm_tx_attr,
	.rx_attr = (struct fi_rx_attr *)&cour_rdm_rx_attr,
	.ep_attr = (struct fi_ep_attr *)&cour_rdm_ep_attr,
	.domain_attr = (struct fi_domain_attr *)&cour_domain_attr,
	.fabric_attr = (struct fi_fabric_attr *)&cour_fabric_attr,
};

static const struct fi_info cour_dgram_info = {
	.caps = COUR_CAPS,
	.addr_format = FI_SOCKADDR_IN,
	.tx_attr = (struct fi_tx_attr *)&cour_dgram_tx_attr,
	.rx_attr = (struct fi_rx_attr *)&cour_dgram_rx_attr,
	.ep_attr = (struct fi_ep_attr *)&cour_dgram_ep_attr,
	.domain_attr = (struct fi_domain_attr *)&cour_domain_attr,
	.fabric_attr = (struct fi_fabric_attr *)&cour_fabric_attr,
};

static const struct fi_info cour_msg_info = {
	.caps = COUR_RDM_CAPS,
	.addr_format = FI_SOCKADDR_IN,
	.tx_attr = (struct fi_tx_attr *)&cour_rdm_tx_attr,
	.rx_attr = (struct fi_rx_attr *)&cour_rdm_rx_attr,
	.ep_attr = (struct fi_ep_attr *)&cour_msg_ep_attr,
	.domain_attr = (struct fi_domain_attr *)&cour_domain_attr,
	.fabric_attr = (struct fi_fabric_attr *)&cour_fabric_attr,
};

const struct fi_info *const cour_info_templates[] = {
	&cour_rdm_info,
	&cour_dgram_info,
	&cour_msg_info,
	NULL,
};

static void cour_attr_apply_params(struct fi_info *fi)
{
	fi->tx_attr->inject_size = COUR_MIN(cour_params.inject_size, fi->ep_attr->max_msg_size);
	fi->tx_attr->size = cour_params.tx_size;
	fi->rx_attr->size = cour_params.rx_size;
}

static const char *cour_ep_type_name(enum fi_ep_type type)
{
	/* fi_tostr shares one buffer among threads; fi_getinfo must be thread safe. */
	return type == FI_EP_RDM ? "FI_EP_RDM" : type == FI_EP_DGRAM ? "FI_EP_DGRAM" :
	       type == FI_EP_MSG ? "FI_EP_MSG" : "other";
}

static struct fi_info *cour_attr_offer_dup(const struct fi_info *tmpl)
{
	struct fi_info *fi = fi_dupinfo(tmpl);

	if (!fi) {
		COUR_WARN(FI_LOG_CORE, "fi_dupinfo of the %s template failed: out of memory\n",
			  cour_ep_type_name(tmpl->ep_attr->type));
		return NULL;
	}
	cour_attr_apply_params(fi);
	if (fi->ep_attr->type != FI_EP_RDM) {
		/* scalable endpoints are RDM endpoints */
		fi->domain_attr->max_ep_tx_ctx = fi->domain_attr->max_ep_rx_ctx = 1;
		fi->caps &= ~FI_NAMED_RX_CTX;
		fi->tx_attr->caps &= ~FI_NAMED_RX_CTX;
		fi->rx_attr->caps &= ~FI_NAMED_RX_CTX;
	}
	return fi;
}

struct fi_info *cour_attr_offer(enum fi_ep_type type)
{
	size_t i;

	for (i = 0; cour_info_templates[i]; i++)
		if (cour_info_templates[i]->ep_attr->type == type)
			return cour_attr_offer_dup(cour_info_templates[i]);
	return NULL;
}

size_t cour_attr_max_inject(void)
{
	return COUR_MIN(cour_params.inject_size, COUR_MAX_MSG_SIZE);
}

uint64_t cour_attr_mr_mode(const struct fi_info *info)
{
	int mode = info->domain_attr->mr_mode;

	if (mode == COUR_MR_BASIC)
		return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	if (mode == COUR_MR_SCALABLE)
		return 0;
	return (uint64_t)mode & ~(uint64_t)(COUR_MR_BASIC | COUR_MR_SCALABLE);
}

/* ---- matching hints against one offer ---- */

/* Contexts an endpoint of this offer may have: a scalable RDM endpoint's, else one. */
static size_t cour_attr_max_ctx(const struct fi_ep_attr *o)
{
	return o->type == FI_EP_RDM ? COUR_SEP_MAX_CTX : 1;
}

struct cour_match {
	const struct fi_info *offer;
	uint32_t              version;
	enum fi_log_level     level;	/* INFO while negotiating, WARN when checking an info */
};

/* Logs why an offer does not fit and yields false: "return COUR_NOMATCH(m, ...)". */
#define COUR_NOMATCH(m, fmt, ...)						\
	(fi_log_enabled(&cour_prov, (m)->level, FI_LOG_CORE) ?			\
	 (fi_log(&cour_prov, (m)->level, FI_LOG_CORE, __func__, __LINE__,	\
		 "%s does not fit: " fmt "\n",					\
		 cour_ep_type_name((m)->offer->ep_attr->type), ##__VA_ARGS__), false) : \
	 false)

/* Numbers above ours, or bits outside ours, exclude the offer (the log names the field). */
#define COUR_LE(m, h, o, field)							\
	((h)->field <= (o)->field ||						\
	 COUR_NOMATCH(m, #field " %zu > %zu", (size_t)(h)->field, (size_t)(o)->field))
#define COUR_SUBSET(m, name, want, have)					\
	(!((want) & ~(uint64_t)(have)) ||					\
	 COUR_NOMATCH(m, name " 0x%" PRIx64 " not offered", (uint64_t)((want) & ~(uint64_t)(have))))

/* prov_name may list providers ("ofi_rxm;courier"); libfabric's core has already decided
 * that courier is wanted, we only refuse a list that does not name us at all. */
static bool cour_attr_names_us(const char *list)
{
	const char *tok = list, *end;
	size_t len = strlen(COUR_PROV_NAME);

	while (*tok) {
		end = tok + strcspn(tok, ";");
		if ((size_t)(end - tok) == len && !strncasecmp(tok, COUR_PROV_NAME, len))
			return true;
		tok = *end ? end + 1 : end;
	}
	return false;
}

/* No key, or a key of a size courier takes (a size without a key, or the reverse, is none) */
static bool cour_attr_key_fits(const void *key, size_t size)
{
	if (!key && !size)
		return true;
	return key && size >= COUR_AUTH_KEY_MIN && size <= COUR_AUTH_KEY_MAX;
}

static bool cour_match_ep(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_ep_attr *h = hints->ep_attr, *o = m->offer->ep_attr;
	bool rma = m->offer->caps & (FI_RMA | FI_ATOMIC);

	if (!h)
		return true;
	if (h->type != FI_EP_UNSPEC && h->type != o->type)
		return COUR_NOMATCH(m, "ep_attr->type %d asked", (int)h->type);
	if (h->protocol != FI_PROTO_UNSPEC && h->protocol != o->protocol)
		return COUR_NOMATCH(m, "ep_attr->protocol %u asked", h->protocol);
	if (!cour_attr_key_fits(h->auth_key, h->auth_key_size))
		return COUR_NOMATCH(m, "ep_attr->auth_key of %zu bytes: courier's keys are "
				    "secrets of %d to %d bytes", h->auth_key_size,
				    COUR_AUTH_KEY_MIN, COUR_AUTH_KEY_MAX);
	/* Any bit-field mem_tag_format, and 2.x's FI_TAG_MPI and FI_TAG_CCL, fit our 64-bit
	 * tags with arbitrary masks; 2.x leaves the rest of the values below
	 * COUR_TAG_MAX_FORMAT undefined, and we cannot know what a caller means by them. */
	if (FI_VERSION_GE(m->version, FI_VERSION(2, 0)) && h->mem_tag_format > COUR_TAG_CCL &&
	    h->mem_tag_format < COUR_TAG_MAX_FORMAT)
		return COUR_NOMATCH(m, "mem_tag_format %" PRIu64 " is no tag format of API %u.%u",
				    (uint64_t)h->mem_tag_format, FI_MAJOR(m->version),
				    FI_MINOR(m->version));
	/* FI_SHARED_CONTEXT asks for a shared context (cour_srx.c), any other count above 1
	 * for more contexts than an endpoint has. Data ordering sizes only mean something
	 * with RMA or atomics. */
	return COUR_LE(m, h, o, protocol_version) && COUR_LE(m, h, o, max_msg_size) &&
	       (h->tx_ctx_cnt == FI_SHARED_CONTEXT || h->tx_ctx_cnt <= cour_attr_max_ctx(o) ||
		COUR_NOMATCH(m, "tx_ctx_cnt %zu > %zu", h->tx_ctx_cnt, cour_attr_max_ctx(o))) &&
	       (h->rx_ctx_cnt == FI_SHARED_CONTEXT || h->rx_ctx_cnt <= cour_attr_max_ctx(o) ||
		COUR_NOMATCH(m, "rx_ctx_cnt %zu > %zu", h->rx_ctx_cnt, cour_attr_max_ctx(o))) &&
	       (!rma || (COUR_LE(m, h, o, max_order_raw_size) &&
			 COUR_LE(m, h, o, max_order_war_size) &&
			 COUR_LE(m, h, o, max_order_waw_size)));
}

static bool cour_match_caps(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_info *o = m->offer;

	/* The endpoint's caps bound tx/rx caps too: applications commonly copy caps into both.
	 * hints->mode needs no check: whatever the application supports, we need no mode. */
	return COUR_SUBSET(m, "caps", hints->caps, o->caps) &&
	       (!hints->tx_attr ||
		COUR_SUBSET(m, "tx_attr->caps", hints->tx_attr->caps, o->caps)) &&
	       (!hints->rx_attr ||
		COUR_SUBSET(m, "rx_attr->caps", hints->rx_attr->caps, o->caps)) &&
	       (!hints->domain_attr ||
		COUR_SUBSET(m, "domain_attr->caps", hints->domain_attr->caps,
			    o->domain_attr->caps));
}

static bool cour_match_addr_format(const struct cour_match *m, const struct fi_info *hints)
{
	switch (hints->addr_format) {
	case FI_FORMAT_UNSPEC:
	case FI_SOCKADDR:
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR_IN6:
	case COUR_SOCKADDR_IP:	/* the answer names the concrete family (cour_attr_set_addrs) */
		return true;
	default:
		return COUR_NOMATCH(m, "addr_format %u: only socket addresses",
				    hints->addr_format);
	}
}

static bool cour_match_fabric(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_fabric_attr *h = hints->fabric_attr;

	if (!h)
		return true;
	if (h->name && strcmp(h->name, COUR_FABRIC_NAME))
		return COUR_NOMATCH(m, "fabric name \"%s\" asked", h->name);
	if (h->prov_name && !cour_attr_names_us(h->prov_name))
		return COUR_NOMATCH(m, "provider \"%s\" asked", h->prov_name);
	if (h->prov_version > COUR_PROV_VERSION)
		return COUR_NOMATCH(m, "provider version 0x%x asked", h->prov_version);
	return true;
}

/*
 * The mr_mode to report for these hints and the capabilities granted, or -1 when the
 * application's registration modes cannot be met (see cour_attr.h for why legacy values come
 * back as legacy values).
 *
 * FI_MR_ENDPOINT offered by the application is kept when caps grant remote access
 * (FI_REMOTE_READ or FI_REMOTE_WRITE): an application that offers it binds and enables its
 * regions (Open MPI 5's btl/ofi, libfabric's fabtests, OpenSHMEM), and its regions then answer
 * the endpoint they are bound to only. Without remote access there is nothing for a binding
 * to guard, and fi_mr(3) has providers clear the bits they do not need.
 */
static int cour_attr_pick_mr_mode(uint32_t version, const struct fi_info *hints, uint64_t caps)
{
	int want = hints && hints->domain_attr ? hints->domain_attr->mr_mode : 0;
	int mode;

	if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		switch (want) {
		case COUR_MR_UNSPEC:
			return COUR_MR_SCALABLE;	/* "basic or scalable": scalable asks nothing */
		case COUR_MR_BASIC:
		case COUR_MR_SCALABLE:
			return want;
		default:
			return -1;
		}
	}
	if (want & (COUR_MR_BASIC | COUR_MR_SCALABLE))
		return (want == COUR_MR_BASIC || want == COUR_MR_SCALABLE) ? want : -1;
	mode = want & COUR_MR_MODE_SUPPORTED;
	if ((want & FI_MR_ENDPOINT) && (caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)))
		mode |= FI_MR_ENDPOINT;
	return mode;
}

static bool cour_match_domain(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_domain_attr *h = hints->domain_attr, *o = m->offer->domain_attr;

	if (!h)
		return true;
	if (h->name && strcmp(h->name, o->name))
		return COUR_NOMATCH(m, "domain \"%s\" asked", h->name);
	/* every known threading, progress, resource_mgmt and av_type value is supported */
	if ((unsigned)h->threading > FI_THREAD_ENDPOINT ||
	    (unsigned)h->control_progress > COUR_PROGRESS_CONTROL_UNIFIED ||
	    (unsigned)h->data_progress > COUR_PROGRESS_CONTROL_UNIFIED ||
	    (unsigned)h->resource_mgmt > FI_RM_ENABLED || (unsigned)h->av_type > FI_AV_TABLE)
		return COUR_NOMATCH(m, "unknown threading %d, progress %d/%d, resource_mgmt %d "
				    "or av_type %d", (int)h->threading, (int)h->control_progress,
				    (int)h->data_progress, (int)h->resource_mgmt, (int)h->av_type);
	if (cour_attr_pick_mr_mode(m->version, hints, 0) < 0)
		return COUR_NOMATCH(m, "mr_mode 0x%x invalid for API %u.%u", h->mr_mode,
				    FI_MAJOR(m->version), FI_MINOR(m->version));
	if (!cour_attr_key_fits(h->auth_key, h->auth_key_size))
		return COUR_NOMATCH(m, "domain_attr->auth_key of %zu bytes: courier's keys are "
				    "secrets of %d to %d bytes", h->auth_key_size,
				    COUR_AUTH_KEY_MIN, COUR_AUTH_KEY_MAX);
	/* fi_domain(3): a provider that cannot meet them fails fi_getinfo. Read only when the
	 * headers have the field and the caller's version says the application could set it. */
#if FI_VERSION_GE(COUR_FI_VERSION, FI_VERSION(1, 20))
	if (FI_VERSION_GE(m->version, FI_VERSION(1, 20)) && h->max_ep_auth_key > 1)
		return COUR_NOMATCH(m, "max_ep_auth_key %zu: one key per endpoint",
				    h->max_ep_auth_key);
#endif
#if FI_MAJOR_VERSION >= 2
	if (FI_VERSION_GE(m->version, FI_VERSION(2, 0)) && h->max_group_id)
		return COUR_NOMATCH(m, "max_group_id %u: no peer groups", h->max_group_id);
#endif
	/* cq_cnt, ep_cnt, cntr_cnt, mr_cnt, tx/rx_ctx_cnt are "optimal" counts, not limits:
	 * larger wishes still work, so they do not exclude us. */
	return COUR_LE(m, h, o, mr_key_size) && COUR_LE(m, h, o, cq_data_size) &&
	       COUR_LE(m, h, o, mr_iov_limit) && COUR_LE(m, h, o, max_ep_tx_ctx) &&
	       COUR_LE(m, h, o, max_ep_rx_ctx) && COUR_LE(m, h, o, max_ep_stx_ctx) &&
	       COUR_LE(m, h, o, max_ep_srx_ctx) && COUR_LE(m, h, o, max_err_data);
}

static bool cour_match_tx(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_tx_attr *h = hints->tx_attr, *o = m->offer->tx_attr;

	return !h ||
	       (COUR_SUBSET(m, "tx_attr->op_flags", h->op_flags, COUR_TX_OP_FLAGS) &&
		COUR_SUBSET(m, "tx_attr->msg_order", h->msg_order, o->msg_order) &&
		COUR_SUBSET(m, "tx_attr->comp_order", h->comp_order, o->comp_order) &&
		COUR_LE(m, h, o, inject_size) && COUR_LE(m, h, o, size) &&
		COUR_LE(m, h, o, iov_limit) && COUR_LE(m, h, o, rma_iov_limit));
}

static bool cour_match_rx(const struct cour_match *m, const struct fi_info *hints)
{
	const struct fi_rx_attr *h = hints->rx_attr, *o = m->offer->rx_attr;

	/* total_buffered_recv is a sizing hint for unexpected data (fi_endpoint(3)) */
	return !h ||
	       (COUR_SUBSET(m, "rx_attr->op_flags", h->op_flags, COUR_RX_OP_FLAGS) &&
		COUR_SUBSET(m, "rx_attr->msg_order", h->msg_order, o->msg_order) &&
		COUR_SUBSET(m, "rx_attr->comp_order", h->comp_order, o->comp_order) &&
		COUR_LE(m, h, o, size) && COUR_LE(m, h, o, iov_limit));
}

static bool cour_match(const struct cour_match *m, const struct fi_info *hints)
{
	return cour_match_ep(m, hints) && cour_match_caps(m, hints) &&
	       cour_match_addr_format(m, hints) && cour_match_fabric(m, hints) &&
	       cour_match_domain(m, hints) && cour_match_tx(m, hints) && cour_match_rx(m, hints);
}

/* ---- shaping an offer to the hints ---- */

static uint64_t cour_attr_pick_caps(uint64_t offer, const struct fi_info *hints)
{
	uint64_t want = hints->caps, caps, dir, comm;

	if (!want)
		want = (hints->tx_attr ? hints->tx_attr->caps : 0) |
		       (hints->rx_attr ? hints->rx_attr->caps : 0);
	if (!want)
		return offer;

	/* An endpoint without any primary capability is useless: none selected means all. */
	caps = want & COUR_PRIMARY_CAPS;
	if (!caps)
		caps = offer & COUR_PRIMARY_CAPS;
	if (caps & (FI_MSG | FI_TAGGED)) {
		dir = want & COUR_MSG_DIR_CAPS;
		caps |= dir ? dir : offer & COUR_MSG_DIR_CAPS;
	}
	if (caps & (FI_RMA | FI_ATOMIC)) {
		dir = want & COUR_RMA_DIR_CAPS;
		caps |= dir ? dir : offer & COUR_RMA_DIR_CAPS;
	}
	caps |= want & ~(COUR_PRIMARY_CAPS | COUR_MSG_DIR_CAPS | COUR_RMA_DIR_CAPS |
			 COUR_COMM_CAPS);
	comm = (want | (hints->domain_attr ? hints->domain_attr->caps : 0)) & COUR_COMM_CAPS;
	caps |= comm ? comm : offer & COUR_COMM_CAPS;
	/* the secondary domain capability, asked in either place */
	caps |= (hints->domain_attr ? hints->domain_attr->caps : 0) & FI_SHARED_AV;
	return caps & offer;
}

/* A zero hint is a wildcard that keeps our value; anything else was validated by the match. */
#define COUR_ASKED(ours, hint) do { if (hint) (ours) = (hint); } while (0)

static void cour_attr_alter(struct fi_info *fi, uint32_t version, const struct fi_info *hints)
{
	const struct fi_tx_attr *ht;
	const struct fi_rx_attr *hr;
	const struct fi_domain_attr *hd;

	fi->fabric_attr->api_version = version;
	fi->mode = 0;
	if (hints)
		fi->caps = cour_attr_pick_caps(fi->caps, hints);
	/* after the caps: whether FI_MR_ENDPOINT is kept depends on them */
	fi->domain_attr->mr_mode = cour_attr_pick_mr_mode(version, hints, fi->caps);
	if (!hints)
		return;

	fi->tx_attr->caps &= fi->caps;
	fi->rx_attr->caps &= fi->caps;
	fi->domain_attr->caps &= fi->caps;
	fi->handle = hints->handle;

	/* Smaller sizes asked are reflected so the endpoint sizes its queues by them. */
	ht = hints->tx_attr;
	if (ht) {
		fi->tx_attr->op_flags = ht->op_flags;
		COUR_ASKED(fi->tx_attr->inject_size, ht->inject_size);
		COUR_ASKED(fi->tx_attr->size, ht->size);
		COUR_ASKED(fi->tx_attr->iov_limit, ht->iov_limit);
	}
	hr = hints->rx_attr;
	if (hr) {
		fi->rx_attr->op_flags = hr->op_flags;
		COUR_ASKED(fi->rx_attr->size, hr->size);
		COUR_ASKED(fi->rx_attr->iov_limit, hr->iov_limit);
	}
	if (hints->ep_attr) {
		COUR_ASKED(fi->ep_attr->mem_tag_format, hints->ep_attr->mem_tag_format);
		/* FI_SHARED_CONTEXT, or the contexts a scalable endpoint is to have */
		if (hints->ep_attr->tx_ctx_cnt)
			fi->ep_attr->tx_ctx_cnt = hints->ep_attr->tx_ctx_cnt;
		if (hints->ep_attr->rx_ctx_cnt)
			fi->ep_attr->rx_ctx_cnt = hints->ep_attr->rx_ctx_cnt;
	}
	hd = hints->domain_attr;
	if (hd) {
		fi->domain_attr->domain = hd->domain;
		COUR_ASKED(fi->domain_attr->threading, hd->threading);
		COUR_ASKED(fi->domain_attr->control_progress, hd->control_progress);
		COUR_ASKED(fi->domain_attr->data_progress, hd->data_progress);
		COUR_ASKED(fi->domain_attr->resource_mgmt, hd->resource_mgmt);
		COUR_ASKED(fi->domain_attr->av_type, hd->av_type);
#if FI_VERSION_GE(COUR_FI_VERSION, FI_VERSION(1, 20))
		/* one key per endpoint (cour_auth.c): a caller that asks for it gets it */
		if (FI_VERSION_GE(version, FI_VERSION(1, 20)) && hd->max_ep_auth_key == 1)
			fi->domain_attr->max_ep_auth_key = 1;
#endif
	}
	/* 2.x has one progress field (data_progress's union twin) and deprecates
	 * control_progress; libfabric's util providers copy the former into the latter, and a
	 * 2.x application reading control_progress gets the same from us. 1.x callers keep the
	 * two apart (1.21's FI_PROGRESS_CONTROL_UNIFIED is asked in control_progress). */
	if (FI_VERSION_GE(version, FI_VERSION(2, 0)))
		fi->domain_attr->control_progress = fi->domain_attr->data_progress;
	if (hints->fabric_attr)
		fi->fabric_attr->fabric = hints->fabric_attr->fabric;
}

/* The keys asked are the keys the endpoints will use: the info says so (fi_getinfo(3)). */
static int cour_attr_copy_keys(struct fi_info *fi, const struct fi_info *hints)
{
	int ret = 0;

	if (hints && hints->ep_attr && hints->ep_attr->auth_key_size)
		ret = cour_auth_dup(hints->ep_attr->auth_key, hints->ep_attr->auth_key_size,
				    (void **)&fi->ep_attr->auth_key, &fi->ep_attr->auth_key_size);
	if (!ret && hints && hints->domain_attr && hints->domain_attr->auth_key_size)
		ret = cour_auth_dup(hints->domain_attr->auth_key,
				    hints->domain_attr->auth_key_size,
				    (void **)&fi->domain_attr->auth_key,
				    &fi->domain_attr->auth_key_size);
	return ret;
}

/* ---- entry points ---- */

int cour_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		 const struct fi_info *hints, struct fi_info **info)
{
	struct cour_match m = { .version = version, .level = FI_LOG_INFO };
	struct fi_info *head = NULL, **tail = &head, *fi;
	struct cour_attr_addrs addrs;
	bool resolved = false;
	size_t i;
	int ret;

	if (flags & COUR_UTIL_CORE_QUERY) {
		COUR_INFO(FI_LOG_CORE, "not offered as a core under utility providers: courier "
			  "has its own reliable endpoints\n");
		return -FI_ENODATA;
	}
	/* fi_getinfo(3): exactly one info with defaults, whatever the hints */
	if (flags & FI_PROV_ATTR_ONLY) {
		fi = cour_attr_offer_dup(cour_info_templates[0]);
		if (!fi)
			return -FI_ENOMEM;
		cour_attr_alter(fi, version, NULL);
		*info = fi;
		return 0;
	}

	for (i = 0; cour_info_templates[i]; i++) {
		fi = cour_attr_offer_dup(cour_info_templates[i]);
		if (!fi) {
			ret = -FI_ENOMEM;
			goto free_list;
		}
		m.offer = fi;
		if (hints && !cour_match(&m, hints)) {
			fi_freeinfo(fi);
			continue;
		}
		/* resolve only once something matches: no name lookups for other providers' hints */
		if (!resolved) {
			ret = cour_attr_resolve(node, service, flags, hints, &addrs);
			if (ret)
				goto free_fi;
			resolved = true;
		}
		cour_attr_alter(fi, version, hints);
		ret = cour_attr_copy_keys(fi, hints);
		if (!ret)
			ret = cour_attr_set_addrs(fi, &addrs);
		if (ret)
			goto free_fi;
		*tail = fi;
		tail = &fi->next;
	}
	if (!head) {
		COUR_INFO(FI_LOG_CORE, "no courier endpoint type fits the hints\n");
		return -FI_ENODATA;
	}
	*info = head;
	return 0;

free_fi:
	fi_freeinfo(fi);
free_list:
	fi_freeinfo(head);
	return ret;
}

int cour_info_check(const struct fi_info *info)
{
	struct cour_match m = { .level = FI_LOG_WARN };
	struct cour_attr_addrs a = { .family = AF_UNSPEC };
	struct fi_info *offer;
	int ret = 0;

	if (!info || !info->ep_attr || !info->domain_attr || !info->tx_attr || !info->rx_attr) {
		COUR_WARN(FI_LOG_CORE, "info lacks an ep, domain, tx or rx attribute\n");
		return -FI_EINVAL;
	}
	if (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_DGRAM &&
	    info->ep_attr->type != FI_EP_MSG) {
		COUR_WARN(FI_LOG_CORE, "endpoint type %d: courier has FI_EP_RDM, FI_EP_MSG and "
			  "FI_EP_DGRAM\n",
			  (int)info->ep_attr->type);
		return -FI_EINVAL;
	}
	offer = cour_attr_offer(info->ep_attr->type);
	if (!offer)
		return -FI_ENOMEM;
	m.offer = offer;
	m.version = info->fabric_attr && info->fabric_attr->api_version ?
		    info->fabric_attr->api_version : COUR_FI_VERSION;

	if (!cour_match(&m, info)) {
		ret = -FI_EINVAL;
	} else if (info->domain_attr->mr_mode &
		   ~(COUR_MR_MODE_SUPPORTED | FI_MR_LOCAL | FI_MR_ENDPOINT | COUR_MR_BASIC |
		     COUR_MR_SCALABLE)) {
		COUR_WARN(FI_LOG_CORE, "mr_mode 0x%x has bits courier never returns\n",
			  info->domain_attr->mr_mode);
		ret = -FI_EINVAL;
	} else {
		a.family = cour_format_family(info->addr_format);
		if ((info->src_addr &&
		     cour_attr_take_addr("src_addr", info->src_addr, info->src_addrlen, &a.family,
					 &a.src, &a.src_len)) ||
		    (info->dest_addr &&
		     cour_attr_take_addr("dest_addr", info->dest_addr, info->dest_addrlen,
					 &a.family, &a.dest, &a.dest_len))) {
			COUR_WARN(FI_LOG_CORE, "addresses do not fit addr_format %u\n",
				  info->addr_format);
			ret = -FI_EINVAL;
		}
	}
	fi_freeinfo(offer);
	return ret;
}
