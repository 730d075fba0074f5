/*
 * Ops tables for interfaces courier does not offer yet (fi_rma, fi_atomic): every slot says
 * -FI_ENOSYS, and fi_getinfo never advertises FI_RMA or FI_ATOMIC, so no conforming
 * application reaches them.
 */
#include "cour_fi.h"

static ssize_t cour_no_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
				fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_readv(struct fid_ep *ep, const struct iovec *iov, void **desc,
				 size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
				 void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
				   uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				 fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
				  size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				  void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
				    uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
				  fi_addr_t dest, uint64_t addr, uint64_t key)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				     uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
				     void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
				      uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{ return -FI_ENOSYS; }

struct fi_ops_rma cour_no_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = cour_no_rma_read,
	.readv = cour_no_rma_readv,
	.readmsg = cour_no_rma_readmsg,
	.write = cour_no_rma_write,
	.writev = cour_no_rma_writev,
	.writemsg = cour_no_rma_writemsg,
	.inject = cour_no_rma_inject,
	.writedata = cour_no_rma_writedata,
	.injectdata = cour_no_rma_injectdata,
};

static ssize_t cour_no_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				    fi_addr_t dest, uint64_t addr, uint64_t key,
				    enum fi_datatype dt, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				     size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				       uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
				     fi_addr_t dest, uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
					void *desc, void *result, void *result_desc,
					fi_addr_t dest, uint64_t addr, uint64_t key,
					enum fi_datatype dt, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
					 void **desc, size_t count, struct fi_ioc *resultv,
					 void **result_desc, size_t result_count,
					 fi_addr_t dest, uint64_t addr, uint64_t key,
					 enum fi_datatype dt, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					   struct fi_ioc *resultv, void **result_desc,
					   size_t result_count, uint64_t flags)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
					void *desc, const void *compare, void *compare_desc,
					void *result, void *result_desc, fi_addr_t dest,
					uint64_t addr, uint64_t key, enum fi_datatype dt,
					enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
					 void **desc, size_t count,
					 const struct fi_ioc *comparev, void **compare_desc,
					 size_t compare_count, struct fi_ioc *resultv,
					 void **result_desc, size_t result_count,
					 fi_addr_t dest, uint64_t addr, uint64_t key,
					 enum fi_datatype dt, enum fi_op op, void *context)
{ return -FI_ENOSYS; }
static ssize_t cour_no_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					   const struct fi_ioc *comparev, void **compare_desc,
					   size_t compare_count, struct fi_ioc *resultv,
					   void **result_desc, size_t result_count,
					   uint64_t flags)
{ return -FI_ENOSYS; }
static int cour_no_atomic_valid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				size_t *count)
{ return -FI_ENOSYS; }

struct fi_ops_atomic cour_no_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = cour_no_atomic_write,
	.writev = cour_no_atomic_writev,
	.writemsg = cour_no_atomic_writemsg,
	.inject = cour_no_atomic_inject,
	.readwrite = cour_no_atomic_readwrite,
	.readwritev = cour_no_atomic_readwritev,
	.readwritemsg = cour_no_atomic_readwritemsg,
	.compwrite = cour_no_atomic_compwrite,
	.compwritev = cour_no_atomic_compwritev,
	.compwritemsg = cour_no_atomic_compwritemsg,
	.writevalid = cour_no_atomic_valid,
	.readwritevalid = cour_no_atomic_valid,
	.compwritevalid = cour_no_atomic_valid,
};

/* fi_ops_cm calls an object does not take */
int cour_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t len)
{
	return -FI_ENOSYS;
}

int cour_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

int cour_no_accept(struct fid_ep *ep, const void *param, size_t len)
{
	return -FI_ENOSYS;
}

int cour_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t len)
{
	return -FI_ENOSYS;
}

int cour_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

int cour_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
			void *context)
{
	return -FI_ENOSYS;
}

int cour_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return -FI_ENOSYS;
}

