/*
 * Named AVs shared by two processes of one host (fi_av(3) name, FI_READ, map_addr). The parent
 * P creates the AV and fills it; the child C opens it read-only, finds what P inserted (also what
 * P inserts and removes later), sends P a message through an fi_addr_t taken from map_addr, is
 * refused inserts and removes (-FI_EACCES), joins the AV as a second writer and inserts. Then
 * what must fail: FI_READ of a name no one created (-FI_ENOENT), FI_READ without a name
 * (-FI_EINVAL), a name too long (-FI_EINVAL), a name its creator closed (-FI_ENOENT: unlinked),
 * and a name whose creator died without closing it (-FI_ENOENT for FI_READ; a writer replaces
 * it, empty). The two processes take steps in turn over a pipe pair; every wait is bounded.
 * Exit 0 when every check held in both.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FT_CHECK_NAME "shared_av"
#include "ft_check.h"

#define WAIT_MS 5000




static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *dom;
static struct fid_ep *ep;
static struct fid_cq *cq;
static int to_peer = -1, from_peer = -1;
static char name[64], stale_name[64];


/* One byte each way per step: a step the other side failed stops both. */
static int signal_peer(char step)
{
	CHECK(write(to_peer, &step, 1) == 1, "pipe write");
	return 0;
}

static int wait_peer(char step)
{
	struct pollfd p = { .fd = from_peer, .events = POLLIN };
	char got = 0;

	CHECK(poll(&p, 1, WAIT_MS * 2) == 1, "the other process never reached step %c", step);
	CHECK(read(from_peer, &got, 1) == 1 && got == step, "step %c, the other sent %c", step,
	      got);
	return 0;
}

static int av_open(const char *n, uint64_t flags, struct fid_av **av, fi_addr_t **map)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .name = n, .flags = flags };
	int ret = fi_av_open(dom, &aa, av, NULL);

	if (!ret && map)
		*map = aa.map_addr;
	return ret;
}

static void sin_of(struct sockaddr_in *s, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* fi_addr `fa` of av holds 127.0.0.1:port */
static int has_port(struct fid_av *av, fi_addr_t fa, uint16_t port)
{
	struct sockaddr_in s;
	size_t len = sizeof(s);

	CALL(fi_av_lookup(av, fa, &s, &len));
	CHECK(len == sizeof(s) && s.sin_family == AF_INET && ntohs(s.sin_port) == port,
	      "fi_addr %lu: port %u, want %u", (unsigned long)fa, ntohs(s.sin_port), port);
	return 0;
}

static int insert_port(struct fid_av *av, uint16_t port, fi_addr_t want)
{
	struct sockaddr_in s;
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	sin_of(&s, port);
	CHECK(fi_av_insert(av, &s, 1, &fa, 0, NULL) == 1, "insert of port %u", port);
	CHECK(fa == want, "port %u got fi_addr %lu, want %lu", port, (unsigned long)fa,
	      (unsigned long)want);
	return 0;
}

static int open_common(void)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_MSG };

	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, info, &dom, NULL));
	CALL(fi_cq_open(dom, &ca, &cq, NULL));
	CALL(fi_endpoint(dom, info, &ep, NULL));
	return 0;
}

static int cq_wait(struct fi_cq_msg_entry *e)
{
	uint64_t end = now_ms() + WAIT_MS;

	while (now_ms() < end) {
		ssize_t n = fi_cq_read(cq, e, 1);

		if (n == 1)
			return 0;
		CHECK(n == -FI_EAGAIN, "fi_cq_read: %zd (%s)", n, fi_strerror((int)-n));
	}
	CHECK(0, "no completion in %d ms", WAIT_MS);
}

static int parent(void)
{
	struct fid_av *av, *probe;
	struct fi_cq_msg_entry e;
	fi_addr_t *map = NULL, fa;
	char addr[64], buf[64] = { 0 };
	size_t len = sizeof(addr);

	CALL(open_common());
	CALL(wait_peer('0'));                   /* C looked for the name before it existed */
	CALL(av_open(name, 0, &av, &map));
	CHECK(map != NULL, "no map_addr returned for a named AV");
	CALL(fi_ep_bind(ep, &av->fid, 0));
	CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_enable(ep));
	CALL(fi_getname(&ep->fid, addr, &len));
	CHECK(fi_av_insert(av, addr, 1, &fa, 0, NULL) == 1 && fa == 0, "own address first");
	if (insert_port(av, 1, 1) || insert_port(av, 2, 2))
		return -1;
	for (fi_addr_t i = 0; i < 3; i++)
		CHECK(map[i] == i, "map_addr[%lu] = %lu", (unsigned long)i, (unsigned long)map[i]);
	CALL(fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, (void *)0x77));
	CALL(signal_peer('1'));

	CALL(wait_peer('2'));                   /* C read the AV and sent */
	CALL(cq_wait(&e));
	CHECK(e.op_context == (void *)0x77 && (e.flags & FI_RECV), "context %p flags %#lx",
	      e.op_context, (unsigned long)e.flags);
	CHECK(e.len == 15 && !memcmp(buf, "through the map", 15), "got %zu bytes \"%.*s\"",
	      e.len, (int)e.len, buf);
	if (insert_port(av, 4, 3))
		return -1;
	CALL(fi_av_remove(av, (fi_addr_t[]){ 1 }, 1, 0));
	CALL(signal_peer('3'));

	CALL(wait_peer('4'));                   /* C joined as a writer and inserted port 5 */
	if (has_port(av, 4, 5))
		return -1;
	CHECK(map[4] == 4, "map_addr[4] = %lu", (unsigned long)map[4]);
	/* P opens its own name a second time: the same table, not a new one */
	CALL(av_open(name, FI_READ, &probe, NULL));
	if (has_port(probe, 2, 2))
		return -1;
	CALL(fi_close(&probe->fid));
	CALL(fi_close(&ep->fid));
	ep = NULL;
	CALL(fi_close(&av->fid));               /* the creator closes: the name goes */
	CALL(signal_peer('5'));

	CALL(wait_peer('6'));                   /* C made stale_name and dies without closing */
	return 0;
}

static int child(void)
{
	struct fid_av *ro, *rw, *gone;
	fi_addr_t *map = NULL, fa;
	struct fi_cq_msg_entry e;
	struct sockaddr_in s;
	char msg[] = "through the map";
	char longname[256];

	ft_check_who = "C";
	CALL(open_common());
	CHECK(av_open(name, FI_READ, &gone, NULL) == -FI_ENOENT, "FI_READ before it existed");
	CHECK(av_open(NULL, FI_READ, &gone, NULL) == -FI_EINVAL, "FI_READ without a name");
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(av_open(longname, 0, &gone, NULL) == -FI_EINVAL, "a 255-byte name");
	CALL(signal_peer('0'));

	CALL(wait_peer('1'));                   /* P made the AV and inserted 3 */
	CALL(av_open(name, FI_READ, &ro, &map));
	CHECK(map != NULL, "no map_addr on an FI_READ open");
	CHECK(map[0] == 0 && map[1] == 1 && map[2] == 2, "map_addr holds %lu %lu %lu",
	      (unsigned long)map[0], (unsigned long)map[1], (unsigned long)map[2]);
	if (has_port(ro, 1, 1) || has_port(ro, 2, 2))
		return -1;
	sin_of(&s, 9);
	CHECK(fi_av_insert(ro, &s, 1, &fa, 0, NULL) == -FI_EACCES, "insert into FI_READ AV");
	CHECK(fi_av_remove(ro, &map[1], 1, 0) == -FI_EACCES, "remove from FI_READ AV");
	CALL(fi_ep_bind(ep, &ro->fid, 0));
	CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_enable(ep));
	CALL(fi_send(ep, msg, 15, NULL, map[0], (void *)0x55));
	CALL(cq_wait(&e));
	CHECK(e.op_context == (void *)0x55 && (e.flags & FI_SEND), "send context %p",
	      e.op_context);
	CALL(signal_peer('2'));

	CALL(wait_peer('3'));                   /* P inserted port 4 and removed fi_addr 1 */
	if (has_port(ro, 3, 4))
		return -1;
	CHECK(map[3] == 3, "map_addr[3] = %lu", (unsigned long)map[3]);
	CHECK(fi_av_lookup(ro, 1, &s, &(size_t){ sizeof(s) }) == -FI_EINVAL,
	      "fi_addr 1 still there after P removed it");
	CALL(av_open(name, 0, &rw, NULL));      /* a second writer joins */
	if (insert_port(rw, 5, 4) || has_port(ro, 4, 5))
		return -1;
	CALL(fi_close(&rw->fid));               /* not the creator: the name stays */
	CALL(signal_peer('4'));

	CALL(wait_peer('5'));                   /* P closed the AV */
	CHECK(av_open(name, FI_READ, &gone, NULL) == -FI_ENOENT, "FI_READ after its creator "
	      "closed it");
	if (has_port(ro, 2, 2))                 /* the mapping outlives the name */
		return -1;
	CALL(av_open(stale_name, 0, &gone, NULL));
	if (insert_port(gone, 7, 0))
		return -1;
	CALL(signal_peer('6'));
	fflush(NULL);
	_exit(failures ? 1 : 0);                /* dies holding stale_name */
}

/* After C died holding stale_name: absent for readers, replaced (empty) for a writer. */
static int after_child(void)
{
	struct fid_av *av;
	struct sockaddr_in s;

	CHECK(av_open(stale_name, FI_READ, &av, NULL) == -FI_ENOENT, "FI_READ of a dead "
	      "creator's AV");
	CALL(av_open(stale_name, 0, &av, NULL));
	CHECK(fi_av_lookup(av, 0, &s, &(size_t){ sizeof(s) }) == -FI_EINVAL,
	      "the replaced AV still holds the dead creator's entry");
	if (insert_port(av, 8, 0))
		return -1;
	CALL(fi_close(&av->fid));
	CHECK(av_open(stale_name, FI_READ, &av, NULL) == -FI_ENOENT, "FI_READ after close");
	return 0;
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	int p2c[2], c2p[2], status = 0, ret;
	pid_t pid;

	if (!hints)
		return 2;
	snprintf(name, sizeof(name), "courier-test/shared_av.%d", (int)getpid());
	snprintf(stale_name, sizeof(stale_name), "courier-test-stale.%d", (int)getpid());
	if (pipe(p2c) || pipe(c2p))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	ft_check_who = pid ? "P" : "C";
	if (pid == 0) {
		to_peer = c2p[1];
		from_peer = p2c[0];
	} else {
		to_peer = p2c[1];
		from_peer = c2p[0];
	}
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_SHARED_AV;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "courier");
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "shared_av %s: fi_getinfo: %s\n", pid ? "P" : "C",
			fi_strerror(-ret));
		if (pid)
			waitpid(pid, NULL, 0);
		return 2;
	}
	if (pid == 0)
		return child() ? 1 : 0;         /* (child() exits itself when it gets through) */

	printf("parent/child steps: %s\n", parent() ? "FAILED" : "ok");
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "shared_av: the child failed (status %#x)\n", status);
		failures++;
	}
	printf("dead creator: %s\n", after_child() ? "FAILED" : "ok");
	if (ep)
		fi_close(&ep->fid);
	fi_close(&cq->fid);
	fi_close(&dom->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	printf("shared_av: %s\n", failures ? "FAILED" : "all checks held");
	return failures ? 1 : 0;
}
