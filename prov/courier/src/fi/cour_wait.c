/*
 * Wait sets (fi_wait_open, fi_wait(3)): one place to sleep on several CQs, counters and EQs.
 *
 * A member opened with FI_WAIT_SET behaves as with FI_WAIT_FD (its eventfd is readable exactly
 * while it has something to report: a CQ entry or error, a counter change not yet read, an EQ
 * event), and that fd joins the set's epoll instance. So the set is ready when the epoll fd is
 * readable, which is also what FI_GETWAIT hands an application that polls it itself. fi_wait
 * progresses the members' domains first (what already arrived must not wait behind a sleep),
 * then sleeps on the epoll fd and on those domains' sockets and timers, so it works with and
 * without a progress thread.
 */
#include "cour_cq.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define COUR_WAIT_DOMS 16       /* distinct domains among a set's members */

struct cour_wait {
	struct fid_wait      wait_fid;
	struct cour_fabric  *fabric;
	pthread_mutex_t      mutex;        /* members and domains; fi_wait copies them out */
	int                  epfd;
	int                  members;      /* close refuses while > 0 */
	int                  ndoms;
	struct cour_domain  *doms[COUR_WAIT_DOMS];
	int                  dom_refs[COUR_WAIT_DOMS];
};

static struct fi_ops cour_wait_fi_ops;
static struct fi_ops_wait cour_wait_ops;

static struct cour_wait *cour_wait_of(struct fid_wait *w)
{
	return COUR_CONTAINER_OF(w, struct cour_wait, wait_fid);
}

int cour_wait_set_join(struct fid_wait *set, struct cour_fabric *fabric, struct cour_domain *dom,
		       int fd, enum fi_log_subsys subsys, const char *what)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct cour_wait *w;
	int i, ret = 0;

	if (!set || set->fid.fclass != FI_CLASS_WAIT || set->fid.ops != &cour_wait_fi_ops) {
		COUR_WARN(subsys, "%s: FI_WAIT_SET needs a courier wait set in wait_set\n", what);
		return -FI_EINVAL;
	}
	w = cour_wait_of(set);
	if (w->fabric != fabric) {
		COUR_WARN(subsys, "%s: the wait set belongs to another fabric\n", what);
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&w->mutex);
	for (i = 0; dom && i < w->ndoms && w->doms[i] != dom; i++)
		;
	if (dom && i == w->ndoms && w->ndoms == COUR_WAIT_DOMS) {
		COUR_WARN(subsys, "%s: a wait set spans at most %d domains\n", what,
			  COUR_WAIT_DOMS);
		ret = -FI_ENOSPC;
		goto out;
	}
	ev.data.fd = fd;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		COUR_WARN(subsys, "%s: epoll_ctl: %s\n", what, strerror(errno));
		ret = -FI_ENOMEM;
		goto out;
	}
	if (dom) {
		if (i == w->ndoms) {
			w->doms[w->ndoms] = dom;
			w->dom_refs[w->ndoms++] = 0;
		}
		w->dom_refs[i]++;
	}
	w->members++;
out:
	pthread_mutex_unlock(&w->mutex);
	return ret;
}

void cour_wait_set_leave(struct fid_wait *set, struct cour_domain *dom, int fd)
{
	struct cour_wait *w = cour_wait_of(set);

	pthread_mutex_lock(&w->mutex);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
	for (int i = 0; dom && i < w->ndoms; i++) {
		if (w->doms[i] != dom)
			continue;
		if (--w->dom_refs[i] == 0) {
			w->ndoms--;
			w->doms[i] = w->doms[w->ndoms];
			w->dom_refs[i] = w->dom_refs[w->ndoms];
		}
		break;
	}
	w->members--;
	pthread_mutex_unlock(&w->mutex);
}

/* Is some member's fd readable now? */
static bool cour_wait_ready(struct cour_wait *w)
{
	struct epoll_event ev;

	return epoll_wait(w->epfd, &ev, 1, 0) > 0;
}

static int cour_wait_wait(struct fid_wait *set, int timeout)
{
	struct cour_wait *w = cour_wait_of(set);
	uint64_t deadline = timeout >= 0 ? cour_now_us() + (uint64_t)timeout * 1000 : 0;
	struct cour_domain *doms[COUR_WAIT_DOMS];
	int ndoms;

	for (;;) {
		pthread_mutex_lock(&w->mutex);
		ndoms = w->ndoms;
		memcpy(doms, w->doms, (size_t)ndoms * sizeof(doms[0]));
		pthread_mutex_unlock(&w->mutex);
		for (int i = 0; i < ndoms; i++)
			cour_domain_progress(doms[i]);
		if (cour_wait_ready(w))
			return 0;
		if (deadline && cour_now_us() >= deadline)
			return -FI_ETIMEDOUT;
		cour_domains_wait(doms, ndoms, w->epfd, cour_wait_remaining_ms(deadline));
	}
}

static int cour_wait_control(struct fid *fid, int command, void *arg)
{
	struct cour_wait *w = COUR_CONTAINER_OF(fid, struct cour_wait, wait_fid.fid);

	return cour_wait_getwait(w->epfd, command, arg);
}

static int cour_wait_close(struct fid *fid)
{
	struct cour_wait *w = COUR_CONTAINER_OF(fid, struct cour_wait, wait_fid.fid);
	int members;

	pthread_mutex_lock(&w->mutex);
	members = w->members;
	pthread_mutex_unlock(&w->mutex);
	if (members) {
		COUR_WARN(FI_LOG_FABRIC, "fi_close(wait set): %d CQs, counters or EQs still use "
			  "it\n", members);
		return -FI_EBUSY;
	}
	close(w->epfd);
	pthread_mutex_destroy(&w->mutex);
	cour_ref_dec(&w->fabric->refcnt);
	free(w);
	return 0;
}

int cour_wait_open(struct fid_fabric *fabric_fid, struct fi_wait_attr *attr,
		   struct fid_wait **waitset)
{
	struct cour_fabric *fabric = COUR_CONTAINER_OF(fabric_fid, struct cour_fabric, fabric_fid);
	struct cour_wait *w;

	if (!attr || !waitset)
		return -FI_EINVAL;
	if (attr->flags) {
		COUR_WARN(FI_LOG_FABRIC, "fi_wait_open: flags %#" PRIx64 " (none are defined)\n",
			  attr->flags);
		return -FI_EBADFLAGS;
	}
	if (attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_FD) {
		COUR_WARN(FI_LOG_FABRIC, "fi_wait_open: wait object %d not supported (use "
			  "FI_WAIT_UNSPEC or FI_WAIT_FD)\n", (int)attr->wait_obj);
		return -FI_ENOSYS;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -FI_ENOMEM;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0) {
		COUR_WARN(FI_LOG_FABRIC, "fi_wait_open: epoll_create1: %s\n", strerror(errno));
		free(w);
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&w->mutex, NULL);
	w->fabric = fabric;
	w->wait_fid.fid.fclass = FI_CLASS_WAIT;
	w->wait_fid.fid.context = NULL;
	w->wait_fid.fid.ops = &cour_wait_fi_ops;
	w->wait_fid.ops = &cour_wait_ops;
	cour_ref_inc(&fabric->refcnt);
	*waitset = &w->wait_fid;
	return 0;
}

static struct fi_ops cour_wait_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_wait_close,
	.bind = cour_no_bind,
	.control = cour_wait_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_wait cour_wait_ops = {
	.size = sizeof(struct fi_ops_wait),
	.wait = cour_wait_wait,
};
