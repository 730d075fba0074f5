/*
 * Open MPI over courier, one-sided: MPI_Put, MPI_Get, MPI_Accumulate, MPI_Get_accumulate,
 * MPI_Fetch_and_op and MPI_Compare_and_swap, every rank to every rank (itself included), on
 * windows from MPI_Win_allocate and MPI_Win_create, under fence, post-start-complete-wait,
 * lock/unlock (shared and exclusive, with a flush and a read-back inside the epoch) and
 * lock_all/unlock_all. Run by fabtests/mpi/run-mpi-osc.sh, which gives every rank a node of its
 * own so that osc/rdma reaches every peer, window data and lock state alike, through btl/ofi.
 * (Ranks that share a node would access MPI_Win_allocate memory through shared memory instead,
 * and there Open MPI 4.1.4 crashes in MPI_Compare_and_swap: it tries the btl's atomic with the
 * NULL registration handle of a shared-memory peer; fixed in 4.1.5 by ompi commit 0512c135a7.
 * Run with ranks sharing a node under such an Open MPI, the program says so and leaves
 * MPI_Compare_and_swap out: it checks itself everything else.)
 *
 * Every result is known exactly. Concurrent accumulates add distinct powers of two, so the
 * value an origin fetched tells which origins came before it: gathered at the target, the
 * fetched values must form one chain 0, b1, b1|b2, ... ending at the final memory, which is
 * what atomicity means. Doubles only ever hold sums of small multiples of 1/4.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PUTN   8192	/* int64 per origin in one put slice: 64 KiB, several packets */
#define VECN   64	/* strided put: elements, one every `size` slots */
#define GETN   8192	/* int64 read by every origin */
/* Above osc_rdma_network_max_amo (32): osc/rdma uses get-op-put under its accumulate lock.
 * MPI_MAX must stay there: for up to 32 integers osc/rdma 4.1 hands any op to the btl's atomics
 * without checking btl_atomic_flags, and btl/ofi 4.1 knows only ADD and SWAP (to_fi_op() in
 * btl_ofi_atomics.c aborts: "Unknown or unsupported atomic op"). */
#define ACCN   40
#define GACCN  4
#define NFETCH (1 + GACCN + 1 + 1)	/* chain-checked fetches per pair: gacc, gaccn, gaccd, fop */

#define ORIGIN_VAL(r) (1000 + (int64_t)(r))	/* what origin r writes with replace and swap */

enum sync { S_FENCE, S_PSCW, S_LOCK_SHARED, S_LOCK_EXCL, S_LOCK_ALL, S_COUNT };
static const char *const sync_name[S_COUNT] = {
	"fence", "post-start-complete-wait", "lock(shared)", "lock(exclusive)", "lock_all"
};

/* Window layout, in 8-byte units (disp_unit 8). */
struct layout {
	MPI_Aint put, vec, get, acc1, accn, accd, accmax, arepl, gacc, gaccn, gaccd, fop, fswap, cas;
	MPI_Aint total;
};

static int rank, size, errs, printed;
static int cas_skip;	/* Open MPI < 4.1.5 with ranks sharing a node: see the top */
static struct layout L;
static const char *cur_kind, *cur_sync;

#define CHECK(cond, ...) do {							\
	if (!(cond)) {								\
		errs++;								\
		if (printed++ < 20) {						\
			printf("rank %d [%s, %s] %s:%d: ", rank, cur_kind,	\
			       cur_sync, __func__, __LINE__);			\
			printf(__VA_ARGS__);					\
			printf("\n");						\
			fflush(stdout);						\
		}								\
	}									\
} while (0)

static int64_t put_val(int origin, int target, int i)
{
	return ((int64_t)origin << 40) ^ ((int64_t)target << 32) ^ (int64_t)(i * 2654435761u);
}

static int64_t get_val(int target, int i)
{
	return ((int64_t)(target + 1) << 36) ^ (int64_t)i * 40503;
}

static int64_t vec_val(int origin, int target, int k)
{
	return -(((int64_t)origin << 20) | ((int64_t)target << 12) | k);
}

/* MPI_MAX contributions: every origin wins some elements. */
static int64_t max_val(int origin, int i)
{
	return (int64_t)((origin * 7 + i * 3) % 11) * 1000 - origin;
}

static void layout_init(void)
{
	MPI_Aint o = 0;
	L.put = o;    o += (MPI_Aint)size * PUTN;
	L.vec = o;    o += (MPI_Aint)size * VECN;
	L.get = o;    o += GETN;
	L.acc1 = o;   o += 1;
	L.accn = o;   o += ACCN;
	L.accd = o;   o += ACCN;
	L.accmax = o; o += ACCN;
	L.arepl = o;  o += 1;
	L.gacc = o;   o += 1;
	L.gaccn = o;  o += GACCN;
	L.gaccd = o;  o += 1;
	L.fop = o;    o += 1;
	L.fswap = o;  o += 1;
	L.cas = o;    o += 1;
	L.total = o;
}

static void win_fill(int64_t *w)
{
	memset(w, 0, (size_t)L.total * 8);
	for (MPI_Aint i = 0; i < (MPI_Aint)size * PUTN; i++)
		w[L.put + i] = -7;
	for (int i = 0; i < GETN; i++)
		w[L.get + i] = get_val(rank, i);
	for (int i = 0; i < ACCN; i++)
		w[L.accmax + i] = INT64_MIN;
	w[L.arepl] = -1;
	w[L.fswap] = -1;
	w[L.cas] = -1;
	/* double slots start at +0.0, which is all-zero bits */
}

/* What one origin learned from one target in the first epoch. */
struct fetched {
	int64_t chain[NFETCH];	/* gacc, gaccn[GACCN], gaccd (as integer), fop */
	int64_t swap;		/* fetch_and_op(replace): the value it displaced */
	int64_t cas;
};

/* Origin buffers that depend only on the origin's rank: they must stay untouched until the
 * epoch ends, so they live for the whole run. */
static struct {
	int64_t one, bit, bits[GACCN], mine, cas_new, cas_cmp, vn[ACCN], mx[ACCN];
	double vd[ACCN], dbit;
} src;

static void src_init(void)
{
	src.one = rank + 1;
	src.bit = (int64_t)1 << rank;
	for (int i = 0; i < GACCN; i++)
		src.bits[i] = src.bit << (8 * i);
	src.mine = ORIGIN_VAL(rank);
	src.cas_new = rank;
	src.cas_cmp = -1;
	for (int i = 0; i < ACCN; i++) {
		src.vn[i] = (int64_t)(rank + 1) * (i + 1);
		src.vd[i] = (rank + 1) * 0.25 + i;
		src.mx[i] = max_val(rank, i);
	}
	src.dbit = (double)src.bit;
}

/* Epoch 1: every operation from this origin to target t. putbuf is this target's own. */
static void ops_issue(MPI_Win win, int t, MPI_Datatype vec_type, int64_t *putbuf,
		      int64_t *getbuf, struct fetched *f, double *gaccd_res)
{
	for (int i = 0; i < PUTN; i++)
		putbuf[i] = put_val(rank, t, i);
	for (int k = 0; k < VECN; k++)
		putbuf[PUTN + k] = vec_val(rank, t, k);
	MPI_Put(putbuf, PUTN, MPI_INT64_T, t, L.put + (MPI_Aint)rank * PUTN, PUTN, MPI_INT64_T, win);
	MPI_Put(putbuf + PUTN, VECN, MPI_INT64_T, t, L.vec + rank, 1, vec_type, win);
	MPI_Get(getbuf, GETN, MPI_INT64_T, t, L.get, GETN, MPI_INT64_T, win);

	MPI_Accumulate(&src.one, 1, MPI_INT64_T, t, L.acc1, 1, MPI_INT64_T, MPI_SUM, win);
	MPI_Accumulate(src.vn, ACCN, MPI_INT64_T, t, L.accn, ACCN, MPI_INT64_T, MPI_SUM, win);
	MPI_Accumulate(src.vd, ACCN, MPI_DOUBLE, t, L.accd, ACCN, MPI_DOUBLE, MPI_SUM, win);
	MPI_Accumulate(src.mx, ACCN, MPI_INT64_T, t, L.accmax, ACCN, MPI_INT64_T, MPI_MAX, win);
	MPI_Accumulate(&src.mine, 1, MPI_INT64_T, t, L.arepl, 1, MPI_INT64_T, MPI_REPLACE, win);

	MPI_Get_accumulate(&src.bit, 1, MPI_INT64_T, &f->chain[0], 1, MPI_INT64_T, t, L.gacc, 1,
			   MPI_INT64_T, MPI_SUM, win);
	MPI_Get_accumulate(src.bits, GACCN, MPI_INT64_T, &f->chain[1], GACCN, MPI_INT64_T, t,
			   L.gaccn, GACCN, MPI_INT64_T, MPI_SUM, win);
	MPI_Get_accumulate(&src.dbit, 1, MPI_DOUBLE, gaccd_res, 1, MPI_DOUBLE, t, L.gaccd, 1,
			   MPI_DOUBLE, MPI_SUM, win);
	MPI_Fetch_and_op(&src.bit, &f->chain[1 + GACCN + 1], MPI_INT64_T, t, L.fop, MPI_SUM, win);
	MPI_Fetch_and_op(&src.mine, &f->swap, MPI_INT64_T, t, L.fswap, MPI_REPLACE, win);
	if (!cas_skip)
		MPI_Compare_and_swap(&src.cas_new, &src.cas_cmp, &f->cas, MPI_INT64_T, t, L.cas,
				     win);
}

/* Inside a lock epoch, after MPI_Win_flush: our own put must now be readable at the target. */
static void readback_in_epoch(MPI_Win win, int t, int64_t *getbuf)
{
	int64_t first = 0;
	MPI_Get(getbuf, PUTN, MPI_INT64_T, t, L.put + (MPI_Aint)rank * PUTN, PUTN, MPI_INT64_T, win);
	MPI_Fetch_and_op(NULL, &first, MPI_INT64_T, t, L.put + (MPI_Aint)rank * PUTN, MPI_NO_OP, win);
	MPI_Win_flush(t, win);
	for (int i = 0; i < PUTN; i++)
		if (getbuf[i] != put_val(rank, t, i)) {
			CHECK(0, "target %d: read-back after flush [%d] = %lld, want %lld", t, i,
			      (long long)getbuf[i], (long long)put_val(rank, t, i));
			break;
		}
	CHECK(first == put_val(rank, t, 0), "target %d: MPI_NO_OP fetch after flush %lld, want %lld",
	      t, (long long)first, (long long)put_val(rank, t, 0));
}

/* Target memory after epoch 1, and the chains of fetched values every origin sent us. */
static void target_check(const int64_t *w, const struct fetched *from)
{
	const double *wd = (const double *)w;
	int64_t tri = (int64_t)size * (size + 1) / 2, all = ((int64_t)1 << size) - 1;
	int cas_winner = -1;

	for (int r = 0; r < size; r++) {
		for (int i = 0; i < PUTN; i++)
			if (w[L.put + (MPI_Aint)r * PUTN + i] != put_val(r, rank, i)) {
				CHECK(0, "put from %d [%d] = %lld, want %lld", r, i,
				      (long long)w[L.put + (MPI_Aint)r * PUTN + i],
				      (long long)put_val(r, rank, i));
				break;
			}
		for (int k = 0; k < VECN; k++)
			CHECK(w[L.vec + r + (MPI_Aint)k * size] == vec_val(r, rank, k),
			      "strided put from %d [%d] = %lld", r, k,
			      (long long)w[L.vec + r + (MPI_Aint)k * size]);
	}
	for (int i = 0; i < GETN; i++)
		if (w[L.get + i] != get_val(rank, i)) {
			CHECK(0, "get region changed at [%d]", i);
			break;
		}
	CHECK(w[L.acc1] == tri, "accumulate(sum, 1) = %lld, want %lld", (long long)w[L.acc1],
	      (long long)tri);
	for (int i = 0; i < ACCN; i++) {
		CHECK(w[L.accn + i] == tri * (i + 1), "accumulate(sum, %d)[%d] = %lld, want %lld",
		      ACCN, i, (long long)w[L.accn + i], (long long)(tri * (i + 1)));
		CHECK(wd[L.accd + i] == tri * 0.25 + (double)size * i,
		      "accumulate(double sum)[%d] = %.17g, want %.17g", i, wd[L.accd + i],
		      tri * 0.25 + (double)size * i);
	}
	for (int i = 0; i < ACCN; i++) {
		int64_t want = INT64_MIN;
		for (int r = 0; r < size; r++)
			want = max_val(r, i) > want ? max_val(r, i) : want;
		CHECK(w[L.accmax + i] == want, "accumulate(max)[%d] = %lld, want %lld", i,
		      (long long)w[L.accmax + i], (long long)want);
	}
	CHECK(w[L.arepl] >= ORIGIN_VAL(0) && w[L.arepl] < ORIGIN_VAL(size),
	      "accumulate(replace) left %lld, no origin's value", (long long)w[L.arepl]);

	/* Swaps: starting from the initial -1, each origin displaced the previous one's value. */
	{
		int64_t seen = -1;
		int used = 0;
		for (int step = 0; step < size; step++) {
			int next = -1;
			for (int r = 0; r < size; r++)
				if (!(used & (1 << r)) && from[r].swap == seen)
					next = r;
			if (next < 0) {
				CHECK(0, "fetch_and_op(replace): no origin fetched %lld (not atomic?)",
				      (long long)seen);
				break;
			}
			used |= 1 << next;
			seen = ORIGIN_VAL(next);
		}
		CHECK(w[L.fswap] == seen, "fetch_and_op(replace) left %lld, last swap %lld",
		      (long long)w[L.fswap], (long long)seen);
	}

	/* Each fetched value must be the OR of the bits of the origins served before it. */
	for (int s = 0; s < NFETCH; s++) {
		int shift = (s >= 1 && s <= GACCN) ? 8 * (s - 1) : 0;
		int64_t mem = s == 0 ? w[L.gacc] : s <= GACCN ? w[L.gaccn + s - 1] :
			      s == GACCN + 1 ? (int64_t)wd[L.gaccd] : w[L.fop];
		int64_t seen = 0;
		int used = 0;
		CHECK(mem == all << shift, "fetching slot %d final %lld, want %lld", s,
		      (long long)mem, (long long)(all << shift));
		for (int step = 0; step < size; step++) {
			int next = -1;
			for (int r = 0; r < size; r++)
				if (!(used & (1 << r)) && from[r].chain[s] == seen)
					next = r;
			if (next < 0) {
				CHECK(0, "fetching slot %d: no origin fetched %lld (not atomic?)", s,
				      (long long)seen);
				break;
			}
			used |= 1 << next;
			seen |= ((int64_t)1 << next) << shift;
		}
	}

	if (cas_skip)
		return;
	for (int r = 0; r < size; r++)
		if (from[r].cas == -1) {
			CHECK(cas_winner < 0, "compare_and_swap: origins %d and %d both won",
			      cas_winner, r);
			cas_winner = r;
		}
	CHECK(cas_winner >= 0 && w[L.cas] == cas_winner, "compare_and_swap: memory %lld, winner %d",
	      (long long)w[L.cas], cas_winner);
	for (int r = 0; r < size; r++)
		CHECK(from[r].cas == -1 || from[r].cas == cas_winner,
		      "compare_and_swap: origin %d fetched %lld, winner %d", r,
		      (long long)from[r].cas, cas_winner);
}

/* Epoch 2 (after epoch 1 completed everywhere): reads with every operation, known results. */
static void ops_readback(MPI_Win win, int t, int64_t *getbuf, int64_t *res)
{
	static int64_t cmp = -5, swap = 99;	/* read at the epoch end, not at the call */
	MPI_Get(getbuf, PUTN, MPI_INT64_T, t, L.put + (MPI_Aint)rank * PUTN, PUTN, MPI_INT64_T, win);
	MPI_Fetch_and_op(NULL, &res[0], MPI_INT64_T, t, L.acc1, MPI_NO_OP, win);
	MPI_Get_accumulate(NULL, 0, MPI_INT64_T, &res[1], ACCN, MPI_INT64_T, t, L.accn, ACCN,
			   MPI_INT64_T, MPI_NO_OP, win);
	if (!cas_skip)
		MPI_Compare_and_swap(&swap, &cmp, &res[1 + ACCN], MPI_INT64_T, t, L.cas, win);
}

static void readback_check(int t, const int64_t *getbuf, const int64_t *res, int64_t cas_seen)
{
	int64_t tri = (int64_t)size * (size + 1) / 2;
	int64_t winner = cas_seen == -1 ? rank : cas_seen;
	for (int i = 0; i < PUTN; i++)
		if (getbuf[i] != put_val(rank, t, i)) {
			CHECK(0, "target %d: get of own put [%d] = %lld, want %lld", t, i,
			      (long long)getbuf[i], (long long)put_val(rank, t, i));
			break;
		}
	CHECK(res[0] == tri, "target %d: fetch_and_op(no_op) %lld, want %lld", t,
	      (long long)res[0], (long long)tri);
	for (int i = 0; i < ACCN; i++)
		CHECK(res[1 + i] == tri * (i + 1), "target %d: get_accumulate(no_op)[%d] %lld", t, i,
		      (long long)res[1 + i]);
	CHECK(cas_skip || res[1 + ACCN] == winner, "target %d: failed compare_and_swap fetched %lld, want %lld", t,
	      (long long)res[1 + ACCN], (long long)winner);
}

static void epoch_open(MPI_Win win, enum sync s, MPI_Group world, int t)
{
	switch (s) {
	case S_FENCE: if (t < 0) MPI_Win_fence(0, win); break;
	case S_PSCW:
		if (t < 0) {
			MPI_Win_post(world, 0, win);
			MPI_Win_start(world, 0, win);
		}
		break;
	case S_LOCK_SHARED: if (t >= 0) MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win); break;
	case S_LOCK_EXCL: if (t >= 0) MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win); break;
	case S_LOCK_ALL: if (t < 0) MPI_Win_lock_all(0, win); break;
	default: break;
	}
}

static void epoch_close(MPI_Win win, enum sync s, int t)
{
	switch (s) {
	case S_FENCE: if (t < 0) MPI_Win_fence(0, win); break;
	case S_PSCW:
		if (t < 0) {
			MPI_Win_complete(win);
			MPI_Win_wait(win);
		}
		break;
	case S_LOCK_SHARED: case S_LOCK_EXCL: if (t >= 0) MPI_Win_unlock(t, win); break;
	case S_LOCK_ALL: if (t < 0) MPI_Win_unlock_all(win); break;
	default: break;
	}
	/* Passive target: the ops are complete at the targets once every origin unlocked. */
	if (t < 0 && s >= S_LOCK_SHARED)
		MPI_Barrier(MPI_COMM_WORLD);
}

static void round_run(int use_create, enum sync s, MPI_Group world, MPI_Datatype vec_type)
{
	size_t bytes = (size_t)L.total * 8;
	int64_t *w, *putbuf = malloc((size_t)size * (PUTN + VECN) * 8);
	int64_t *getbuf = malloc((size_t)size * GETN * 8), *scratch = malloc(PUTN * 8);
	int64_t *res = malloc((size_t)size * (2 + ACCN) * 8);
	struct fetched *f = calloc(size, sizeof(*f)), *from = calloc(size, sizeof(*from));
	double *gaccd = calloc(size, sizeof(double));
	MPI_Datatype ftype;
	MPI_Win win;

	cur_kind = use_create ? "MPI_Win_create" : "MPI_Win_allocate";
	cur_sync = sync_name[s];
	if (use_create) {
		w = malloc(bytes);
		win_fill(w);
		MPI_Win_create(w, (MPI_Aint)bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	} else {
		MPI_Win_allocate((MPI_Aint)bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win);
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
		win_fill(w);
		MPI_Win_unlock(rank, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);

	/* epoch 1: everything, every target, starting with the next rank so targets differ */
	epoch_open(win, s, world, -1);
	for (int k = 0; k < size; k++) {
		int t = (rank + k) % size;
		epoch_open(win, s, world, t);
		ops_issue(win, t, vec_type, putbuf + (size_t)t * (PUTN + VECN),
			  getbuf + (size_t)t * GETN, &f[t], &gaccd[t]);
		if (s >= S_LOCK_SHARED) {
			MPI_Win_flush(t, win);
			readback_in_epoch(win, t, scratch);
		}
		epoch_close(win, s, t);
	}
	epoch_close(win, s, -1);
	for (int t = 0; t < size; t++) {
		CHECK(gaccd[t] == (double)(int64_t)gaccd[t], "get_accumulate(double) fetched %.17g",
		      gaccd[t]);
		f[t].chain[1 + GACCN] = (int64_t)gaccd[t];
		for (int i = 0; i < GETN; i++)
			if (getbuf[(size_t)t * GETN + i] != get_val(t, i)) {
				CHECK(0, "get from %d [%d] = %lld, want %lld", t, i,
				      (long long)getbuf[(size_t)t * GETN + i], (long long)get_val(t, i));
				break;
			}
	}
	MPI_Type_contiguous((int)(sizeof(struct fetched) / 8), MPI_INT64_T, &ftype);
	MPI_Type_commit(&ftype);
	MPI_Alltoall(f, 1, ftype, from, 1, ftype, MPI_COMM_WORLD);
	MPI_Type_free(&ftype);
	if (s >= S_LOCK_SHARED)
		MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
	target_check(w, from);
	if (s >= S_LOCK_SHARED)
		MPI_Win_unlock(rank, win);
	MPI_Barrier(MPI_COMM_WORLD);

	/* epoch 2: read everything back */
	epoch_open(win, s, world, -1);
	for (int k = 0; k < size; k++) {
		int t = (rank + k) % size;
		epoch_open(win, s, world, t);
		ops_readback(win, t, getbuf + (size_t)t * GETN, res + (size_t)t * (2 + ACCN));
		epoch_close(win, s, t);
	}
	epoch_close(win, s, -1);
	for (int t = 0; t < size; t++)
		readback_check(t, getbuf + (size_t)t * GETN, res + (size_t)t * (2 + ACCN), f[t].cas);

	MPI_Win_free(&win);
	if (use_create)
		free(w);
	free(putbuf);
	free(scratch);
	free(getbuf);
	free(res);
	free(f);
	free(from);
	free(gaccd);
}

/* Open MPI before 4.1.5, and another rank on this node? */
static int cas_broken_here(void)
{
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len, major = 0, minor = 0, patch = 0, local = 1, any = 0;
	MPI_Comm node;

	MPI_Get_library_version(lib, &len);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &local);
	MPI_Comm_free(&node);
	if (sscanf(lib, "Open MPI v%d.%d.%d", &major, &minor, &patch) == 3 && local > 1 &&
	    (major < 4 || (major == 4 && (minor < 1 || (minor == 1 && patch < 5)))))
		any = 1;
	MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any;
}

int main(int argc, char **argv)
{
	MPI_Group world;
	MPI_Datatype vec_type;
	int tot = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2 || size > 16) {
		if (rank == 0)
			printf("mpi_osc: 2 to 16 ranks (fetch chains use one bit per rank)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	cas_skip = cas_broken_here();
	if (cas_skip && rank == 0)
		printf("mpi_osc: MPI_Compare_and_swap left out: ranks share a node, and this Open MPI "
		       "crashes in it there (fixed in 4.1.5)\n");
	layout_init();
	src_init();
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Type_vector(VECN, 1, size, MPI_INT64_T, &vec_type);
	MPI_Type_commit(&vec_type);

	for (int use_create = 0; use_create < 2; use_create++)
		for (int s = 0; s < S_COUNT; s++) {
			if (argc > 1 && strcmp(argv[1], use_create ? "create" : "allocate"))
				continue;
			int before = errs, sum = 0;
			double t0 = MPI_Wtime();
			round_run(use_create, (enum sync)s, world, vec_type);
			before = errs - before;
			MPI_Allreduce(&before, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
			if (rank == 0) {
				printf("mpi_osc: %-16s %-26s %s (%d errors, %.2f s)\n", cur_kind,
				       cur_sync, sum ? "FAILED" : "ok", sum, MPI_Wtime() - t0);
				fflush(stdout);
			}
		}

	MPI_Type_free(&vec_type);
	MPI_Group_free(&world);
	MPI_Allreduce(&errs, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_osc: %s (%d errors, %d ranks)\n", tot ? "FAILED" : "ok", tot, size);
	MPI_Finalize();
	return tot != 0;
}
