/* cour_getinfo and cour_info_check: the offer, how hints narrow it, which addresses node,
 * service and flags give. Expected values are numbers on purpose: a wrong constant in
 * cour_attr.h fails here instead of being restated. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fi/cour_fi.h"
#include "fi/cour_attr.h"

/* names libfabric 2.x deprecates, values that 1.x applications still pass */
#define LEGACY_LOCAL_MR     (1ULL << 55)
#define LEGACY_ORDER_STRICT 0x1FFULL
/* 1.x's FI_EP_SOCK_STREAM and FI_EP_SOCK_DGRAM: 2.x removed them (its FI_EP_SOCK_STREAM is
 * FI_EP_UNSPEC) and left the numbers unused; an application built against 1.x still sends them */
#define SOCK_STREAM_TYPE    ((enum fi_ep_type)4)
#define SOCK_DGRAM_TYPE     ((enum fi_ep_type)5)
#if FI_MAJOR_VERSION < 2
_Static_assert(FI_LOCAL_MR == LEGACY_LOCAL_MR && FI_ORDER_STRICT == LEGACY_ORDER_STRICT &&
	       FI_EP_SOCK_STREAM == SOCK_STREAM_TYPE && FI_EP_SOCK_DGRAM == SOCK_DGRAM_TYPE,
	       "legacy values");
#endif

/* configure.ac's version, as fi_info must show it */
static uint32_t package_version(void)
{
	unsigned major = 99, minor = 99;

	cr_assert_eq(sscanf(PACKAGE_VERSION, "%u.%u", &major, &minor), 2, "%s", PACKAGE_VERSION);
	return FI_VERSION(major, minor);
}

#define V117 FI_VERSION(1, 17)
#define V14  FI_VERSION(1, 4)
/* callers of the versions that added fields and values: max_ep_auth_key (1.20); max_group_id,
 * the single progress field and named tag formats (2.0); FI_SOCKADDR_IP (2.3) */
#define V120 FI_VERSION(1, 20)
#define V20  FI_VERSION(2, 0)
#define V23  FI_VERSION(2, 3)

#define ALL_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | \
		  FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_TRIGGER | FI_SHARED_AV)
#define COMM (FI_LOCAL_COMM | FI_REMOTE_COMM)
/* one-sided operations: RDM only */
#define RMA_TX (FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE)
#define RMA_RX (FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT)
#define RDM_CAPS (ALL_CAPS | RMA_TX | RMA_RX | FI_NAMED_RX_CTX)
#define RDM_ORDER (FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | \
		   FI_ORDER_SAR | FI_ORDER_SAW | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | \
		   FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW)

static struct fi_info *hints;
static struct fi_info *info;

static void setup(void)
{
	hints = fi_allocinfo();
	cr_assert_not_null(hints);
	info = NULL;
}

static void teardown(void)
{
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

TestSuite(attr, .init = setup, .fini = teardown);

/* an empty hint gets one info per endpoint type: RDM, DGRAM, MSG */
#define NTYPES 3
/* ...and one per reliable type (RDM, MSG) when a hint rules datagrams out */
#define NRELIABLE 2

static size_t count(const struct fi_info *fi)
{
	size_t n = 0;

	for (; fi && n < 100; fi = fi->next)
		n++;
	return n;
}

static void drop(void)
{
	fi_freeinfo(info);
	info = NULL;
}

/* Succeeds with n infos, kept in `info` for teardown. */
static struct fi_info *get(uint32_t version, const char *node, const char *service,
			   uint64_t flags, const struct fi_info *h, size_t n)
{
	int ret = cour_getinfo(version, node, service, flags, h, &info);

	cr_assert_eq(ret, 0, "cour_getinfo: %d (%s)", ret, fi_strerror(-ret));
	cr_assert_eq(count(info), n, "got %zu infos, expected %zu", count(info), n);
	return info;
}

/* Fails with err and leaves *info alone. */
static void fail(uint32_t version, const char *node, const char *service, uint64_t flags,
		 const struct fi_info *h, int err)
{
	struct fi_info *out = (struct fi_info *)&out;
	int ret = cour_getinfo(version, node, service, flags, h, &out);

	cr_assert_eq(ret, err, "cour_getinfo: %d, expected %d", ret, err);
	cr_assert_eq(out, (struct fi_info *)&out, "*info written on failure");
}

static void assert_in(const void *addr, size_t len, const char *ip, int port)
{
	const struct sockaddr_in *sin = addr;
	char buf[INET_ADDRSTRLEN];

	cr_assert_not_null(addr);
	cr_assert_eq(len, 16);
	cr_assert_eq(sin->sin_family, AF_INET);
	cr_assert_str_eq(inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)), ip);
	cr_assert_eq(ntohs(sin->sin_port), port);
}

static void assert_in6(const void *addr, size_t len, const char *ip, int port)
{
	const struct sockaddr_in6 *sin6 = addr;
	char buf[INET6_ADDRSTRLEN];

	cr_assert_not_null(addr);
	cr_assert_eq(len, 28);
	cr_assert_eq(sin6->sin6_family, AF_INET6);
	cr_assert_str_eq(inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf)), ip);
	cr_assert_eq(ntohs(sin6->sin6_port), port);
}

static void check_default(const struct fi_info *fi, enum fi_ep_type type)
{
	bool rdm = type == FI_EP_RDM;

	cr_assert_eq(fi->caps, rdm ? RDM_CAPS : ALL_CAPS, "caps 0x%lx", (unsigned long)fi->caps);
	cr_assert_eq(fi->mode, 0);
	cr_assert_eq(fi->addr_format, FI_SOCKADDR_IN);
	assert_in(fi->src_addr, fi->src_addrlen, "127.0.0.1", 0);
	cr_assert_null(fi->dest_addr);
	cr_assert_eq(fi->dest_addrlen, 0);
	cr_assert_null(fi->handle);
	cr_assert_null(fi->nic);

	cr_assert_eq(fi->tx_attr->caps, FI_MSG | FI_TAGGED | FI_SEND | FI_TRIGGER |
		     (rdm ? RMA_TX | FI_NAMED_RX_CTX : 0));
	cr_assert_eq(fi->tx_attr->mode, 0);
	cr_assert_eq(fi->tx_attr->op_flags, 0);
	cr_assert_eq(fi->tx_attr->msg_order, rdm ? RDM_ORDER : 0);
	cr_assert_eq(fi->tx_attr->comp_order, COUR_ORDER_NONE);
	cr_assert_eq(fi->tx_attr->inject_size, 4096);
	cr_assert_eq(fi->tx_attr->size, 1024);
	cr_assert_eq(fi->tx_attr->iov_limit, 8);
	cr_assert_eq(fi->tx_attr->rma_iov_limit, rdm ? COUR_RMA_IOV_MAX : 0);

	cr_assert_eq(fi->rx_attr->caps, FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV |
		     FI_MULTI_RECV | FI_SOURCE | (rdm ? RMA_RX : 0));
	cr_assert_eq(fi->rx_attr->mode, 0);
	cr_assert_eq(fi->rx_attr->op_flags, 0);
	cr_assert_eq(fi->rx_attr->msg_order, rdm ? RDM_ORDER : 0);
	cr_assert_eq(fi->rx_attr->comp_order, COUR_ORDER_NONE);
	cr_assert_eq(fi->rx_attr->total_buffered_recv, 0);
	cr_assert_eq(fi->rx_attr->size, 1024);
	cr_assert_eq(fi->rx_attr->iov_limit, 8);

	cr_assert_eq(fi->ep_attr->type, type);
	cr_assert_eq(fi->ep_attr->protocol, FI_PROTO_UDP);
	cr_assert_eq(fi->ep_attr->protocol_version, 1);
	cr_assert_eq(fi->ep_attr->max_msg_size, rdm ? 0xffffffffULL : 64920);
	cr_assert_eq(fi->ep_attr->msg_prefix_size, 0);
	cr_assert_eq(fi->ep_attr->max_order_raw_size, rdm ? 0xffffffffULL : 0);
	cr_assert_eq(fi->ep_attr->max_order_war_size, rdm ? 0xffffffffULL : 0);
	cr_assert_eq(fi->ep_attr->max_order_waw_size, rdm ? 0xffffffffULL : 0);
	cr_assert_eq(fi->ep_attr->mem_tag_format, 0xAAAAAAAAAAAAAAAAULL);
	cr_assert_eq(fi->ep_attr->tx_ctx_cnt, 1);
	cr_assert_eq(fi->ep_attr->rx_ctx_cnt, 1);
	cr_assert_eq(fi->ep_attr->auth_key_size, 0);

	cr_assert_str_eq(fi->domain_attr->name, "udp");
	cr_assert_eq(fi->domain_attr->threading, FI_THREAD_SAFE);
	cr_assert_eq(fi->domain_attr->control_progress, FI_PROGRESS_AUTO);
	cr_assert_eq(fi->domain_attr->data_progress, FI_PROGRESS_AUTO);
	cr_assert_eq(fi->domain_attr->resource_mgmt, FI_RM_ENABLED);
	cr_assert_eq(fi->domain_attr->av_type, FI_AV_UNSPEC);
	cr_assert_eq(fi->domain_attr->mr_mode, 0);
	cr_assert_eq(fi->domain_attr->mr_key_size, 8);
	cr_assert_eq(fi->domain_attr->cq_data_size, 8);
	cr_assert_eq(fi->domain_attr->cq_cnt, 256);
	cr_assert_eq(fi->domain_attr->ep_cnt, 1024);
	cr_assert_eq(fi->domain_attr->tx_ctx_cnt, 1024);
	cr_assert_eq(fi->domain_attr->rx_ctx_cnt, 1024);
	/* scalable endpoints: RDM only */
	cr_assert_eq(fi->domain_attr->max_ep_tx_ctx, rdm ? COUR_SEP_MAX_CTX : 1);
	cr_assert_eq(fi->domain_attr->max_ep_rx_ctx, rdm ? COUR_SEP_MAX_CTX : 1);
	cr_assert_eq(fi->domain_attr->max_ep_stx_ctx, 1024);
	cr_assert_eq(fi->domain_attr->max_ep_srx_ctx, 1024);
	cr_assert_eq(fi->domain_attr->cntr_cnt, 256);
	cr_assert_eq(fi->domain_attr->mr_iov_limit, 1);
	cr_assert_eq(fi->domain_attr->caps, COMM | FI_SHARED_AV);
	cr_assert_eq(fi->domain_attr->mode, 0);
	cr_assert_eq(fi->domain_attr->auth_key_size, 0);
	cr_assert_eq(fi->domain_attr->max_err_data, 0);
	cr_assert_eq(fi->domain_attr->mr_cnt, 65536);

	cr_assert_str_eq(fi->fabric_attr->name, "courier");
	cr_assert_null(fi->fabric_attr->prov_name, "the core appends to a prov_name we set");
	cr_assert_eq(fi->fabric_attr->prov_version, package_version());
	cr_assert_eq(fi->fabric_attr->api_version, V117);
}

/* ---- the offer ---- */

Test(attr, null_hints_offer_rdm_then_dgram_with_every_attribute)
{
	get(V117, NULL, NULL, 0, NULL, NTYPES);
	check_default(info, FI_EP_RDM);
	check_default(info->next, FI_EP_DGRAM);
}

Test(attr, empty_hints_are_wildcards)
{
	get(V117, NULL, NULL, 0, hints, NTYPES);
	check_default(info, FI_EP_RDM);
	check_default(info->next, FI_EP_DGRAM);
}

Test(attr, results_are_independent)
{
	struct fi_info *second;

	get(V117, "127.0.0.1", "4567", 0, NULL, NTYPES);
	cr_assert_neq(info->src_addr, info->next->src_addr);
	cr_assert_neq(info->dest_addr, info->next->dest_addr);
	cr_assert_neq(info->domain_attr->name, info->next->domain_attr->name);
	cr_assert_neq(info->tx_attr, info->next->tx_attr);
	second = info->next;
	info->next = NULL;
	drop();
	info = second;
	cr_assert_str_eq(info->domain_attr->name, "udp");
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 4567);
}

Test(attr, dgram_inject_is_capped_at_dgram_max)
{
	cour_params.inject_size = 65536;
	cour_params.tx_size = 64;
	cour_params.rx_size = 32;
	get(V117, NULL, NULL, 0, NULL, NTYPES);
	cr_assert_eq(info->tx_attr->inject_size, 65536);
	cr_assert_eq(info->next->tx_attr->inject_size, 64920);
	cr_assert_eq(info->tx_attr->size, 64);
	cr_assert_eq(info->rx_attr->size, 32);
	cr_assert_eq(cour_attr_max_inject(), 65536);
}

Test(attr, offer_by_type)
{
	struct fi_info *o = cour_attr_offer(FI_EP_DGRAM);

	cr_assert_not_null(o);
	cr_assert_eq(o->ep_attr->max_msg_size, 64920);
	cr_assert_eq(o->tx_attr->inject_size, 4096);
	cr_assert_null(o->src_addr);
	fi_freeinfo(o);
	o = cour_attr_offer(FI_EP_MSG);
	cr_assert_not_null(o);
	cr_assert(o->caps & FI_RMA, "a connected endpoint has the reliable engine's RMA");
	fi_freeinfo(o);
	cr_assert_null(cour_attr_offer(SOCK_STREAM_TYPE));
	cr_assert_eq(cour_info_templates[0]->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(cour_info_templates[1]->ep_attr->type, FI_EP_DGRAM);
	cr_assert_eq(cour_info_templates[2]->ep_attr->type, FI_EP_MSG);
	cr_assert_null(cour_info_templates[3]);
}

Test(attr, prov_attr_only_returns_one_info)
{
	get(V117, NULL, NULL, FI_PROV_ATTR_ONLY | FI_SOURCE, hints, 1);
	cr_assert_eq(info->fabric_attr->prov_version, package_version());
}

/* ---- capabilities ---- */

Test(attr, msg_alone_gets_both_directions_and_comm_but_no_secondary)
{
	hints->caps = FI_MSG;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_MSG | FI_SEND | FI_RECV | COMM);
	cr_assert_eq(info->tx_attr->caps, FI_MSG | FI_SEND);
	cr_assert_eq(info->rx_attr->caps, FI_MSG | FI_RECV);
	cr_assert_eq(info->next->caps, FI_MSG | FI_SEND | FI_RECV | COMM);
}

Test(attr, requested_secondary_caps_are_returned)
{
	hints->caps = FI_TAGGED | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_TAGGED | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE |
		     FI_SEND | FI_RECV | COMM);
	cr_assert_eq(info->rx_attr->caps, FI_TAGGED | FI_DIRECTED_RECV | FI_MULTI_RECV |
		     FI_SOURCE | FI_RECV);
	cr_assert_eq(info->tx_attr->caps, FI_TAGGED | FI_SEND);
}

Test(attr, direction_modifier_limits)
{
	hints->caps = FI_MSG | FI_TAGGED | FI_SEND;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_MSG | FI_TAGGED | FI_SEND | COMM);
	cr_assert_eq(info->rx_attr->caps, FI_MSG | FI_TAGGED);
}

Test(attr, local_comm_alone_is_not_widened)
{
	hints->caps = FI_MSG | FI_LOCAL_COMM;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM);
	cr_assert_eq(info->domain_attr->caps, FI_LOCAL_COMM);
}

Test(attr, secondary_alone_gets_all_primaries)
{
	hints->caps = FI_SOURCE;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_RMA | FI_ATOMIC |
		     FI_NAMED_RX_CTX | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
		     FI_REMOTE_WRITE | FI_SOURCE | COMM);
	cr_assert_eq(info->next->caps, FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SEND | FI_RECV |
		     FI_SOURCE | COMM);
}

Test(attr, caps_superset_is_refused)
{
	static const uint64_t extra[] = { FI_HMEM, FI_MULTICAST, FI_VARIABLE_MSG, FI_SOURCE_ERR,
		FI_COLLECTIVE, FI_AV_USER_ID };
	size_t i;

	for (i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		if (!extra[i])
			continue;       /* FI_VARIABLE_MSG is 0 in libfabric 2.x */
		hints->caps = FI_MSG | extra[i];
		fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	}
}

Test(attr, trigger_shared_av_and_named_rx_ctx_when_asked)
{
	/* secondary: every type, returned only when asked */
	hints->caps = FI_MSG | FI_TRIGGER | FI_SHARED_AV;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->caps, FI_MSG | FI_SEND | FI_RECV | COMM | FI_TRIGGER | FI_SHARED_AV);
	cr_assert(info->domain_attr->caps & FI_SHARED_AV);
	drop();
	/* scalable endpoints' addressing: RDM only */
	hints->caps = FI_MSG | FI_NAMED_RX_CTX;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	cr_assert(info->caps & FI_NAMED_RX_CTX);
}

Test(attr, tx_rx_and_domain_caps_are_checked)
{
	hints->tx_attr->caps = FI_MSG | FI_RECV | FI_SOURCE;	/* rx bits in tx caps: fine */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	drop();
	hints->rx_attr->caps = FI_RMA;         /* only the reliable types have it */
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	drop();
	hints->rx_attr->caps = FI_MULTICAST;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->rx_attr->caps = 0;
	hints->domain_attr->caps = FI_SHARED_AV;    /* a domain capability courier has */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert(info->domain_attr->caps & FI_SHARED_AV);
	drop();
	hints->domain_attr->caps = FI_HMEM;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, mode_bits_are_cleared)
{
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX | LEGACY_LOCAL_MR | FI_RX_CQ_DATA;
	hints->domain_attr->mode = ~0ULL;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->mode, 0);
	cr_assert_eq(info->domain_attr->mode, 0);
	cr_assert_eq(info->ep_attr->msg_prefix_size, 0);
}

/* ---- endpoint, tx and rx attributes ---- */

Test(attr, ep_type_filters)
{
	hints->ep_attr->type = FI_EP_RDM;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	drop();
	hints->ep_attr->type = FI_EP_DGRAM;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->type, FI_EP_DGRAM);
	drop();
	hints->ep_attr->type = FI_EP_MSG;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->type, FI_EP_MSG);
	hints->ep_attr->type = SOCK_STREAM_TYPE;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, msg_order_was_matches_nothing)
{
	hints->tx_attr->msg_order = FI_ORDER_WAS;   /* writes may overtake stalled sends */
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->msg_order = 0;
	hints->rx_attr->comp_order = LEGACY_ORDER_STRICT;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, msg_order_sas_only_rdm)
{
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(info->tx_attr->msg_order, RDM_ORDER);   /* all we give, SAS among it */
}

Test(attr, inject_size_bound_and_reflection)
{
	hints->tx_attr->inject_size = 4097;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->inject_size = 4096;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	drop();
	hints->tx_attr->inject_size = 100;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->tx_attr->inject_size, 100);
}

Test(attr, queue_sizes_and_iov_limits)
{
	hints->tx_attr->size = 1025;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->size = 0;
	hints->rx_attr->size = 1025;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->rx_attr->size = 0;
	hints->tx_attr->iov_limit = 9;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->iov_limit = 0;
	hints->tx_attr->rma_iov_limit = COUR_RMA_IOV_MAX + 1;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->rma_iov_limit = COUR_RMA_IOV_MAX;   /* RDM only */
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	drop();
	hints->tx_attr->rma_iov_limit = 0;
	hints->tx_attr->size = 16;
	hints->rx_attr->size = 32;
	hints->rx_attr->iov_limit = 8;
	hints->rx_attr->total_buffered_recv = 1 << 20;	/* a sizing hint, not a requirement */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->tx_attr->size, 16);
	cr_assert_eq(info->rx_attr->size, 32);
	cr_assert_eq(info->rx_attr->iov_limit, 8);
	cr_assert_eq(info->tx_attr->iov_limit, 8);
}

Test(attr, max_msg_size_splits_rdm_from_dgram)
{
	hints->ep_attr->max_msg_size = 64929;
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(info->ep_attr->max_msg_size, 0xffffffffULL);
	drop();
	hints->ep_attr->max_msg_size = 64920;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	hints->ep_attr->max_msg_size = 1ULL << 32;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, op_flags)
{
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE | FI_COMPLETION;
	hints->rx_attr->op_flags = FI_MULTI_RECV | FI_COMPLETION;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->tx_attr->op_flags, FI_DELIVERY_COMPLETE | FI_COMPLETION);
	cr_assert_eq(info->rx_attr->op_flags, FI_MULTI_RECV | FI_COMPLETION);
	hints->tx_attr->op_flags = FI_COMMIT_COMPLETE;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->tx_attr->op_flags = 0;
	hints->rx_attr->op_flags = FI_INJECT;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, contexts_protocol_auth)
{
	/* shared contexts (fi_stx_context, fi_srx_context) are offered and reflected */
	hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->ep_attr->tx_ctx_cnt, FI_SHARED_CONTEXT);
	cr_assert_eq(info->ep_attr->rx_ctx_cnt, 1);
	drop();
	/* more than one: a scalable endpoint, RDM only, up to COUR_SEP_MAX_CTX, reflected */
	hints->ep_attr->tx_ctx_cnt = 2;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(info->ep_attr->tx_ctx_cnt, 2);
	cr_assert(info->caps & FI_NAMED_RX_CTX);
	drop();
	hints->ep_attr->tx_ctx_cnt = COUR_SEP_MAX_CTX + 1;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->tx_ctx_cnt = 1;
	hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
	drop();
	hints->ep_attr->rx_ctx_cnt = COUR_SEP_MAX_CTX;
	get(V117, NULL, NULL, 0, hints, 1);
	cr_assert_eq(info->ep_attr->rx_ctx_cnt, COUR_SEP_MAX_CTX);
	drop();
	hints->ep_attr->rx_ctx_cnt = COUR_SEP_MAX_CTX + 1;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->rx_ctx_cnt = 1;
	hints->ep_attr->protocol = FI_PROTO_RXM;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->protocol = FI_PROTO_UDP;
	hints->ep_attr->protocol_version = 2;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->protocol_version = 1;
	hints->ep_attr->auth_key_size = 8;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->auth_key_size = 0;
	hints->ep_attr->mem_tag_format = 0x0000FFFF0000FFFFULL;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->ep_attr->mem_tag_format, 0x0000FFFF0000FFFFULL);
	cr_assert_eq(info->ep_attr->tx_ctx_cnt, 1);
}

/* an authentication key is a secret of 16 to 4096 bytes (cour_auth.c): a shorter one in any
 * hint, a size without a key or a key without a size find no match */
Test(attr, auth_key_hints_too_short_are_refused)
{
	static uint8_t key[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	/* the key given (fi_freeinfo frees it, so each is reset before teardown) */
	hints->domain_attr->auth_key = key;
	hints->domain_attr->auth_key_size = sizeof(key);
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->auth_key_size = 0;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->auth_key = NULL;
	hints->domain_attr->auth_key_size = sizeof(key);
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->auth_key_size = 0;

	hints->ep_attr->auth_key = key;
	hints->ep_attr->auth_key_size = sizeof(key);
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->auth_key_size = 0;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->auth_key = NULL;
#if FI_MAJOR_VERSION >= 2
	/* 2.x: "the keys are in the AV", which has none either */
	hints->ep_attr->auth_key_size = FI_AV_AUTH_KEY;
	fail(V20, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->ep_attr->auth_key_size = 0;
#endif

	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_null(info->domain_attr->auth_key);
	cr_assert_eq(info->domain_attr->auth_key_size, 0);
	cr_assert_null(info->ep_attr->auth_key);
	cr_assert_eq(info->ep_attr->auth_key_size, 0);
	/* an info carrying a short key, or a size without one, is refused when a domain or an
	 * endpoint is opened from it */
	info->ep_attr->auth_key_size = 4;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->ep_attr->auth_key_size = 0;
	info->domain_attr->auth_key_size = 4;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->domain_attr->auth_key_size = 0;
	cr_assert_eq(cour_info_check(info), 0);
}

/* a secret of the right size matches, and every info returned carries a copy of it */
Test(attr, auth_key_hints_are_copied)
{
	static uint8_t key[32] = "a job's 32-byte secret, in full";
	const struct fi_info *fi;

	hints->domain_attr->auth_key = key;
	hints->domain_attr->auth_key_size = sizeof(key);
	hints->ep_attr->auth_key = key;
	hints->ep_attr->auth_key_size = COUR_AUTH_KEY_MIN;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	hints->domain_attr->auth_key = NULL;    /* (static: not for fi_freeinfo) */
	hints->ep_attr->auth_key = NULL;
	for (fi = info; fi; fi = fi->next) {
		cr_assert_eq(fi->domain_attr->auth_key_size, sizeof(key));
		cr_assert_neq(fi->domain_attr->auth_key, key, "not a copy");
		cr_assert_arr_eq(fi->domain_attr->auth_key, key, sizeof(key));
		cr_assert_eq(fi->ep_attr->auth_key_size, COUR_AUTH_KEY_MIN);
		cr_assert_arr_eq(fi->ep_attr->auth_key, key, COUR_AUTH_KEY_MIN);
		cr_assert_eq(cour_info_check(fi), 0);
	}
	hints->domain_attr->auth_key_size = 0;
	hints->ep_attr->auth_key_size = 0;
}

/* 2.0 named FI_TAG_BITS (0), FI_TAG_MPI (1), FI_TAG_CCL (2); from 1 << 16 up the value is a
 * bit field as in 1.x, and what lies between is undefined */
Test(attr, mem_tag_format_of_2x_callers)
{
	static const uint64_t echoed[] = { 1, 2, 1ULL << 16, 0x0000FFFF0000FFFFULL, ~0ULL };
	static const uint64_t refused[] = { 3, 4, 0x100, 0xFFFF };
	const struct fi_info *fi;
	size_t i;

	get(V20, NULL, NULL, 0, hints, NTYPES);    /* FI_TAG_BITS: our 64 bits, none reserved */
	cr_assert_eq(info->ep_attr->mem_tag_format, 0xAAAAAAAAAAAAAAAAULL);
	drop();
	for (i = 0; i < sizeof(echoed) / sizeof(echoed[0]); i++) {
		hints->ep_attr->mem_tag_format = echoed[i];
		get(V20, NULL, NULL, 0, hints, NTYPES);
		for (fi = info; fi; fi = fi->next)
			cr_assert_eq(fi->ep_attr->mem_tag_format, echoed[i], "0x%llx",
				     (unsigned long long)echoed[i]);
		drop();
	}
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		hints->ep_attr->mem_tag_format = refused[i];
		fail(V20, NULL, NULL, 0, hints, -FI_ENODATA);
		fail(FI_VERSION(2, 1), NULL, NULL, 0, hints, -FI_ENODATA);
		/* 1.x: every non-zero value is a bit field, echoed */
		get(V117, NULL, NULL, 0, hints, NTYPES);
		cr_assert_eq(info->ep_attr->mem_tag_format, refused[i]);
		/* and an info holding one passes the check only for the version that allows it */
		cr_assert_eq(cour_info_check(info), 0);
		info->fabric_attr->api_version = V20;
		cr_assert_eq(cour_info_check(info), -FI_EINVAL);
		drop();
	}
}

/* ---- domain and fabric ---- */

Test(attr, progress_honoured)
{
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	cr_assert_eq(info->domain_attr->control_progress, FI_PROGRESS_AUTO);
	drop();
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	cr_assert_eq(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	drop();
	/* libfabric 1.21's control_progress and 2.x's progress (data_progress) may say
	 * FI_PROGRESS_CONTROL_UNIFIED: taken and echoed */
	hints->domain_attr->control_progress = (enum fi_progress)COUR_PROGRESS_CONTROL_UNIFIED;
	hints->domain_attr->data_progress = (enum fi_progress)COUR_PROGRESS_CONTROL_UNIFIED;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq((int)info->domain_attr->control_progress, COUR_PROGRESS_CONTROL_UNIFIED);
	cr_assert_eq((int)info->domain_attr->data_progress, COUR_PROGRESS_CONTROL_UNIFIED);
	hints->domain_attr->data_progress = (enum fi_progress)(COUR_PROGRESS_CONTROL_UNIFIED + 1);
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->data_progress = 7;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

/* 2.x has one progress field (1.x's data_progress, same place); control_progress follows it */
Test(attr, progress_of_2x_callers_sets_control_progress_too)
{
	const struct fi_info *fi;

#if FI_MAJOR_VERSION >= 2
	hints->domain_attr->progress = FI_PROGRESS_MANUAL;
#else
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
#endif
	get(V20, NULL, NULL, 0, hints, NTYPES);
	for (fi = info; fi; fi = fi->next) {
		cr_assert_eq(fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
		cr_assert_eq(fi->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	}
	drop();
	/* the returned info, given back, passes the check and asks the same */
	get(V20, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(cour_info_check(info), 0);
	drop();
	hints->domain_attr->data_progress = (enum fi_progress)COUR_PROGRESS_CONTROL_UNIFIED;
	get(FI_VERSION(2, 1), NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq((int)info->domain_attr->data_progress, COUR_PROGRESS_CONTROL_UNIFIED);
	cr_assert_eq((int)info->domain_attr->control_progress, COUR_PROGRESS_CONTROL_UNIFIED);
	drop();
	hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
	get(V20, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	cr_assert_eq(info->domain_attr->control_progress, FI_PROGRESS_AUTO);
	drop();
	/* 1.x keeps them apart (progress_honoured) */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	cr_assert_eq(info->domain_attr->control_progress, FI_PROGRESS_AUTO);
}

Test(attr, threading_rm_av_type_honoured)
{
	static const enum fi_threading levels[] = {
		FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN, FI_THREAD_COMPLETION,
		FI_THREAD_ENDPOINT,
	};
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		hints->domain_attr->threading = levels[i];
		get(V117, NULL, NULL, 0, hints, NTYPES);
		cr_assert_eq(info->domain_attr->threading, levels[i]);
		cr_assert_eq(info->next->domain_attr->threading, levels[i]);
		drop();
	}
	hints->domain_attr->resource_mgmt = FI_RM_DISABLED;
	hints->domain_attr->av_type = FI_AV_TABLE;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->resource_mgmt, FI_RM_DISABLED);
	cr_assert_eq(info->domain_attr->av_type, FI_AV_TABLE);
	drop();
	hints->domain_attr->av_type = FI_AV_MAP;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->av_type, FI_AV_MAP);
	hints->domain_attr->threading = 99;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, domain_limits)
{
	hints->domain_attr->mr_key_size = 8;
	hints->domain_attr->cq_data_size = 8;
	hints->domain_attr->mr_iov_limit = 1;
	hints->domain_attr->cq_cnt = 100000;	/* "optimal" counts do not exclude us */
	hints->domain_attr->mr_cnt = 1 << 20;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	hints->domain_attr->mr_key_size = 9;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->mr_key_size = 0;
	hints->domain_attr->cq_data_size = 9;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->cq_data_size = 0;
	hints->domain_attr->mr_iov_limit = 2;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->mr_iov_limit = 0;
	hints->domain_attr->max_ep_stx_ctx = 1024;
	drop();
	get(V117, NULL, NULL, 0, hints, NTYPES);
	drop();
	hints->domain_attr->max_ep_stx_ctx = 1025;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->max_ep_stx_ctx = 0;
	hints->domain_attr->max_err_data = 64;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

#if FI_MAJOR_VERSION >= 2
/* fi_domain(3): "Providers that cannot meet the requested max_group_id will fail fi_getinfo()";
 * courier has no peer groups */
Test(attr, max_group_id_is_refused)
{
	get(V20, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->max_group_id, 0);
	cr_assert_eq(info->next->domain_attr->max_group_id, 0);
	drop();
	hints->domain_attr->max_group_id = 1;
	fail(V20, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->domain_attr->max_group_id = UINT32_MAX;
	fail(FI_VERSION(2, 1), NULL, NULL, 0, hints, -FI_ENODATA);
	/* a 1.x caller has no such field: what the memory holds is no wish of its own */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->max_group_id, 0);
	info->fabric_attr->api_version = V20;
	info->domain_attr->max_group_id = 1;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->domain_attr->max_group_id = 0;
	cr_assert_eq(cour_info_check(info), 0);
}
#endif

#if FI_VERSION_GE(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 20))
/* one authentication key per endpoint (1.20): room for one is granted, for more refused */
Test(attr, max_ep_auth_key_is_one)
{
	get(V120, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->max_ep_auth_key, 0);
	drop();
	hints->domain_attr->max_ep_auth_key = 1;
	get(V120, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->max_ep_auth_key, 1);
	drop();
	hints->domain_attr->max_ep_auth_key = 2;
	fail(V120, NULL, NULL, 0, hints, -FI_ENODATA);
	fail(V20, NULL, NULL, 0, hints, -FI_ENODATA);
	/* before 1.20 the field did not exist */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->max_ep_auth_key, 0);
	info->fabric_attr->api_version = V120;
	info->domain_attr->max_ep_auth_key = 2;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->domain_attr->max_ep_auth_key = 0;
}
#endif

/* Progress runs every endpoint of a domain: only FI_THREAD_DOMAIN (the application serialises
 * the whole domain) without a progress thread may leave the lock a no-op (cour_domain_open) */
Test(attr, domain_lock_is_real_unless_the_application_serialises_the_domain)
{
	static const enum fi_threading racing[] = {
		FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT,
	};
	size_t i;

	for (i = 0; i < sizeof(racing) / sizeof(racing[0]); i++) {
		cr_assert(cour_attr_lock_needed(racing[i], false), "threading %d", racing[i]);
		cr_assert(cour_attr_lock_needed(racing[i], true), "threading %d", racing[i]);
	}
	cr_assert_not(cour_attr_lock_needed(FI_THREAD_DOMAIN, false));
	cr_assert(cour_attr_lock_needed(FI_THREAD_DOMAIN, true));
	/* two parties at most (the application's one thread and ours): a spin lock */
	cr_assert_eq(cour_attr_lock_kind(FI_THREAD_DOMAIN, true), COUR_LOCK_SPIN);
	cr_assert_eq(cour_attr_lock_kind(FI_THREAD_DOMAIN, false), COUR_LOCK_NONE);
	for (i = 0; i < sizeof(racing) / sizeof(racing[0]); i++)
		cr_assert_eq(cour_attr_lock_kind(racing[i], true), COUR_LOCK_MUTEX, "threading %d",
			     racing[i]);
}

Test(attr, names)
{
	hints->domain_attr->name = strdup("udp");
	hints->fabric_attr->name = strdup("courier");
	hints->fabric_attr->prov_name = strdup("ofi_rxm;courier");
	get(V117, NULL, NULL, 0, hints, NTYPES);
	drop();
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("COURIER");
	get(V117, NULL, NULL, 0, hints, NTYPES);
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("tcp");
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("courierx");
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = NULL;
	free(hints->domain_attr->name);
	hints->domain_attr->name = strdup("eth0");
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	free(hints->domain_attr->name);
	hints->domain_attr->name = NULL;
	free(hints->fabric_attr->name);
	hints->fabric_attr->name = strdup("tcp");
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

/* ---- mr_mode ---- */

Test(attr, mr_mode_legacy_api)
{
	get(V14, NULL, NULL, 0, NULL, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, COUR_MR_SCALABLE);
	cr_assert_eq(cour_attr_mr_mode(info), 0);
	drop();

	hints->domain_attr->mr_mode = COUR_MR_BASIC;
	get(V14, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, COUR_MR_BASIC);
	cr_assert_eq(info->fabric_attr->api_version, V14);
	cr_assert_eq(cour_attr_mr_mode(info), FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	drop();

	hints->domain_attr->mr_mode = COUR_MR_SCALABLE;
	get(V14, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, COUR_MR_SCALABLE);

	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR;	/* not a 1.4 value */
	fail(V14, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, mr_mode_bits)
{
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode,
		     FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED);
	cr_assert_eq(cour_attr_mr_mode(info), FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED);
	drop();

	/* what fi_info(1) asks: every bit but the legacy ones; FI_MR_LOCAL, which courier does
	 * not need, is cleared; FI_MR_ENDPOINT is kept where regions can be reached remotely
	 * (RDM, first), not for DGRAM, which has no RMA */
	hints->domain_attr->mr_mode = ~(COUR_MR_BASIC | COUR_MR_SCALABLE);
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(info->domain_attr->mr_mode, FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		     FI_MR_PROV_KEY | FI_MR_RMA_EVENT | FI_MR_ENDPOINT);
	cr_assert_eq(cour_attr_mr_mode(info), FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		     FI_MR_PROV_KEY | FI_MR_RMA_EVENT | FI_MR_ENDPOINT);
	cr_assert_eq(info->next->ep_attr->type, FI_EP_DGRAM);
	cr_assert_eq(info->next->domain_attr->mr_mode, FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
		     FI_MR_PROV_KEY | FI_MR_RMA_EVENT);
	drop();

	hints->domain_attr->mr_mode = FI_MR_HMEM | FI_MR_RAW | FI_MR_MMU_NOTIFY;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, 0);
	drop();

	hints->domain_attr->mr_mode = COUR_MR_BASIC;	/* never cleared, fi_mr(3) */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, COUR_MR_BASIC);

	hints->domain_attr->mr_mode = COUR_MR_BASIC | FI_MR_LOCAL;	/* BASIC must be alone */
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, mr_mode_endpoint_only_with_remote_access)
{
	/* fabtests' and Open MPI 5's way: the application binds and enables when told to */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->caps = FI_RMA | FI_ATOMIC;
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->domain_attr->mr_mode, FI_MR_ENDPOINT | FI_MR_VIRT_ADDR |
		     FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	drop();

	hints->domain_attr->mr_mode = FI_MR_ENDPOINT;
	hints->caps = FI_RMA | FI_REMOTE_WRITE;
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->domain_attr->mr_mode, FI_MR_ENDPOINT, "offsets and application "
		     "keys under FI_MR_ENDPOINT");
	drop();

	/* no region of these endpoints can be reached: a binding would guard nothing */
	hints->caps = FI_RMA | FI_WRITE | FI_READ;
	get(V117, NULL, NULL, 0, hints, NRELIABLE);
	cr_assert_eq(info->domain_attr->mr_mode, 0, "initiator only");
	drop();
	hints->caps = FI_MSG | FI_TAGGED;
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->domain_attr->mr_mode, 0, "messages only");
	cr_assert_eq(info->next->domain_attr->mr_mode, 0);
	drop();

	/* legacy values stay alone */
	hints->caps = 0;
	hints->domain_attr->mr_mode = COUR_MR_SCALABLE | FI_MR_ENDPOINT;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

/* ---- addresses ---- */

Test(attr, node_service_give_dest_addr)
{
	get(V117, "127.0.0.1", "4567", 0, NULL, NTYPES);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 4567);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 0);
	assert_in(info->next->dest_addr, info->next->dest_addrlen, "127.0.0.1", 4567);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN);
}

Test(attr, fi_source_gives_src_addr)
{
	get(V117, "127.0.0.1", "4567", FI_SOURCE, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 4567);
	cr_assert_null(info->dest_addr);
	drop();

	get(V117, NULL, "4568", FI_SOURCE, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 4568);
	cr_assert_null(info->dest_addr);
}

Test(attr, iface_addr_parameter_is_the_default_source)
{
	cour_params.iface_addr = "127.0.0.2";
	get(V117, NULL, "4569", FI_SOURCE, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.2", 4569);
	drop();
	get(V117, "127.0.0.1", "4570", 0, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.2", 0);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 4570);
}

/* One value for every host of a job: an interface, or a subnet, finds each host's own address. */
Test(attr, iface_addr_names_an_interface_or_a_subnet)
{
	cour_params.iface_addr = "lo";
	get(V117, NULL, "4571", FI_SOURCE, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 4571);
	drop();
	get(V117, NULL, NULL, 0, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 0);
	drop();

	cour_params.iface_addr = "127.0.0.0/8";
	get(V117, NULL, NULL, 0, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 0);
	drop();
	get(V117, NULL, "4572", FI_SOURCE, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 4572);
	drop();
	cour_params.iface_addr = "127.0.0.1/32";
	get(V117, NULL, NULL, 0, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 0);
	drop();

	/* the benchmarking range: never on an interface here outside the tests' namespaces */
	cour_params.iface_addr = "198.18.0.0/15";
	fail(V117, NULL, NULL, 0, NULL, -FI_ENODATA);
	cour_params.iface_addr = "127.0.0.0/33";
	fail(V117, NULL, NULL, 0, NULL, -FI_EINVAL);
	cour_params.iface_addr = "lo/8";
	fail(V117, NULL, NULL, 0, NULL, -FI_EINVAL);
	cour_params.iface_addr = "::1/128";
	hints->addr_format = FI_SOCKADDR_IN;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

/* A peer on another interface gets the source address the kernel routes from, not loopback. */
Test(attr, default_source_follows_the_route)
{
	struct ifaddrs *ifs, *ifa;
	char ip[INET_ADDRSTRLEN] = "";

	cr_assert_eq(getifaddrs(&ifs), 0);
	for (ifa = ifs; ifa && !ip[0]; ifa = ifa->ifa_next) {
		const struct sockaddr_in *sin = (const void *)ifa->ifa_addr;

		if (sin && sin->sin_family == AF_INET &&
		    ntohl(sin->sin_addr.s_addr) >> 24 != 127 && (ifa->ifa_flags & IFF_UP))
			inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
	}
	freeifaddrs(ifs);
	if (!ip[0])
		cr_skip_test("no non-loopback IPv4 address here");
	get(V117, ip, "4567", FI_NUMERICHOST, NULL, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, ip, 0);
	assert_in(info->dest_addr, info->dest_addrlen, ip, 4567);
}

Test(attr, unresolvable_node, .timeout = 30)
{
	fail(V117, "no-such-host.invalid", "4567", 0, NULL, -FI_ENODATA);
	fail(V117, "localhost", "4567", FI_NUMERICHOST, NULL, -FI_ENODATA);
	fail(V117, "127.0.0.1", "70000", 0, NULL, -FI_ENODATA);
}

Test(attr, name_resolution_without_numerichost)
{
	get(V117, "localhost", "4567", 0, NULL, NTYPES);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 4567);
}

Test(attr, ipv6)
{
	get(V117, "::1", "5000", 0, NULL, NTYPES);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN6);
	assert_in6(info->dest_addr, info->dest_addrlen, "::1", 5000);
	assert_in6(info->src_addr, info->src_addrlen, "::1", 0);
	drop();

	hints->addr_format = FI_SOCKADDR_IN6;
	get(V117, NULL, "5001", FI_SOURCE, hints, NTYPES);
	assert_in6(info->src_addr, info->src_addrlen, "::1", 5001);

	hints->addr_format = FI_SOCKADDR_IN;
	fail(V117, "::1", "5000", 0, hints, -FI_ENODATA);
	hints->addr_format = FI_SOCKADDR_IN6;
	fail(V117, "127.0.0.1", "5000", FI_NUMERICHOST, hints, -FI_ENODATA);
}

Test(attr, addr_format)
{
	hints->addr_format = FI_ADDR_STR;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->addr_format = FI_SOCKADDR_IB;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->addr_format = FI_SOCKADDR;
	get(V117, "127.0.0.1", "1", 0, hints, NTYPES);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN);
}

/* FI_SOCKADDR_IP (2.3): IPv4 or IPv6; the answer names the concrete format of its addresses */
Test(attr, sockaddr_ip_answers_the_concrete_family)
{
	struct sockaddr_in6 src = { .sin6_family = AF_INET6, .sin6_port = htons(7000),
				    .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	const struct fi_info *fi;

	cr_assert_eq(COUR_SOCKADDR_IP, 17);
	hints->addr_format = COUR_SOCKADDR_IP;
	get(V23, "127.0.0.1", "4000", 0, hints, NTYPES);
	for (fi = info; fi; fi = fi->next)
		cr_assert_eq(fi->addr_format, FI_SOCKADDR_IN);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 4000);
	drop();
	get(V23, "::1", "4001", 0, hints, NTYPES);
	for (fi = info; fi; fi = fi->next)
		cr_assert_eq(fi->addr_format, FI_SOCKADDR_IN6);
	assert_in6(info->src_addr, info->src_addrlen, "::1", 0);
	drop();
	/* no address named: loopback, IPv4 as for FI_FORMAT_UNSPEC */
	get(V23, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 0);
	drop();
	/* the family of hints->src_addr decides */
	hints->src_addr = malloc(sizeof(src));
	cr_assert_not_null(hints->src_addr);
	memcpy(hints->src_addr, &src, sizeof(src));
	hints->src_addrlen = sizeof(src);
	get(V23, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN6);
	assert_in6(info->src_addr, info->src_addrlen, "::1", 7000);
	/* an info saying FI_SOCKADDR_IP passes the check; its addresses must agree */
	info->addr_format = COUR_SOCKADDR_IP;
	cr_assert_eq(cour_info_check(info), 0);
	info->src_addrlen = 16;	/* an IPv6 family in a sockaddr_in's length */
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->src_addrlen = sizeof(src);
	drop();
	/* a 1.x caller never sends 17; taking it anyway costs nothing */
	get(V117, NULL, NULL, 0, hints, NTYPES);
	cr_assert_eq(info->addr_format, FI_SOCKADDR_IN6);
	/* the values around it stay refused */
	hints->addr_format = COUR_SOCKADDR_IP + 1;
	fail(V23, NULL, NULL, 0, hints, -FI_ENODATA);
	hints->addr_format = COUR_SOCKADDR_IP - 1;	/* FI_ADDR_UCX */
	fail(V23, NULL, NULL, 0, hints, -FI_ENODATA);
}

Test(attr, hint_addresses_are_copied)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(7777) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(8888) };

	inet_pton(AF_INET, "127.0.0.5", &src.sin_addr);
	inet_pton(AF_INET, "127.0.0.6", &dst.sin_addr);
	hints->addr_format = FI_SOCKADDR_IN;
	hints->src_addr = malloc(sizeof(src));
	memcpy(hints->src_addr, &src, sizeof(src));
	hints->src_addrlen = sizeof(src);
	hints->dest_addr = malloc(sizeof(dst));
	memcpy(hints->dest_addr, &dst, sizeof(dst));
	hints->dest_addrlen = sizeof(dst);
	get(V117, NULL, NULL, 0, hints, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.5", 7777);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.6", 8888);
	cr_assert_neq(info->src_addr, hints->src_addr);
	drop();

	/* with node/service the hints' dest_addr gives way, src_addr stays */
	get(V117, "127.0.0.1", "9999", 0, hints, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.5", 7777);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.1", 9999);
	drop();

	/* with FI_SOURCE the hints' src_addr gives way, dest_addr stays */
	get(V117, "127.0.0.1", "9998", FI_SOURCE, hints, NTYPES);
	assert_in(info->src_addr, info->src_addrlen, "127.0.0.1", 9998);
	assert_in(info->dest_addr, info->dest_addrlen, "127.0.0.6", 8888);
	drop();

	hints->src_addrlen = 4;
	fail(V117, NULL, NULL, 0, hints, -FI_EINVAL);
	hints->src_addrlen = sizeof(src);
	hints->addr_format = FI_SOCKADDR_IN6;
	fail(V117, NULL, NULL, 0, hints, -FI_ENODATA);
}

/* ---- giving an info back ---- */

Test(attr, returned_infos_work_as_hints_and_pass_the_check)
{
	struct fi_info *out, *fi;
	int ret;

	hints->caps = FI_TAGGED | FI_SOURCE;
	hints->domain_attr->mr_mode = FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	get(V117, "127.0.0.1", "4567", 0, hints, NTYPES);
	for (fi = info; fi; fi = fi->next) {
		cr_assert_eq(cour_info_check(fi), 0);
		ret = cour_getinfo(V117, NULL, NULL, 0, fi, &out);
		cr_assert_eq(ret, 0);
		cr_assert_eq(count(out), 1);
		cr_assert_eq(out->ep_attr->type, fi->ep_attr->type);
		cr_assert_eq(out->caps, fi->caps);
		cr_assert_eq(out->domain_attr->mr_mode, FI_MR_PROV_KEY);
		cr_assert_eq(out->domain_attr->threading, FI_THREAD_DOMAIN);
		assert_in(out->dest_addr, out->dest_addrlen, "127.0.0.1", 4567);
		fi_freeinfo(out);
	}
}

Test(attr, info_check_refuses_what_we_never_return)
{
	get(V14, NULL, NULL, 0, NULL, NTYPES);
	cr_assert_eq(cour_info_check(info), 0);
	cr_assert_eq(cour_info_check(info->next), 0);
	info->tx_attr->size = 1025;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->tx_attr->size = 1024;
	info->tx_attr->inject_size = 4097;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->tx_attr->inject_size = 4096;
	info->rx_attr->iov_limit = 9;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->rx_attr->iov_limit = 8;
	info->caps |= FI_MULTICAST;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->caps &= ~FI_MULTICAST;
	info->next->caps |= FI_RMA;                /* datagram endpoints have no RMA */
	cr_assert_eq(cour_info_check(info->next), -FI_EINVAL);
	info->next->caps &= ~FI_RMA;
	info->ep_attr->rx_ctx_cnt = COUR_SEP_MAX_CTX + 1;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	cr_assert_eq(cour_info_check(info), 0);
	info->ep_attr->rx_ctx_cnt = 1;
	info->ep_attr->type = SOCK_DGRAM_TYPE;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->ep_attr->type = FI_EP_RDM;
	info->fabric_attr->api_version = V117;
	info->domain_attr->mr_mode = FI_MR_HMEM;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->domain_attr->mr_mode = 0;
	info->src_addrlen = 3;
	cr_assert_eq(cour_info_check(info), -FI_EINVAL);
	info->src_addrlen = 16;
	info->ep_attr->max_msg_size = 64929;
	cr_assert_eq(cour_info_check(info), 0);
	cr_assert_eq(cour_info_check(info->next), 0);
	info->next->ep_attr->max_msg_size = 64929;
	cr_assert_eq(cour_info_check(info->next), -FI_EINVAL);
	cr_assert_eq(cour_info_check(NULL), -FI_EINVAL);
}
