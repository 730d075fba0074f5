/*
 * mpi_intercomm: MPI_COMM_WORLD split into two halves (even and odd ranks, so both are
 * nonempty for any size >= 2), joined by MPI_Intercomm_create, merged back with
 * MPI_Intercomm_merge, and one message each way across the intercommunicator; repeated a few
 * times, freeing everything each round. Prints "mpi_intercomm: ok (N ranks)" from rank 0 when
 * every rank saw the data it expected; exits nonzero on any error.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 4
#define COUNT 64

static int check(int cond, int rank, int round, const char *what)
{
	if (cond)
		return 0;
	fprintf(stderr, "mpi_intercomm: rank %d round %d: %s\n", rank, round, what);
	return 1;
}

int main(int argc, char **argv)
{
	int rank, size, errors = 0, total = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_intercomm: needs at least 2 ranks\n");
		MPI_Finalize();
		return 2;
	}

	for (int round = 0; round < ROUNDS; round++) {
		MPI_Comm local, inter, merged;
		int color = rank % 2;
		int lrank, lsize, rsize, mrank, msize, flag;
		int sbuf[COUNT], rbuf[COUNT];
		MPI_Status st;

		MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
		MPI_Comm_rank(local, &lrank);
		MPI_Comm_size(local, &lsize);
		errors += check(lsize == (color ? size / 2 : (size + 1) / 2), rank, round,
				"wrong local size");
		/* the other half's leader is its rank 0: world rank 1 for evens, 0 for odds */
		MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color ? 0 : 1, 100 + round,
				     &inter);
		MPI_Comm_test_inter(inter, &flag);
		errors += check(flag, rank, round, "not an intercommunicator");
		MPI_Comm_remote_size(inter, &rsize);
		errors += check(rsize == size - lsize, rank, round, "wrong remote size");

		MPI_Intercomm_merge(inter, color, &merged);
		MPI_Comm_rank(merged, &mrank);
		MPI_Comm_size(merged, &msize);
		errors += check(msize == size, rank, round, "wrong merged size");
		/* high = color: evens first, then odds, each in local order */
		errors += check(mrank == (color ? (size + 1) / 2 + lrank : lrank), rank, round,
				"wrong merged rank");

		/* one message each way: local rank i of the evens and of the odds are partners
		 * (for odd sizes the last even rank has no partner) */
		if (lrank < size / 2) {
			for (int i = 0; i < COUNT; i++)
				sbuf[i] = (round << 24) | (rank << 12) | i;
			if (color == 0) {
				MPI_Send(sbuf, COUNT, MPI_INT, lrank, 7, inter);
				MPI_Recv(rbuf, COUNT, MPI_INT, lrank, 8, inter, &st);
			} else {
				MPI_Recv(rbuf, COUNT, MPI_INT, lrank, 7, inter, &st);
				MPI_Send(sbuf, COUNT, MPI_INT, lrank, 8, inter);
			}
			errors += check(st.MPI_SOURCE == lrank, rank, round, "wrong MPI_SOURCE");
			int peer = color ? rank - 1 : rank + 1, bad = 0;
			for (int i = 0; i < COUNT; i++)
				bad += rbuf[i] != ((round << 24) | (peer << 12) | i);
			errors += check(!bad, rank, round, "data mismatch");
		}

		/* the merged communicator works too */
		int sum = 0;
		MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged);
		errors += check(sum == size * (size - 1) / 2, rank, round, "wrong allreduce sum");

		MPI_Comm_free(&merged);
		MPI_Comm_free(&inter);
		MPI_Comm_free(&local);
	}

	MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (total)
			printf("mpi_intercomm: FAILED (%d errors, %d ranks)\n", total, size);
		else
			printf("mpi_intercomm: ok (%d ranks)\n", size);
	}
	MPI_Finalize();
	return total ? 1 : 0;
}
