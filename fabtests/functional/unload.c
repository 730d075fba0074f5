/*
 * Objects left open at exit: an application that returns from main with a domain still
 * open (here its close is refused with -FI_EBUSY: an endpoint, its CQ and AV are open on it) and a passive
 * endpoint listening. libfabric unloads the provider at exit; before courier's cleanup
 * stopped its threads, the domain's progress thread (woken by the retransmit timer of a send
 * to nobody) and the listener could run on in unmapped code and crash the exiting process.
 * The script checks the exit status and courier's log line naming the threads it stopped.
 */
#define FT_CHECK_NAME "unload"
#include "ft_check.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct fi_info *getinfo(const char *prov, enum fi_ep_type type)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	if (!hints)
		return NULL;
	hints->ep_attr->type = type;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	hints->fabric_attr->prov_name = strdup(prov);
	if (fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info))
		info = NULL;
	fi_freeinfo(hints);
	return info;
}

/* A UDP port on loopback that nobody reads: bound, so the kernel does not answer with
 * ICMP port-unreachable, and never read, so the sender retransmits until it gives up. */
static int silent_port(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)sin, sizeof(*sin)) ||
	    getsockname(fd, (struct sockaddr *)sin, &len))
		return -1;
	return fd;
}

static int leave_open(const char *prov)
{
	struct fi_info *rdm = getinfo(prov, FI_EP_RDM), *msg = getinfo(prov, FI_EP_MSG);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_eq *eq;
	struct fid_pep *pep;
	struct sockaddr_in peer;
	fi_addr_t to;
	static char buf[64];

	CHECK(rdm && msg, "no RDM or MSG info from %s", prov);
	CHECK(rdm->domain_attr->data_progress == FI_PROGRESS_AUTO, "progress %d",
	      rdm->domain_attr->data_progress);
	CHECK(silent_port(&peer) >= 0, "no silent port");
	CALL(fi_fabric(rdm->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, rdm, &domain, NULL));
	CALL(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CALL(fi_av_open(domain, &av_attr, &av, NULL));
	CALL(fi_endpoint(domain, rdm, &ep, NULL));
	CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_ep_bind(ep, &av->fid, 0));
	CALL(fi_enable(ep));
	CHECK(fi_av_insert(av, &peer, 1, &to, 0, NULL) == 1, "av insert");
	CALL(fi_send(ep, buf, sizeof(buf), NULL, to, NULL));
	/* the endpoint stays open too: its close would linger for the send's acknowledgement */
	CHECK(fi_close(&domain->fid) == -FI_EBUSY, "domain closed under open objects");

	CALL(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	CALL(fi_passive_ep(fabric, msg, &pep, NULL));
	CALL(fi_pep_bind(pep, &eq->fid, 0));
	CALL(fi_listen(pep));
	/* let both threads reach their waits before main returns */
	usleep(20000);
	return 0;
}

int main(int argc, char **argv)
{
	int ret = leave_open(argc > 1 ? argv[1] : "courier");

	printf("unload: %s\n", ret || failures ? "FAILED" : "left a domain and a listener open");
	return ret || failures ? 1 : 0;
}
