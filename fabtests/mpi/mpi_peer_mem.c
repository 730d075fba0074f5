/*
 * What a rank keeps per peer, as a user sees it: every rank exchanges with every other rank
 * (MPI_Alltoall of LEN bytes per peer, then a ring of MPI_Sendrecv to each peer in turn, each
 * verified), then reports its peak resident memory (VmHWM) and current (VmRSS). Run it at two
 * sizes (np 4 and np 32): the difference of the averages over the difference of peers is what
 * the MPI and fabric stacks keep per peer. `mpi_peer_mem [LEN]` (default 8); rank 0 prints
 * `RESULT np <np> len <LEN> hwm_kb_avg <a> hwm_kb_max <m> rss_kb_avg <r> heap_kb_avg <h>` (h:
 * malloc'd bytes in use, mallinfo2, which tells the heap from mappings) and "ok" or errors.
 * Run by fabtests/mpi/peer-mem.sh.
 */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long status_kb(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

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

int main(int argc, char **argv)
{
	int rank, np, errs = 0, all_errs = 0;
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;

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
	MPI_Barrier(MPI_COMM_WORLD);

	long hwm = status_kb("VmHWM:"), rss = status_kb("VmRSS:"), hwm_max = 0;
	long heap = (long)(mallinfo2().uordblks / 1024), sum_heap = 0;
	long sum_hwm = 0, sum_rss = 0;
	MPI_Reduce(&hwm, &sum_hwm, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&hwm, &hwm_max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&rss, &sum_rss, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&heap, &sum_heap, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&errs, &all_errs, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("RESULT np %d len %zu hwm_kb_avg %ld hwm_kb_max %ld rss_kb_avg %ld "
		       "heap_kb_avg %ld\n", np, len, sum_hwm / np, hwm_max, sum_rss / np,
		       sum_heap / np);
		if (all_errs)
			printf("mpi_peer_mem: %d errors\n", all_errs);
		else
			printf("mpi_peer_mem: ok (%d ranks)\n", np);
	}
	free(sb);
	free(rb);
	MPI_Finalize();
	return all_errs ? 1 : 0;
}
