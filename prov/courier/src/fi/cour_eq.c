/*
 * Event queues (fi_eq(3)): a FIFO of variable-length events, errors in line with the rest, under
 * the EQ's own mutex (see struct cour_eq in cour_cq.h). Nothing in courier needs progress to
 * produce an EQ event (the AV writes them synchronously), so fi_eq_sread simply sleeps on the
 * eventfd, which is readable exactly while an event is queued.
 */
#include "cour_cq.h"

#include <poll.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct cour_eq_event {
	struct cour_eq_event  *prev, *next;
	uint32_t               event;
	bool                   is_err;
	struct fi_eq_err_entry err;        /* is_err: err.err_data is our copy */
	size_t                 len;        /* !is_err: bytes in data */
	uint8_t                data[];
};

static struct fi_ops_eq cour_eq_ops;
static struct fi_ops cour_eq_fi_ops;

/* Mutex held. The eventfd follows the queue: readable iff non-empty. */
static void cour_eq_push_locked(struct cour_eq *eq, struct cour_eq_event *ev)
{
	DL_APPEND(eq->events, ev);
	if (eq->count++ == 0 && eq->signal_fd >= 0)
		cour_fd_kick(eq->signal_fd);
}

static void cour_eq_pop_locked(struct cour_eq *eq, struct cour_eq_event *ev)
{
	DL_DELETE(eq->events, ev);
	if (--eq->count == 0 && eq->signal_fd >= 0)
		cour_fd_drain(eq->signal_fd);
}

/* After an event is queued, with the EQ's mutex released: wake FI_WAIT_MUTEX_COND waiters.
 * The writer may hold a progress lock (connection events), so the application's mutex is only
 * try-locked, for at most ~10 ms, then the broadcast goes without it (a waiter already asleep
 * wakes; one between its check and its wait sleeps until the next event). */
static void cour_eq_wake(struct cour_eq *eq)
{
	struct timespec nap = { .tv_nsec = 5000 };

	if (!eq->mc)
		return;
	for (int i = 0; i < 2000; i++) {
		if (cour_mcond_signal(eq->mc))
			return;
		nanosleep(&nap, NULL);
	}
	COUR_WARN(FI_LOG_EQ, "FI_WAIT_MUTEX_COND: the EQ's mutex stayed held; woke without it\n");
}

static ssize_t cour_eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf, size_t len,
			     uint64_t flags)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(eq_fid, struct cour_eq, eq_fid);
	struct cour_eq_event *ev;

	if (len && !buf) {
		COUR_WARN(FI_LOG_EQ, "fi_eq_write: NULL buffer of %zu bytes\n", len);
		return -FI_EINVAL;
	}
	ev = calloc(1, sizeof(*ev) + len);
	if (!ev) {
		COUR_WARN(FI_LOG_EQ, "no memory for an event of %zu bytes\n", len);
		return -FI_ENOMEM;
	}
	ev->event = event;
	ev->len = len;
	if (len)
		memcpy(ev->data, buf, len);
	pthread_mutex_lock(&eq->mutex);
	cour_eq_push_locked(eq, ev);
	pthread_mutex_unlock(&eq->mutex);
	cour_eq_wake(eq);
	return (ssize_t)len;
}

ssize_t cour_eq_post(struct cour_eq *eq, uint32_t event, const void *buf, size_t len)
{
	return cour_eq_write(&eq->eq_fid, event, buf, len, 0);
}

ssize_t cour_eq_write_err(struct fid_eq *eq_fid, const struct fi_eq_err_entry *err)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(eq_fid, struct cour_eq, eq_fid);
	struct cour_eq_event *ev;

	assert(err && err->err > 0);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		goto nomem;
	ev->is_err = true;
	ev->err = *err;
	ev->err.err_data = NULL;
	ev->err.err_data_size = 0;
	if (err->err_data && err->err_data_size) {
		ev->err.err_data = malloc(err->err_data_size);
		if (!ev->err.err_data) {
			free(ev);
			goto nomem;
		}
		memcpy(ev->err.err_data, err->err_data, err->err_data_size);
		ev->err.err_data_size = err->err_data_size;
	}
	pthread_mutex_lock(&eq->mutex);
	cour_eq_push_locked(eq, ev);
	pthread_mutex_unlock(&eq->mutex);
	cour_eq_wake(eq);
	return sizeof(*err);
nomem:
	COUR_WARN(FI_LOG_EQ, "no memory for an error event (err %d)\n", err->err);
	return -FI_ENOMEM;
}

/* Mutex held. */
static ssize_t cour_eq_read_locked(struct cour_eq *eq, uint32_t *event, void *buf, size_t len,
				   uint64_t flags)
{
	struct cour_eq_event *ev = eq->events;
	ssize_t ret;

	if (!ev)
		return -FI_EAGAIN;
	if (ev->is_err)
		return -FI_EAVAIL;
	if (len < ev->len) {
		COUR_WARN(FI_LOG_EQ, "fi_eq_read: buffer of %zu bytes, event %u needs %zu\n",
			  len, ev->event, ev->len);
		return -FI_ETOOSMALL;
	}
	if (event)
		*event = ev->event;
	if (ev->len)
		memcpy(buf, ev->data, ev->len);
	ret = (ssize_t)ev->len;
	if (!(flags & FI_PEEK)) {
		cour_eq_pop_locked(eq, ev);
		free(ev);
	}
	return ret;
}

static ssize_t cour_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			    uint64_t flags)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(eq_fid, struct cour_eq, eq_fid);
	ssize_t ret;

	if (len && !buf)
		return -FI_EINVAL;
	pthread_mutex_lock(&eq->mutex);
	ret = cour_eq_read_locked(eq, event, buf, len, flags);
	pthread_mutex_unlock(&eq->mutex);
	return ret;
}

static ssize_t cour_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
			       uint64_t flags)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(eq_fid, struct cour_eq, eq_fid);
	struct cour_eq_event *ev;
	void *app_data;
	size_t app_size, n;

	if (!buf)
		return -FI_EINVAL;
	pthread_mutex_lock(&eq->mutex);
	ev = eq->events;
	if (!ev || !ev->is_err) {
		pthread_mutex_unlock(&eq->mutex);
		return -FI_EAGAIN;
	}
	app_data = buf->err_data;
	app_size = buf->err_data_size;
	*buf = ev->err;
	if (app_size) {
		/* the application's buffer: copy what fits */
		n = COUR_MIN(app_size, ev->err.err_data_size);
		if (n)
			memcpy(app_data, ev->err.err_data, n);
		buf->err_data = app_data;
		buf->err_data_size = n;
	} else {
		/* fi_eq(3) compatibility rule: hand out our buffer, valid until the next readerr */
		buf->err_data = ev->err.err_data;
		buf->err_data_size = ev->err.err_data_size;
	}
	if (!(flags & FI_PEEK)) {
		cour_eq_pop_locked(eq, ev);
		if (!app_size && ev->err.err_data) {
			free(eq->err_data);
			eq->err_data = ev->err.err_data;
		} else {
			free(ev->err.err_data);
		}
		free(ev);
	}
	pthread_mutex_unlock(&eq->mutex);
	return sizeof(*buf);
}

static ssize_t cour_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			     int timeout, uint64_t flags)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(eq_fid, struct cour_eq, eq_fid);
	uint64_t deadline = timeout >= 0 ? cour_now_us() + (uint64_t)timeout * 1000 : 0;
	struct pollfd pfd;
	ssize_t ret;
	int left;

	if (eq->signal_fd < 0) {
		COUR_WARN(FI_LOG_EQ, "fi_eq_sread on an EQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	for (;;) {
		ret = cour_eq_read(eq_fid, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		left = cour_wait_remaining_ms(deadline);
		if (left == 0)
			return -FI_EAGAIN;
		pfd.fd = eq->signal_fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (poll(&pfd, 1, left) < 0 && errno != EINTR) {
			COUR_WARN(FI_LOG_EQ, "poll: %s\n", strerror(errno));
			return -FI_EOTHER;
		}
	}
}

static const char *cour_eq_strerror(struct fid_eq *eq_fid, int prov_errno, const void *err_data,
				    char *buf, size_t len)
{
	return cour_strerror(prov_errno, buf, len);
}

static int cour_eq_control(struct fid *fid, int command, void *arg)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(fid, struct cour_eq, eq_fid.fid);

	if (eq->mc)
		return cour_mcond_getwait(eq->mc, command, arg);
	return cour_wait_getwait(eq->wait_obj == FI_WAIT_FD || eq->wait_obj == FI_WAIT_UNSPEC ?
				 eq->signal_fd : -1, command, arg);
}

static int cour_eq_close(struct fid *fid)
{
	struct cour_eq *eq = COUR_CONTAINER_OF(fid, struct cour_eq, eq_fid.fid);
	struct cour_fabric *fabric = eq->fabric;
	struct cour_eq_event *ev, *tmp;

	if (cour_ref_get(&eq->refcnt) > 0) {
		COUR_WARN(FI_LOG_EQ, "EQ still bound to %d object(s)\n", cour_ref_get(&eq->refcnt));
		return -FI_EBUSY;
	}
	DL_FOREACH_SAFE(eq->events, ev, tmp) {
		DL_DELETE(eq->events, ev);
		if (ev->is_err)
			free(ev->err.err_data);
		free(ev);
	}
	free(eq->err_data);
	if (eq->wait_set)
		cour_wait_set_leave(eq->wait_set, NULL, eq->signal_fd);
	if (eq->signal_fd >= 0)
		close(eq->signal_fd);
	pthread_mutex_destroy(&eq->mutex);
	cour_mcond_free(eq->mc);
	free(eq);
	cour_ref_dec(&fabric->refcnt);
	return 0;
}

int cour_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq_fid,
		 void *context)
{
	struct cour_fabric *fab = COUR_CONTAINER_OF(fabric, struct cour_fabric, fabric_fid);
	struct fi_eq_attr def = { .wait_obj = FI_WAIT_NONE };
	struct cour_eq *eq;
	int ret;

	if (!eq_fid)
		return -FI_EINVAL;
	if (!attr)
		attr = &def;
	/* attr->size is a hint (the queue grows); FI_WRITE is always allowed, FI_AFFINITY has
	 * nothing to steer */
	eq = calloc(1, sizeof(*eq));
	if (!eq) {
		COUR_WARN(FI_LOG_EQ, "no memory for an EQ\n");
		return -FI_ENOMEM;
	}
	ret = cour_wait_fd_open(attr->wait_obj, FI_LOG_EQ, "fi_eq_open", &eq->signal_fd);
	if (!ret && attr->wait_obj == FI_WAIT_SET) {
		ret = cour_wait_set_join(attr->wait_set, fab, NULL, eq->signal_fd, FI_LOG_EQ,
					 "fi_eq_open");
		if (ret)
			close(eq->signal_fd);
		eq->wait_set = attr->wait_set;
	}
	if (ret) {
		free(eq);
		return ret;
	}
	if (attr->wait_obj == FI_WAIT_MUTEX_COND && !(eq->mc = cour_mcond_new())) {
		close(eq->signal_fd);
		free(eq);
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&eq->mutex, NULL);
	eq->fabric = fab;
	eq->wait_obj = attr->wait_obj == FI_WAIT_SET ? FI_WAIT_FD : attr->wait_obj;
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &cour_eq_fi_ops;
	eq->eq_fid.ops = &cour_eq_ops;
	cour_ref_inc(&fab->refcnt);
	*eq_fid = &eq->eq_fid;
	return 0;
}

static struct fi_ops_eq cour_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = cour_eq_read,
	.readerr = cour_eq_readerr,
	.write = cour_eq_write,
	.sread = cour_eq_sread,
	.strerror = cour_eq_strerror,
};

static struct fi_ops cour_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_eq_close,
	.bind = cour_no_bind,
	.control = cour_eq_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};
