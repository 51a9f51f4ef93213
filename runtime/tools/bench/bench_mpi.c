/*
 * bench_mpi.c - hvd-bench's OpenMPI peer: the same collective on the same
 * buffers through MPI (MPI_Allreduce, MPI_Allgather, MPI_Bcast,
 * MPI_Alltoall, MPI_Reduce_scatter).  Built only when configure found
 * OpenMPI (HVD_HAVE_MPI); MPI_Init runs only for --compare mpi.  Which
 * point-to-point layer OpenMPI uses (pml ob1 or ucx) is the user's choice
 * on the mpirun command line (hvd-bench(1)).
 */
#include "config.h"

#include "tools/bench/bench.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int inited;
static int *rs_counts; /* MPI_Reduce_scatter receive counts */

int bench_mpi_init(int *argc, char ***argv, int rank, int size)
{
	int r, n, flag;

	MPI_Initialized(&flag);
	if (!flag && MPI_Init(argc, argv) != MPI_SUCCESS) {
		fprintf(stderr, "hvd-bench: MPI_Init failed (--compare mpi "
				"needs mpirun or srun --mpi=pmix)\n");
		return -1;
	}
	inited = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (r != rank || n != size) {
		fprintf(stderr,
			"hvd-bench: MPI says rank %d of %d, libhvd rank %d of "
			"%d: start hvd-bench with mpirun for --compare mpi\n",
			r, n, rank, size);
		return -1;
	}
	rs_counts = calloc((size_t)n, sizeof(*rs_counts));
	return rs_counts ? 0 : -1;
}

static MPI_Datatype mpi_type(hvd_dtype_t t)
{
	switch (t) {
	case HVD_UINT8:
		return MPI_UINT8_T;
	case HVD_INT8:
		return MPI_INT8_T;
	case HVD_INT32:
		return MPI_INT32_T;
	case HVD_INT64:
		return MPI_INT64_T;
	case HVD_FLOAT32:
		return MPI_FLOAT;
	case HVD_FLOAT64:
		return MPI_DOUBLE;
	default:
		return MPI_DATATYPE_NULL; /* no float16/bfloat16 in MPI 3 */
	}
}

static MPI_Op mpi_op(hvd_op_t op)
{
	switch (op) {
	case HVD_PRODUCT:
		return MPI_PROD;
	case HVD_MIN:
		return MPI_MIN;
	case HVD_MAX:
		return MPI_MAX;
	default:
		return MPI_SUM; /* average: the sum, as libhvd reduces it */
	}
}

int bench_mpi_supported(const struct bench_case *c)
{
	if (c->count > (size_t)1 << 30) /* MPI counts are int */
		return 0;
	return mpi_type(c->dtype) != MPI_DATATYPE_NULL;
}

int bench_mpi_run(const struct bench_case *c, int iters, double *times)
{
	MPI_Datatype t = mpi_type(c->dtype);
	MPI_Op op = mpi_op(c->op);
	int cnt = (int)c->count, rc = MPI_SUCCESS;
	double t0, t1;

	if (c->coll == BENCH_REDUCESCATTER)
		for (int r = 0; r < c->size; r++)
			rs_counts[r] = cnt;
	t0 = MPI_Wtime();
	for (int i = 0; i < iters && rc == MPI_SUCCESS; i++) {
		switch (c->coll) {
		case BENCH_ALLREDUCE:
			rc = MPI_Allreduce(c->send, c->recv, cnt, t, op,
					   MPI_COMM_WORLD);
			break;
		case BENCH_ALLGATHER:
			rc = MPI_Allgather(c->send, cnt, t, c->recv, cnt, t,
					   MPI_COMM_WORLD);
			break;
		case BENCH_BROADCAST:
			rc = MPI_Bcast(c->recv, cnt, t, 0, MPI_COMM_WORLD);
			break;
		case BENCH_ALLTOALL:
			rc = MPI_Alltoall(c->send, cnt, t, c->recv, cnt, t,
					  MPI_COMM_WORLD);
			break;
		default:
			rc = MPI_Reduce_scatter(c->send, c->recv, rs_counts, t,
						op, MPI_COMM_WORLD);
			break;
		}
		t1 = MPI_Wtime();
		times[i] = t1 - t0;
		t0 = t1;
	}
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "hvd-bench: MPI collective failed (%d)\n", rc);
		return -1;
	}
	return 0;
}

void bench_mpi_finalize(void)
{
	if (inited)
		MPI_Finalize();
	inited = 0;
	free(rs_counts);
	rs_counts = NULL;
}
