/*
 * mpi_alltoall: MPI_Alltoall at given sizes (bytes per pair), every byte checked, optionally
 * timed. Run by fabtests/mpi/run-mpi-bridge.sh (four emulated hosts on one shaped bridge).
 *
 *   mpi_alltoall [-t SECONDS] SIZE...
 *
 * Each rank's block for each peer holds a pattern of (sender, receiver, round, byte index),
 * with a period far beyond any size here, so a block delivered to the wrong peer or offset,
 * from an earlier round, truncated or corrupted shows as a mismatch; the receive buffer is
 * refilled with a poison byte before each checked round.
 *
 * Without -t: 3 checked rounds per size; rank 0 prints "mpi_alltoall: SIZE checked 3 rounds"
 * per size. With -t: per size, a checked round, a warm-up of a fifth of SECONDS, MPI_Alltoall
 * repeated for about SECONDS (batches; a batch's time is the slowest rank's, and rank 0
 * decides whether to go on), then a checked round; rank 0 prints
 * "mpi_alltoall: time SIZE US us ITERS iters" (US: mean microseconds per MPI_Alltoall).
 * Last line, from rank 0: "mpi_alltoall: ok (0 errors, N ranks)" or
 * "mpi_alltoall: FAILED (E errors, N ranks)"; exit status 1 on any error.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECKED_ROUNDS 3
#define MAX_REPORTS 8

static int rank, nranks;
static long errors;

/* byte i of the block rank `from` sends rank `to` in round `round` */
static inline unsigned char pat(int from, int to, int round, size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u ^ ((uint32_t)from << 24 | (uint32_t)to << 16 |
						  (uint32_t)(round & 0xffff));

	return (unsigned char)(x >> 13 ^ x >> 24);
}

static void fill(unsigned char *sb, size_t len, int round)
{
	for (int p = 0; p < nranks; p++)
		for (size_t i = 0; i < len; i++)
			sb[(size_t)p * len + i] = pat(rank, p, round, i);
}

/* one MPI_Alltoall of `len` bytes per pair, every received byte compared */
static void checked_round(unsigned char *sb, unsigned char *rb, size_t len, int round)
{
	fill(sb, len, round);
	memset(rb, 0xa5, len * (size_t)nranks);
	MPI_Alltoall(sb, (int)len, MPI_BYTE, rb, (int)len, MPI_BYTE, MPI_COMM_WORLD);
	for (int p = 0; p < nranks; p++) {
		const unsigned char *b = rb + (size_t)p * len;
		size_t bad = 0, first = 0;

		for (size_t i = 0; i < len; i++)
			if (b[i] != pat(p, rank, round, i) && !bad++)
				first = i;
		if (bad) {
			if (errors < MAX_REPORTS)
				fprintf(stderr, "mpi_alltoall: rank %d: size %zu round %d: %zu bytes "
					"from rank %d wrong, first at %zu (got 0x%02x, want 0x%02x)\n",
					rank, len, round, bad, p, first, b[first],
					pat(p, rank, round, first));
			errors++;
		}
	}
}

/* `iters` MPI_Alltoalls; the slowest rank's seconds */
static double batch(unsigned char *sb, unsigned char *rb, size_t len, long iters)
{
	double t, tmax;

	MPI_Barrier(MPI_COMM_WORLD);
	t = MPI_Wtime();
	for (long i = 0; i < iters; i++)
		MPI_Alltoall(sb, (int)len, MPI_BYTE, rb, (int)len, MPI_BYTE, MPI_COMM_WORLD);
	t = MPI_Wtime() - t;
	MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return tmax;
}

/* MPI_Alltoall repeated for about `secs`: total iterations and seconds */
static void timed(unsigned char *sb, unsigned char *rb, size_t len, double secs, long *iters,
		  double *elapsed)
{
	long n = 1;
	int more = 1;

	*iters = 0;
	*elapsed = 0;
	while (more) {
		double t = batch(sb, rb, len, n);

		*iters += n;
		*elapsed += t;
		/* every rank sees the same maximum, so every rank decides alike */
		more = *elapsed < secs;
		if (t < secs / 10 && n < (1L << 24))
			n *= 2;
	}
}

int main(int argc, char **argv)
{
	double secs = 0;
	long total = 0;
	int a = 1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (a + 1 < argc && !strcmp(argv[a], "-t")) {
		secs = atof(argv[a + 1]);
		a += 2;
	}
	if (a >= argc || secs < 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_alltoall [-t SECONDS] SIZE...\n");
		MPI_Finalize();
		return 2;
	}
	for (; a < argc; a++) {
		size_t len = strtoul(argv[a], NULL, 0);
		unsigned char *sb, *rb;

		if (!len || len > (64u << 20) || len * (size_t)nranks > (size_t)1 << 31) {
			if (rank == 0)
				fprintf(stderr, "mpi_alltoall: bad size %s\n", argv[a]);
			errors++;
			break;
		}
		sb = malloc(len * (size_t)nranks);
		rb = malloc(len * (size_t)nranks);
		if (!sb || !rb)
			MPI_Abort(MPI_COMM_WORLD, 3);
		if (secs == 0) {
			for (int r = 0; r < CHECKED_ROUNDS; r++)
				checked_round(sb, rb, len, r);
			if (rank == 0)
				printf("mpi_alltoall: %zu checked %d rounds\n", len, CHECKED_ROUNDS);
		} else {
			long iters;
			double elapsed;

			checked_round(sb, rb, len, 0);
			timed(sb, rb, len, secs / 5, &iters, &elapsed);		/* warm-up */
			timed(sb, rb, len, secs, &iters, &elapsed);
			checked_round(sb, rb, len, 1);
			if (rank == 0)
				printf("mpi_alltoall: time %zu %.1f us %ld iters\n", len,
				       elapsed * 1e6 / iters, iters);
		}
		if (rank == 0)
			fflush(stdout);
		free(sb);
		free(rb);
	}
	MPI_Reduce(&errors, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_alltoall: %s (%ld errors, %d ranks)\n", total ? "FAILED" : "ok", total,
		       nranks);
	MPI_Finalize();
	return total ? 1 : 0;
}
