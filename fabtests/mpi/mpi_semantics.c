/*
 * mpi_semantics: the MPI features whose traffic patterns differ from plain point-to-point,
 * each checked by value, at any number of ranks >= 2:
 *   1. communicators in loops: MPI_Comm_dup, MPI_Comm_split (by parity, reversed keys) and
 *      MPI_Comm_free, 20 rounds, a ring exchange and an allreduce on each new communicator
 *      (every communicator id the library allocates is new tag space for the provider);
 *   2. MPI_Comm_create_group of the even ranks (a group collective only they call);
 *   3. nonblocking collectives: MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce and MPI_Ialltoall
 *      in flight together with point-to-point traffic, completed by MPI_Waitall;
 *   4. MPI_Mprobe / MPI_Mrecv of messages of several sizes from every other rank, sources
 *      and tags taken from the status (sent with MPI_Isend: Open MPI 4.1.4 never completes an
 *      MPI_Issend received that way);
 *   5. MPI_Cancel of posted receives that nothing will match, then receives that do match;
 *   6. persistent requests: MPI_Send_init / MPI_Recv_init started 50 times around a ring.
 * Rank 0 prints "mpi_semantics: ok (N ranks)"; any wrong value prints what and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errors;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "rank %d: %s:%d: ", rank, __func__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n"); \
		errors++; \
	} \
} while (0)

/* a ring exchange and an allreduce on comm, checked */
static void exercise(MPI_Comm comm, int round)
{
	int r, n, got = -1, sum = 0, want = 0;

	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &n);
	MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, round, &got, 1, MPI_INT, (r + n - 1) % n, round,
		     comm, MPI_STATUS_IGNORE);
	CHECK(got == (r + n - 1) % n, "round %d: ring got %d, want %d", round, got,
	      (r + n - 1) % n);
	MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, comm);
	for (int i = 0; i < n; i++)
		want += i;
	CHECK(sum == want, "round %d: allreduce %d, want %d", round, sum, want);
}

static void comm_loops(void)
{
	for (int round = 0; round < 20; round++) {
		MPI_Comm dup, split;
		int color = rank % 2, srank, ssize;

		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		exercise(dup, round);
		MPI_Comm_split(dup, color, size - rank, &split);
		MPI_Comm_rank(split, &srank);
		MPI_Comm_size(split, &ssize);
		CHECK(ssize == (size + 1 - color) / 2, "split size %d", ssize);
		/* reversed keys: the highest world rank of the color is rank 0 */
		CHECK(srank == (ssize - 1) - rank / 2, "split rank %d (world %d)", srank, rank);
		if (ssize > 1)
			exercise(split, round);
		MPI_Comm_free(&split);
		MPI_Comm_free(&dup);
	}
}

static void create_group(void)
{
	MPI_Group world, evens;
	MPI_Comm comm = MPI_COMM_NULL;
	int n = (size + 1) / 2, *ranks = malloc(sizeof(int) * (size_t)n);

	for (int i = 0; i < n; i++)
		ranks[i] = 2 * i;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, n, ranks, &evens);
	if (rank % 2 == 0) {
		MPI_Comm_create_group(MPI_COMM_WORLD, evens, 77, &comm);
		CHECK(comm != MPI_COMM_NULL, "no communicator");
		if (comm != MPI_COMM_NULL) {
			if (n > 1)
				exercise(comm, 100);
			MPI_Comm_free(&comm);
		}
	}
	MPI_Group_free(&evens);
	MPI_Group_free(&world);
	free(ranks);
	MPI_Barrier(MPI_COMM_WORLD);
}

static void nonblocking_collectives(void)
{
	MPI_Request req[8];
	int bval = rank == 0 ? 4242 : -1, in = rank + 1, sum = 0, got = -1, nreq = 0;
	int *a2a_out = malloc(sizeof(int) * (size_t)size), *a2a_in = malloc(sizeof(int) *
									     (size_t)size);

	for (int i = 0; i < size; i++)
		a2a_out[i] = rank * 1000 + i;
	MPI_Ibarrier(MPI_COMM_WORLD, &req[nreq++]);
	MPI_Ibcast(&bval, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[nreq++]);
	MPI_Iallreduce(&in, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[nreq++]);
	MPI_Ialltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, MPI_COMM_WORLD, &req[nreq++]);
	MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 5, MPI_COMM_WORLD, &req[nreq++]);
	MPI_Isend(&rank, 1, MPI_INT, (rank + 1) % size, 5, MPI_COMM_WORLD, &req[nreq++]);
	MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
	CHECK(bval == 4242, "ibcast %d", bval);
	CHECK(sum == size * (size + 1) / 2, "iallreduce %d", sum);
	for (int i = 0; i < size; i++)
		CHECK(a2a_in[i] == i * 1000 + rank, "ialltoall[%d] %d", i, a2a_in[i]);
	CHECK(got == (rank + size - 1) % size, "point-to-point beside them: %d", got);
	free(a2a_out);
	free(a2a_in);
}

static void mprobe(void)
{
	static const int lens[] = { 0, 1, 100, 5000, 70000, 300000 };
	const int nl = (int)(sizeof(lens) / sizeof(lens[0]));
	int nreq = 0, maxlen = 300000;
	MPI_Request *req = malloc(sizeof(*req) * (size_t)(size * nl));
	char *out = malloc((size_t)maxlen), *in = malloc((size_t)maxlen);

	for (int i = 0; i < maxlen; i++)
		out[i] = (char)(rank + i);
	for (int p = 0; p < size; p++)
		for (int k = 0; p != rank && k < nl; k++)
			MPI_Isend(out, lens[k], MPI_CHAR, p, 300 + k, MPI_COMM_WORLD, &req[nreq++]);
	for (int n = 0; n < (size - 1) * nl; n++) {
		MPI_Message msg;
		MPI_Status st;
		int count, k;

		MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
		MPI_Get_count(&st, MPI_CHAR, &count);
		k = st.MPI_TAG - 300;
		CHECK(k >= 0 && k < nl && count == lens[k] && st.MPI_SOURCE != rank,
		      "probed source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
		MPI_Mrecv(in, count, MPI_CHAR, &msg, &st);
		for (int i = 0; i < count; i++)
			if (in[i] != (char)(st.MPI_SOURCE + i)) {
				CHECK(0, "byte %d of %d from %d", i, count, st.MPI_SOURCE);
				break;
			}
	}
	MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
	free(req);
	free(out);
	free(in);
	MPI_Barrier(MPI_COMM_WORLD);
}

static void cancel_receives(void)
{
	MPI_Request req[4];
	MPI_Status st;
	int buf[4], flag = 0, got = -1;

	for (int i = 0; i < 4; i++)
		MPI_Irecv(&buf[i], 1, MPI_INT, MPI_ANY_SOURCE, 9000 + i, MPI_COMM_WORLD, &req[i]);
	for (int i = 0; i < 4; i++) {
		MPI_Cancel(&req[i]);
		MPI_Wait(&req[i], &st);
		MPI_Test_cancelled(&st, &flag);
		CHECK(flag, "receive %d not cancelled", i);
	}
	/* the same tags still work afterwards (once every rank has cancelled: a message sent
	 * before would rightly be taken by a receive not yet cancelled) */
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 9000, &got, 1, MPI_INT,
		     (rank + size - 1) % size, 9000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(got == (rank + size - 1) % size, "after cancel got %d", got);
}

static void persistent(void)
{
	MPI_Request req[2];
	int out = 0, in = -1;

	MPI_Send_init(&out, 1, MPI_INT, (rank + 1) % size, 42, MPI_COMM_WORLD, &req[0]);
	MPI_Recv_init(&in, 1, MPI_INT, (rank + size - 1) % size, 42, MPI_COMM_WORLD, &req[1]);
	for (int i = 0; i < 50; i++) {
		out = rank * 100 + i;
		MPI_Startall(2, req);
		MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
		CHECK(in == ((rank + size - 1) % size) * 100 + i, "round %d got %d", i, in);
	}
	MPI_Request_free(&req[0]);
	MPI_Request_free(&req[1]);
}

int main(int argc, char **argv)
{
	int all;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	comm_loops();
	create_group();
	nonblocking_collectives();
	mprobe();
	cancel_receives();
	persistent();
	MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && all == 0)
		printf("mpi_semantics: ok (%d ranks)\n", size);
	MPI_Finalize();
	return all ? 1 : 0;
}
