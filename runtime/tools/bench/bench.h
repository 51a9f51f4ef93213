/*
 * bench.h - hvd-bench's parts: the options, one measurement case, and the
 * peers it compares against (OpenMPI in bench_mpi.c, Gloo in
 * bench_gloo.cc), each compiled in only when configure found it.
 */
#ifndef HVD_BENCH_H
#define HVD_BENCH_H

#include "hvd.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum bench_coll {
	BENCH_ALLREDUCE,
	BENCH_ALLGATHER,
	BENCH_BROADCAST,
	BENCH_ALLTOALL,
	BENCH_REDUCESCATTER,
	BENCH_COLL_COUNT
};

struct bench_opts {
	enum bench_coll coll;
	size_t min_bytes, max_bytes;
	double factor;
	hvd_dtype_t dtype;
	hvd_op_t op;
	int iters; /* 0: as many as fit in target_s             */
	int warmup;
	int check; /* -c 1: verify one result per size          */
	int cmp_mpi, cmp_gloo, cmp_memcpy;
	const char *csv; /* NULL: no CSV file                         */
	double target_s; /* seconds per measurement when iters == 0   */
	int median;	 /* time per call: median (1) or mean (0)     */
	int cuda;	 /* -D cuda: buffers in device memory         */
	int repeat;	 /* -R: measurements of every implementation
			    per size, alternating (1)                  */
	int rank, size;
};

/* bench_opts.c: the command line (and HVD_BENCH_TIME); *grads is the
 * --grads SPEC or stays NULL.  Nonzero with a message on a bad one. */
int bench_parse_args(int argc, char **argv, struct bench_opts *o,
		     const char **grads);
extern const char *const bench_coll_names[BENCH_COLL_COUNT];

/* One size of one collective.  count is nccl-tests' count: elements of
 * the whole vector for allreduce and broadcast, per rank for allgather and
 * reducescatter (the output slice), per peer for alltoall.  send holds
 * what each rank contributes, recv what it gets (broadcast: recv only,
 * root 0). */
struct bench_case {
	enum bench_coll coll;
	hvd_dtype_t dtype;
	hvd_op_t op;
	size_t count;
	void *send, *recv;
	int rank, size;
};

/* bench_check.c: fill the send buffer (broadcast: the root's receive
 * buffer) with this rank's input; count the elements of the receive buffer
 * that differ from the expected result. */
void bench_fill_inputs(const struct bench_case *c);
long bench_count_wrong(const struct bench_case *c);

/* Runs iters calls of the case and stores the seconds each took on this
 * rank in times[0..iters-1]; nonzero (with a message on stderr) on
 * failure. */
typedef int (*bench_run_fn)(const struct bench_case *c, int iters,
			    double *times);

/* OpenMPI (bench_mpi.c, when HVD_HAVE_MPI).  init calls MPI_Init and
 * checks that MPI's ranks match libhvd's; supported() says whether MPI has
 * the type (no float16/bfloat16 in OpenMPI 4.1). */
int bench_mpi_init(int *argc, char ***argv, int rank, int size);
int bench_mpi_supported(const struct bench_case *c);
int bench_mpi_run(const struct bench_case *c, int iters, double *times);
void bench_mpi_finalize(void);

/* Gloo (bench_gloo.cc, when HVD_HAVE_GLOO): a TCP device on loopback,
 * rendezvous through a FileStore in dir (shared by the ranks of one node).
 * Only allreduce (AllreduceRingChunked) is compared. */
int bench_gloo_init(int rank, int size, const char *dir);
int bench_gloo_supported(const struct bench_case *c);
int bench_gloo_run(const struct bench_case *c, int iters, double *times);
void bench_gloo_finalize(void);

/* --grads SPEC: the engine's gradient-set benchmark (bench_grads.c). */
int bench_grads(const struct bench_opts *opts, const char *spec);

#ifdef __cplusplus
}
#endif

#endif /* HVD_BENCH_H */
