/*
 * mpi_bench: the MPI measurements an OSU user would make, small enough to read, so that
 * fabtests/scripts/mpi-compare.sh can run the same binary over every Open MPI path.
 *
 *   lat SIZE        ranks 0 and 1 ping-pong SIZE bytes: microseconds one way (half a round trip)
 *   bw SIZE         rank 0 sends windows of 64 nonblocking SIZE-byte messages to rank 1, which
 *                   answers each window with 4 bytes: MB/s (10^6 bytes) of payload
 *   rate SIZE       every rank of the first half sends windows of 64 SIZE-byte messages to its
 *                   partner in the second half, all pairs at once: messages per second, summed
 *   halo SIZE       ranks 0 and 1 exchange SIZE bytes each way at once, as a halo exchange
 *                   does (MPI_Irecv, MPI_Isend, MPI_Waitall): microseconds per exchange. Each
 *                   send completes only when it is complete at the sender, with no answer to
 *                   carry its acknowledgement: what a ping-pong does not show
 *   imbal SIZE      the halo exchange of a program whose two ranks take turns being slow:
 *                   each posts its receive and send, computes (in even steps rank 0 for
 *                   MPI_BENCH_WORK_US, default 1000, in odd ones rank 1; the other not at
 *                   all), then waits for both: microseconds per step. Where a send completes
 *                   only once the computing peer acknowledges it, every step is as slow as
 *                   the work; where the fast rank's send completes while the peer computes,
 *                   it goes on, and a step takes about half the work (each rank works every
 *                   other step) plus the exchange
 *   updates SIZE    random updates, as HPCC RandomAccess (GUPS) over MPI: every rank sends
 *                   buckets of SIZE bytes (8-byte words; a multiple of 8) to random other
 *                   ranks, up to 64 MPI_Isend in flight, keeps 16 MPI_Irecv from
 *                   MPI_ANY_SOURCE posted, and waits on nothing: MPI_Testany (sends) and
 *                   MPI_Test (receives, oldest first) drive it all. Million words delivered
 *                   per second, summed over the ranks.
 *                   What the others do not show: many small messages in flight from and to
 *                   everyone, any-source matching, and progress only when the program tests.
 *                   Each iteration is 64 buckets from every rank; after its last send a rank
 *                   tells every other, in an MPI_Ialltoall it also only tests, how many
 *                   buckets it sent it, so each knows when it has them all; the receives
 *                   left posted are cancelled. Every word is a function of source,
 *                   destination, the pair's bucket sequence number and the word's index,
 *                   so a bucket lost, doubled, misrouted, reordered or corrupt is an error
 *
 * Each runs for about MPI_BENCH_SECONDS (default 1) after a warm-up of a tenth of that, in
 * batches whose count rank 0 decides and broadcasts, so no rank's clock decides alone. Every
 * received message is checked: its first and last bytes carry the iteration they belong to
 * (updates: every word, as above), so a message delivered to the wrong receive, twice, or
 * truncated is counted as an error.
 * Output, from rank 0: "mpi_bench: lat 8 0.512 us" and so on, one line per test;
 * "mpi_bench: errors N" last. Exit status 1 if any check failed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define POSTED 16	/* updates: receives kept posted; at most WINDOW (rbuf's slots) */
#define UPD_TAG 5
#define UPD_STEP 0xd1b54a32d192ed03ull	/* odd: no two words of a bucket agree */

static int rank, nranks, errors;
static double seconds = 1.0;

static void stamp(char *buf, size_t len, int it)
{
	if (!len)
		return;
	buf[0] = (char)it;
	buf[len - 1] = (char)(it * 3 + 1);
}

static void check(const char *buf, size_t len, int it)
{
	if (len && (buf[0] != (char)it || buf[len - 1] != (char)(it * 3 + 1)))
		errors++;
}

/* iters iterations of one test on this rank; returns elapsed seconds (rank 0's) */
typedef double (*bench_fn)(char *sbuf, char *rbuf, size_t len, int iters);

static double lat_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	double t0 = MPI_Wtime();

	for (int i = 0; i < iters; i++) {
		if (rank == 0) {
			stamp(sbuf, len, i);
			MPI_Send(sbuf, (int)len, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)len, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(rbuf, len, i);
		} else if (rank == 1) {
			MPI_Recv(rbuf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(rbuf, len, i);
			stamp(sbuf, len, i);
			MPI_Send(sbuf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
		}
	}
	return MPI_Wtime() - t0;
}

/* one window from each sender to its partner, then the partner's 4-byte answer */
static double window_run(char *sbuf, char *rbuf, size_t len, int iters, int pairs)
{
	MPI_Request req[WINDOW];
	char ack[4];
	double t0 = MPI_Wtime();

	for (int i = 0; i < iters; i++) {
		if (rank < pairs) {
			for (int w = 0; w < WINDOW; w++) {
				stamp(sbuf + (size_t)w * len, len, i + w);
				MPI_Isend(sbuf + (size_t)w * len, (int)len, MPI_CHAR, rank + pairs, 2,
					  MPI_COMM_WORLD, &req[w]);
			}
			MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
			MPI_Recv(ack, 4, MPI_CHAR, rank + pairs, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank < 2 * pairs) {
			for (int w = 0; w < WINDOW; w++)
				MPI_Irecv(rbuf + (size_t)w * len, (int)len, MPI_CHAR, rank - pairs, 2,
					  MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
			for (int w = 0; w < WINDOW; w++)
				check(rbuf + (size_t)w * len, len, i + w);
			MPI_Send(ack, 4, MPI_CHAR, rank - pairs, 3, MPI_COMM_WORLD);
		}
	}
	return MPI_Wtime() - t0;
}

static double work_us = 1000;

/* the exchange of halo and imbal: each step, rank (step % 2) computes work seconds between
 * posting and waiting (0: nobody does) */
static double exchange(char *sbuf, char *rbuf, size_t len, int iters, int tag, double work)
{
	MPI_Request req[2];
	int peer = 1 - rank;
	double t0 = MPI_Wtime();

	for (int i = 0; i < iters && rank < 2; i++) {
		MPI_Irecv(rbuf, (int)len, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[0]);
		stamp(sbuf, len, i);
		MPI_Isend(sbuf, (int)len, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &req[1]);
		if (work > 0 && (i & 1) == rank) {
			double until = MPI_Wtime() + work;

			while (MPI_Wtime() < until)     /* work: no MPI call, so no progress */
				;
		}
		MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
		check(rbuf, len, i);
	}
	return MPI_Wtime() - t0;
}

static double halo_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	return exchange(sbuf, rbuf, len, iters, 4, 0);
}

static double imbal_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	return exchange(sbuf, rbuf, len, iters, 5, work_us * 1e-6);
}

static double bw_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	return window_run(sbuf, rbuf, len, iters, 1);
}

static double rate_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	return window_run(sbuf, rbuf, len, iters, nranks / 2);
}

/* xorshift64*, one stream per rank that goes on across batches: runs repeat exactly */
static uint64_t rnd(void)
{
	static uint64_t x;

	if (!x)
		x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545f4914f6cdd1dull;
}

/* word 0 of bucket seq from src to dst (splitmix64's finaliser, so that every field moves
 * every bit); word i adds i * UPD_STEP */
static uint64_t upd_word0(int src, int dst, uint64_t seq)
{
	uint64_t z = ((uint64_t)src << 40 ^ (uint64_t)dst << 16) + seq * 0x9e3779b97f4a7c15ull;

	z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ z >> 27) * 0x94d049bb133111ebull;
	return z ^ z >> 31;
}

/* MPI_Test as a condition: polling, never waiting, is what the updates test measures */
static int tested(MPI_Request *req)
{
	int flag;

	MPI_Test(req, &flag, MPI_STATUS_IGNORE);
	return flag;
}

static double updates_run(char *sbuf, char *rbuf, size_t len, int iters)
{
	/* sequence numbers of each pair go on across batches: a bucket of an earlier batch
	 * that turns up late is an error too */
	static uint64_t *seq_to, *seq_from;
	MPI_Request sreq[WINDOW], rreq[POSTED], creq = MPI_REQUEST_NULL;
	long *cnt_to = calloc(nranks, sizeof(long)), *cnt_from = calloc(nranks, sizeof(long));
	long nb = (long)iters * WINDOW, sent = 0, got = 0, expect = -1;
	int freed[WINDOW], nfree = WINDOW, oldest = 0;
	size_t words = len / 8;
	double t0 = MPI_Wtime(), idle = t0;

	if (!seq_to) {
		seq_to = calloc(nranks, sizeof(*seq_to));
		seq_from = calloc(nranks, sizeof(*seq_from));
	}
	if (!cnt_to || !cnt_from || !seq_to || !seq_from)
		MPI_Abort(MPI_COMM_WORLD, 3);
	for (int w = 0; w < WINDOW; w++) {
		sreq[w] = MPI_REQUEST_NULL;
		freed[w] = w;
	}
	for (int r = 0; r < POSTED; r++)
		MPI_Irecv(rbuf + (size_t)r * len, (int)len, MPI_CHAR, MPI_ANY_SOURCE, UPD_TAG,
			  MPI_COMM_WORLD, &rreq[r]);
	for (;;) {
		int k, flag, n;
		MPI_Status st;

		if (nfree < WINDOW) {
			MPI_Testany(WINDOW, sreq, &k, &flag, MPI_STATUS_IGNORE);
			if (flag && k != MPI_UNDEFINED)
				freed[nfree++] = k;
		}
		if (sent < nb && nfree) {
			int dst = (int)((rank + 1 + rnd() % (uint64_t)(nranks - 1)) % nranks);
			uint64_t *b, h = upd_word0(rank, dst, seq_to[dst]++);

			k = freed[--nfree];
			b = (uint64_t *)(sbuf + (size_t)k * len);
			for (size_t i = 0; i < words; i++)
				b[i] = h + i * UPD_STEP;
			MPI_Isend(b, (int)len, MPI_CHAR, dst, UPD_TAG, MPI_COMM_WORLD, &sreq[k]);
			cnt_to[dst]++;
			if (++sent == nb)
				MPI_Ialltoall(cnt_to, 1, MPI_LONG, cnt_from, 1, MPI_LONG, MPI_COMM_WORLD,
					      &creq);
			idle = MPI_Wtime();
		}
		/* the oldest receive first: receives match in the order they were posted, so each
		 * source's buckets then come in the order it sent them (MPI's non-overtaking rule),
		 * and the sequence number the check expects is the next of that source's */
		MPI_Test(&rreq[oldest], &flag, &st);
		if (flag) {
			const uint64_t *b = (const uint64_t *)(rbuf + (size_t)oldest * len);
			int src = st.MPI_SOURCE;
			uint64_t h = upd_word0(src, rank, seq_from[src]++);

			MPI_Get_count(&st, MPI_CHAR, &n);
			if ((size_t)n != len)
				errors++;
			else
				for (size_t i = 0; i < words; i++)
					if (b[i] != h + i * UPD_STEP) {
						errors++;
						break;
					}
			got++;
			MPI_Irecv(rbuf + (size_t)oldest * len, (int)len, MPI_CHAR, MPI_ANY_SOURCE,
				  UPD_TAG, MPI_COMM_WORLD, &rreq[oldest]);
			oldest = (oldest + 1) % POSTED;
			idle = MPI_Wtime();
		}
		if (expect < 0 && sent == nb && tested(&creq)) {
			expect = 0;
			for (int p = 0; p < nranks; p++)
				expect += cnt_from[p];
		}
		if (got >= expect && expect >= 0 && nfree == WINDOW)
			break;
		if (MPI_Wtime() - idle > 60) {
			fprintf(stderr, "mpi_bench: updates: rank %d stuck, sent %ld of %ld, got %ld of "
				"%ld\n", rank, sent, nb, got, expect);
			MPI_Abort(MPI_COMM_WORLD, 4);
		}
	}
	if (got != expect)
		errors++;
	/* all sent here have arrived, and no rank sends again before the next batch's barrier:
	 * a receive still posted has nothing to match, and one that matched got a bucket extra */
	for (int r = 0; r < POSTED; r++) {
		MPI_Status st;
		int cancelled;

		MPI_Cancel(&rreq[r]);
		MPI_Wait(&rreq[r], &st);
		MPI_Test_cancelled(&st, &cancelled);
		if (!cancelled)
			errors++;
	}
	free(cnt_to);
	free(cnt_from);
	return MPI_Wtime() - t0;
}

/* Runs fn until `seconds` have passed on rank 0: a batch of iterations, then rank 0 says
 * whether to go on. Returns total iterations and rank 0's elapsed time. */
static void timed(bench_fn fn, char *sbuf, char *rbuf, size_t len, double secs, long *iters,
		  double *elapsed)
{
	int batch = 1, more = 1;

	*iters = 0;
	*elapsed = 0;
	while (more) {
		double t;

		MPI_Barrier(MPI_COMM_WORLD);
		t = fn(sbuf, rbuf, len, batch);
		*iters += batch;
		*elapsed += t;
		if (rank == 0) {
			more = *elapsed < secs;
			/* batches of about a tenth of the run: the barrier costs little */
			if (t < secs / 20 && batch < (1 << 24))
				batch *= 2;
		}
		MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
		MPI_Bcast(&batch, 1, MPI_INT, 0, MPI_COMM_WORLD);
	}
}

int main(int argc, char **argv)
{
	const char *env = getenv("MPI_BENCH_SECONDS");
	char *sbuf, *rbuf;
	int total = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (env && atof(env) > 0)
		seconds = atof(env);
	env = getenv("MPI_BENCH_WORK_US");
	if (env && atof(env) >= 0)
		work_us = atof(env);
	if (nranks < 2 || argc < 3 || (argc - 1) % 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_bench TEST SIZE [TEST SIZE]... (TEST: lat, bw, "
				"rate, halo, imbal or updates; 2 ranks or more)\n");
		MPI_Finalize();
		return 2;
	}
	for (int a = 1; a + 1 < argc; a += 2) {
		size_t len = strtoul(argv[a + 1], NULL, 0);
		bench_fn fn = !strcmp(argv[a], "lat") ? lat_run : !strcmp(argv[a], "bw") ? bw_run :
			      !strcmp(argv[a], "rate") ? rate_run :
			      !strcmp(argv[a], "halo") ? halo_run :
			      !strcmp(argv[a], "imbal") ? imbal_run :
			      !strcmp(argv[a], "updates") ? updates_run : NULL;
		long iters;
		double elapsed;

		if (!fn || len > (64u << 20) || (fn == updates_run && (!len || len % 8))) {
			if (rank == 0)
				fprintf(stderr, "mpi_bench: bad test %s %s\n", argv[a], argv[a + 1]);
			errors++;
			break;
		}
		sbuf = malloc(len * WINDOW + 1);
		rbuf = malloc(len * WINDOW + 1);
		if (!sbuf || !rbuf)
			MPI_Abort(MPI_COMM_WORLD, 3);
		memset(sbuf, 0x5a, len * WINDOW + 1);
		memset(rbuf, 0, len * WINDOW + 1);
		timed(fn, sbuf, rbuf, len, seconds / 10, &iters, &elapsed);  /* warm-up */
		timed(fn, sbuf, rbuf, len, seconds, &iters, &elapsed);
		if (rank == 0) {
			if (fn == lat_run)
				printf("mpi_bench: lat %zu %.3f us\n", len, elapsed * 1e6 / iters / 2);
			else if (fn == halo_run)
				printf("mpi_bench: halo %zu %.3f us\n", len, elapsed * 1e6 / iters);
			else if (fn == imbal_run)
				printf("mpi_bench: imbal %zu %.3f us\n", len, elapsed * 1e6 / iters);
			else if (fn == bw_run)
				printf("mpi_bench: bw %zu %.1f MB/s\n", len,
				       (double)len * WINDOW * iters / elapsed / 1e6);
			else if (fn == updates_run)
				printf("mpi_bench: updates %zu %.2f Mupd/s %d ranks\n", len,
				       (double)len / 8 * WINDOW * iters * nranks / elapsed / 1e6, nranks);
			else
				printf("mpi_bench: rate %zu %.0f msg/s %d pairs\n", len,
				       (double)WINDOW * iters * (nranks / 2) / elapsed, nranks / 2);
			fflush(stdout);
		}
		free(sbuf);
		free(rbuf);
	}
	MPI_Reduce(&errors, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_bench: errors %d\n", total);
	MPI_Finalize();
	return total ? 1 : 0;
}
