/*
 * Test doubles for test_av and test_mr: the few provider symbols cour_av.c and cour_mr.c use
 * besides their own, so that the tests link those files alone instead of the whole provider
 * (cour_init.c would drag in getinfo, the fabric and everything under it).
 */
#include "fi/cour_fi.h"

struct fi_provider cour_prov = {
	.version = COUR_PROV_VERSION,
	.fi_version = COUR_FI_VERSION,
	.name = COUR_PROV_NAME,
};

int cour_no_close(struct fid *fid) { return -FI_ENOSYS; }
int cour_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
int cour_no_control(struct fid *fid, int command, void *arg) { return -FI_ENOSYS; }
int cour_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}
int cour_no_tostr(const struct fid *fid, char *buf, size_t len) { return -FI_ENOSYS; }
int cour_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	return -FI_ENOSYS;
}

/* cour_mr_close tells the RMA engine a region is going; no engine in these tests */
void cour_rma_mr_closing(struct cour_pdom *dom, const struct cour_region *mr)
{
	(void)dom;
	(void)mr;
}

/* ... and a region ready for remote access would be offered to same-host initiators */
void cour_rma_push_mr_ready(struct cour_pdom *dom, struct cour_region *mr)
{
	(void)dom;
	(void)mr;
}

void cour_rma_push_mr_counted(struct cour_pdom *dom, const struct cour_region *mr)
{
	(void)dom;
	(void)mr;
}
