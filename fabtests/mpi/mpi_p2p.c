/* Open MPI over courier, two-sided: point-to-point from 1 B to 16 MiB with probes and wildcard
 * receives, verified both ways, an allreduce, then 16 rounds around a ring of all ranks
 * (each sends 4 KiB to the next, verified), so every rank talks to two peers more than once:
 * the script checks that every rank's traffic went through shared memory, and a pair's
 * first packets may precede its handshake. Run by fabtests/mpi/run-mpi.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
	int rank, size, errs = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (size_t len = 1; len <= (16u << 20); len *= 4) {
		char *b = malloc(len);
		if (rank == 0) {
			for (size_t i = 0; i < len; i++) b[i] = (char)(i * 7 + len);
			MPI_Send(b, (int)len, MPI_CHAR, 1, 5, MPI_COMM_WORLD);
			MPI_Recv(b, (int)len, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (size_t i = 0; i < len; i++) if (b[i] != (char)(i * 7 + len + 1)) { errs++; break; }
		} else if (rank == 1) {
			MPI_Status st; int cnt;
			MPI_Probe(0, 5, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_CHAR, &cnt);
			if ((size_t)cnt != len) errs++;
			MPI_Recv(b, (int)len, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (size_t i = 0; i < len; i++) b[i] = (char)(b[i] + 1);
			MPI_Send(b, (int)len, MPI_CHAR, 0, 6, MPI_COMM_WORLD);
		}
		free(b);
	}
	long v = rank, sum = 0;
	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != (long)size * (size - 1) / 2) errs++;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	for (int round = 0; round < 16; round++) {
		int out[1024], in[1024];
		for (int i = 0; i < 1024; i++) out[i] = rank * 100000 + round * 1024 + i;
		MPI_Sendrecv(out, 1024, MPI_INT, next, 7, in, 1024, MPI_INT, prev, 7,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (int i = 0; i < 1024; i++)
			if (in[i] != prev * 100000 + round * 1024 + i) { errs++; break; }
	}
	MPI_Barrier(MPI_COMM_WORLD);
	int tot = 0;
	MPI_Reduce(&errs, &tot, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) printf("mpi_p2p: %s (%d errors, %d ranks)\n", tot ? "FAILED" : "ok", tot, size);
	MPI_Finalize();
	return tot != 0;
}
