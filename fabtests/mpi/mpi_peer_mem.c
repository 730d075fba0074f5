/*
 * What a rank keeps per peer, as a user sees it: every rank exchanges with every other rank
 * (MPI_Alltoall of LEN bytes per peer, then a ring of MPI_Sendrecv to each peer in turn, each
 * verified), then reports its peak resident memory (VmHWM) and current (VmRSS). Run it at two
 * sizes (np 4 and np 32): the difference of the averages over the difference of peers is what
 * the MPI and fabric stacks keep per peer. `mpi_peer_mem [LEN]` (default 8); rank 0 prints
 * `RESULT np <np> len <LEN> hwm_kb_avg <a> hwm_kb_max <m> rss_kb_avg <r> heap_kb_avg <h>
 * startup_ms_max <s> shmem_kb <k>` (h: malloc'd bytes in use, mallinfo2, which tells the heap
 * from mappings; s: the slowest rank's time from just before MPI_Init to its first all-to-all
 * done; k: the host's shared memory, /proc/meminfo's Shmem, while every rank still holds
 * what it mapped, for the caller to set against the host's before the job) and "ok" or
 * errors. MPI_PEER_MEM_HOLD=S keeps every rank alive S seconds after that line, so that a
 * caller can kill them. MPI_PEER_MEM_OSC=1 adds a one-sided round before the measurement
 * (one_sided(): puts, gets and fetch-and-adds, every rank to every rank, every byte and
 * counter checked). Run by fabtests/mpi/peer-mem.sh and fabtests/scripts/bighost-bench.sh.
 */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The value of a "Key: N kB" line of a /proc file, or -1 */
static long proc_kb(const char *file, const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

/* byte i of what rank `from` sends rank `to` */
static char pat(int from, int to, size_t i)
{
	return (char)(from * 131 + to * 17 + (int)i * 7);
}

/*
 * One-sided, every rank to every rank, under fences, in a window of MPI_Win_allocate: an
 * 8-byte counter, then a slot of len bytes for each origin. Each rank puts into its slot at
 * every rank what the all-to-all sent there, gets it back, and adds 1 to every counter with
 * MPI_Fetch_and_op; then every slot holds its origin's bytes, what came back is what was put,
 * every fetched value is below np and every counter ends at np. Returns the errors seen.
 */
static int one_sided(int rank, int np, size_t len, const char *sb)
{
	char *base, *back = calloc((size_t)np, len ? len : 1);
	int64_t one = 1, *old = calloc((size_t)np, sizeof(*old)), ctr;
	MPI_Aint size = 8 + (MPI_Aint)len * np;
	MPI_Win win;
	int errs = 0;

	if (!back || !old)
		MPI_Abort(MPI_COMM_WORLD, 2);
	MPI_Win_allocate(size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	memset(base, 0, (size_t)size);
	MPI_Win_fence(0, win);
	for (int k = 0; k < np; k++) {
		int to = (rank + k) % np;

		MPI_Put(sb + (size_t)to * len, (int)len, MPI_CHAR, to, 8 + (MPI_Aint)rank * len,
			(int)len, MPI_CHAR, win);
		MPI_Fetch_and_op(&one, &old[to], MPI_INT64_T, to, 0, MPI_SUM, win);
	}
	MPI_Win_fence(0, win);
	for (int k = 0; k < np; k++) {
		int from = (rank + k) % np;

		MPI_Get(back + (size_t)from * len, (int)len, MPI_CHAR, from, 8 + (MPI_Aint)rank * len,
			(int)len, MPI_CHAR, win);
	}
	MPI_Win_fence(0, win);
	memcpy(&ctr, base, sizeof(ctr));
	errs += ctr != np;
	for (int p = 0; p < np; p++) {
		errs += old[p] < 0 || old[p] >= np;
		for (size_t i = 0; i < len; i++)
			if (base[8 + (size_t)p * len + i] != pat(p, rank, i) ||
			    back[(size_t)p * len + i] != pat(rank, p, i)) {
				errs++;
				break;
			}
	}
	MPI_Win_free(&win);
	free(back);
	free(old);
	return errs;
}

int main(int argc, char **argv)
{
	int rank, np, errs = 0, all_errs = 0;
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;
	double t0 = now_s(), startup, startup_max = 0;
	const char *hold = getenv("MPI_PEER_MEM_HOLD");
	const char *osc_env = getenv("MPI_PEER_MEM_OSC");
	int osc = osc_env && atoi(osc_env);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);

	char *sb = malloc(len * (size_t)np), *rb = malloc(len * (size_t)np);
	if (!sb || !rb)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int p = 0; p < np; p++)
		for (size_t i = 0; i < len; i++)
			sb[(size_t)p * len + i] = pat(rank, p, i);
	MPI_Alltoall(sb, (int)len, MPI_CHAR, rb, (int)len, MPI_CHAR, MPI_COMM_WORLD);
	startup = now_s() - t0;
	for (int p = 0; p < np; p++)
		for (size_t i = 0; i < len; i++)
			if (rb[(size_t)p * len + i] != pat(p, rank, i)) {
				errs++;
				break;
			}
	/* then each peer in turn, point to point: a different path in most MPIs */
	for (int k = 1; k < np; k++) {
		int to = (rank + k) % np, from = (rank - k + np) % np;

		memset(rb, 0, len);
		MPI_Sendrecv(sb + (size_t)to * len, (int)len, MPI_CHAR, to, k, rb, (int)len, MPI_CHAR,
			     from, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (size_t i = 0; i < len; i++)
			if (rb[i] != pat(from, rank, i)) {
				errs++;
				break;
			}
	}
	if (osc)
		errs += one_sided(rank, np, len, sb);
	MPI_Barrier(MPI_COMM_WORLD);

	long hwm = proc_kb("/proc/self/status", "VmHWM:"), hwm_max = 0;
	long rss = proc_kb("/proc/self/status", "VmRSS:");
	long heap = (long)(mallinfo2().uordblks / 1024), sum_heap = 0;
	long sum_hwm = 0, sum_rss = 0;
	MPI_Reduce(&hwm, &sum_hwm, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&hwm, &hwm_max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&rss, &sum_rss, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&heap, &sum_heap, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&errs, &all_errs, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&startup, &startup_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("RESULT np %d len %zu hwm_kb_avg %ld hwm_kb_max %ld rss_kb_avg %ld "
		       "heap_kb_avg %ld startup_ms_max %.0f shmem_kb %ld\n", np, len, sum_hwm / np,
		       hwm_max, sum_rss / np, sum_heap / np, startup_max * 1e3,
		       proc_kb("/proc/meminfo", "Shmem:"));
		if (all_errs)
			printf("mpi_peer_mem: %d errors\n", all_errs);
		else
			printf("mpi_peer_mem: ok (%d ranks)\n", np);
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);    /* (nobody unmaps anything before rank 0 read Shmem) */
	if (hold)
		sleep((unsigned)atoi(hold));
	free(sb);
	free(rb);
	MPI_Finalize();
	return all_errs ? 1 : 0;
}
