/*
 * hvd.h - the public C API of libhvd, slurm-horovod's runtime library.
 *
 * Every function returns an hvd_status_t (HVD_OK on success).  On failure a
 * human-readable message for the calling thread's last error is available
 * from hvd_last_error().  The library never calls exit() or abort() on a user
 * error.
 *
 * Ranks come from PMIx (srun --mpi=pmix, hvdrun, mpirun/prterun).  When the
 * SPANK plugin set HOROVOD_RANK/HOROVOD_SIZE they must agree with PMIx.
 *
 * Layers:
 *   - init/finalize and rank queries;
 *   - blocking collectives on the world (host memory; device memory when the
 *     library was built with CUDA/NCCL);
 *   - the engine: asynchronous named operations with negotiation, response
 *     cache, tensor fusion, process sets, timeline and stall inspection;
 *   - the checkpointer;
 *   - elastic training (the world re-formed after a failure, or grown).
 */
#ifndef HVD_H
#define HVD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_VERSION_MAJOR 0
#define HVD_VERSION_MINOR 1
#define HVD_VERSION_PATCH 0

/* ---------------------------------------------------------------------- */
/* Statuses.  The numeric values are stable (doc/errors.md).               */

typedef enum {
	HVD_OK = 0,
	HVD_IN_PROGRESS = 1,          /* hvd_test(): not finished yet        */
	HVD_ERR_NOT_INITIALIZED = 2,  /* call before hvd_init()/after final. */
	HVD_ERR_INVALID_ARG = 3,      /* NULL buffer, bad count, bad root... */
	HVD_ERR_BAD_TYPE = 4,         /* unknown hvd_dtype_t                 */
	HVD_ERR_BAD_OP = 5,           /* unknown hvd_op_t or op/type pair    */
	HVD_ERR_BOOTSTRAP = 6,        /* PMIx failure or rank disagreement   */
	HVD_ERR_TRANSPORT = 7,        /* UCX / shared memory failure         */
	HVD_ERR_PEER_FAILED = 8,      /* a peer process died                 */
	HVD_ERR_TIMEOUT = 9,          /* bounded wait expired                */
	HVD_ERR_NO_MEMORY = 10,
	HVD_ERR_MISMATCH = 11,        /* same name, different parameters     */
	HVD_ERR_STALLED = 12,         /* stall shutdown time exceeded        */
	HVD_ERR_NOT_MEMBER = 13,      /* caller not in the process set       */
	HVD_ERR_PROCESS_SET = 14,     /* unknown or inconsistent process set */
	HVD_ERR_SHUTDOWN = 15,        /* engine shut down with op pending    */
	HVD_ERR_IO = 16,              /* file system error (checkpoint, ...) */
	HVD_ERR_CORRUPT = 17,         /* checkpoint failed verification      */
	HVD_ERR_CUDA = 18,
	HVD_ERR_NCCL = 19,
	HVD_ERR_UNSUPPORTED = 20,     /* feature not built in / not allowed  */
	HVD_ERR_DUPLICATE_NAME = 21,  /* name already in flight on this rank */
	HVD_ERR_INTERNAL = 22,
	/* Elastic training (hvd_elastic_*, below). */
	HVD_HOSTS_UPDATED = 23,       /* ranks are waiting to join: re-form */
	HVD_ERR_TOO_FEW_RANKS = 24,   /* fewer than HOROVOD_ELASTIC_MIN_SIZE */
	HVD_ERR_REMOVED = 25,         /* this rank is out of the elastic job */
} hvd_status_t;

/* Name of a status ("HVD_ERR_MISMATCH"). */
const char *hvd_status_name(hvd_status_t status);
/* Its stable code ("HVD-3020"; doc/errors.md gives cause and fix of each):
 * 1xxx bootstrap and launch, 2xxx GPU/NCCL, 3xxx tensors and negotiation,
 * 4xxx checkpoint, 5xxx transport and peer failure, 9xxx internal. */
const char *hvd_status_code(hvd_status_t status);
/* Message for the calling thread's last error ("" when none).  It starts
 * with the code of the status it came with: "HVD-3020 hvd: ...". */
const char *hvd_last_error(void);

/* ---------------------------------------------------------------------- */
/* Types and reduction operations.                                         */

typedef enum {
	HVD_UINT8 = 0,
	HVD_INT8 = 1,
	HVD_INT32 = 2,
	HVD_INT64 = 3,
	HVD_FLOAT16 = 4,   /* IEEE binary16, accumulated in float32 */
	HVD_BFLOAT16 = 5,  /* bfloat16, accumulated in float32      */
	HVD_FLOAT32 = 6,
	HVD_FLOAT64 = 7,
	HVD_DTYPE_COUNT
} hvd_dtype_t;

typedef enum {
	HVD_SUM = 0,
	HVD_AVERAGE = 1,
	HVD_MIN = 2,
	HVD_MAX = 3,
	HVD_PRODUCT = 4,
	HVD_OP_COUNT,      /* the elementwise reductions are 0..COUNT-1 */
	/* Not elementwise, allreduce only: Horovod's Adasum, of float16,
	 * bfloat16, float32 or float64 in host memory, over a power-of-two
	 * number of ranks. */
	HVD_ADASUM = 16
} hvd_op_t;

/* Size in bytes of one element, 0 for an invalid type. */
size_t hvd_dtype_size(hvd_dtype_t dtype);
/* "float32", "bfloat16", ...; NULL for an invalid type. */
const char *hvd_dtype_name(hvd_dtype_t dtype);
/* Parse a type name; HVD_ERR_BAD_TYPE when unknown. */
hvd_status_t hvd_dtype_parse(const char *name, hvd_dtype_t *dtype);
/* "sum", "avg", "min", "max", "prod"; NULL for an invalid op. */
const char *hvd_op_name(hvd_op_t op);
hvd_status_t hvd_op_parse(const char *name, hvd_op_t *op);

/* Pass as the send buffer to reduce in place in the receive buffer
 * (passing the same pointer for both works too). */
#define HVD_IN_PLACE ((const void *)1)

/* ---------------------------------------------------------------------- */
/* What this build of libhvd has (for bindings' *_built() probes).         */

/* 1 when built with the GPU path (CUDA + NCCL), else 0. */
int hvd_cuda_built(void);
/* NCCL_VERSION_CODE of the NCCL built against, 0 without the GPU path. */
int hvd_nccl_built(void);

/* ---------------------------------------------------------------------- */
/* Initialisation and ranks.                                               */

hvd_status_t hvd_init(void);
hvd_status_t hvd_finalize(void);
/* 1 between a successful hvd_init() and hvd_finalize(), else 0. */
int hvd_is_initialized(void);

/* Rank queries return -1 before hvd_init(). */
int hvd_rank(void);
int hvd_size(void);
int hvd_local_rank(void);
int hvd_local_size(void);
int hvd_cross_rank(void);   /* index among ranks with the same local rank */
int hvd_cross_size(void);   /* number of ranks with the same local rank   */
int hvd_node_id(void);      /* index of this rank's node, 0..nodes-1      */

/* ---------------------------------------------------------------------- */
/* Blocking collectives over all ranks.  Buffers are host memory, or
 * device memory when built with CUDA (routed to NCCL).  Counts are in
 * elements.                                                               */

hvd_status_t hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			   hvd_dtype_t dtype, hvd_op_t op);
/* recvbuf receives size*count elements, rank r's at offset r*count. */
hvd_status_t hvd_allgather(const void *sendbuf, void *recvbuf, size_t count,
			   hvd_dtype_t dtype);
/* Rank r contributes recvcounts[r] elements, placed at displs[r]
 * (displs may be NULL: packed in rank order).  recvcounts must be the
 * same on every rank; displs are this rank's own layout. */
hvd_status_t hvd_allgatherv(const void *sendbuf, size_t sendcount,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *displs, hvd_dtype_t dtype);
hvd_status_t hvd_broadcast(void *buf, size_t count, hvd_dtype_t dtype,
			   int root);
/* Each rank sends count elements to every rank (sendbuf holds size*count). */
hvd_status_t hvd_alltoall(const void *sendbuf, void *recvbuf, size_t count,
			  hvd_dtype_t dtype);
hvd_status_t hvd_alltoallv(const void *sendbuf, const size_t *sendcounts,
			   const size_t *sdispls, void *recvbuf,
			   const size_t *recvcounts, const size_t *rdispls,
			   hvd_dtype_t dtype);
/* Reduce count elements over all ranks and scatter the result: rank r
 * receives hvd_reducescatter_count(count, r, size) elements starting at
 * element hvd_reducescatter_offset(count, r, size) (an even split, the
 * first count%size ranks one element more, as in Horovod). */
hvd_status_t hvd_reducescatter(const void *sendbuf, void *recvbuf,
			       size_t count, hvd_dtype_t dtype, hvd_op_t op);
size_t hvd_reducescatter_count(size_t count, int rank, int size);
size_t hvd_reducescatter_offset(size_t count, int rank, int size);
hvd_status_t hvd_barrier(void);

/* ---------------------------------------------------------------------- */
/* Process sets.  Set 0 is the global set.  Static sets come from
 * HOROVOD_PROCESS_SETS at init ("0,1;2,3" - one set per ';'); dynamic sets
 * need HOROVOD_DYNAMIC_PROCESS_SETS=1 and are added/removed collectively
 * by all ranks with identical arguments.                                  */

typedef int32_t hvd_pset_t;
#define HVD_PSET_GLOBAL 0

hvd_status_t hvd_pset_add(const int *ranks, int nranks, hvd_pset_t *pset);
hvd_status_t hvd_pset_remove(hvd_pset_t pset);
/* Rank of the caller within the set, or -1 when not a member. */
int hvd_pset_rank(hvd_pset_t pset);
int hvd_pset_size(hvd_pset_t pset);
/* Number of process sets, and their ids (ids must hold n entries). */
hvd_status_t hvd_pset_list(hvd_pset_t *ids, int max, int *n);
/* The world ranks of a set, ascending: *n is the set's size, and the first
 * min(max, *n) of them are written to ranks. */
hvd_status_t hvd_pset_ranks(hvd_pset_t pset, int *ranks, int max, int *n);

/* ---------------------------------------------------------------------- */
/* Engine: asynchronous named operations.                                  */

typedef struct hvd_handle *hvd_handle_t;

/* Completion callback, run on the engine thread: keep it short. */
typedef void (*hvd_callback_t)(hvd_handle_t handle, hvd_status_t status,
			       void *arg);

typedef struct {
	hvd_pset_t pset;         /* default HVD_PSET_GLOBAL                 */
	double prescale;         /* multiply inputs before reducing (1.0)   */
	double postscale;        /* multiply result after reducing (1.0)    */
	int priority;            /* higher runs first within a cycle (0)    */
	int compress_fp16;       /* float32 exchanged as float16 (0)        */
	int group;               /* >0: ops of the same group run together  */
	hvd_callback_t callback; /* optional                                */
	void *callback_arg;
	/* The tensor's dimensions, when it has a shape (ndims 0: none).  The
	 * ranks must agree on it as on the count: every dimension for
	 * allreduce, broadcast and reducescatter, all but the first for
	 * allgather and alltoall; 2x3 against 3x2 is then HVD_ERR_MISMATCH
	 * on every rank instead of a sum of unrelated elements.  At most
	 * HVD_MAX_DIMS; the array is read during the call only. */
	const int64_t *shape;
	int ndims;
} hvd_opts_t;
#define HVD_MAX_DIMS 32

/* Default options (pset 0, scale factors 1.0, everything else off). */
void hvd_opts_init(hvd_opts_t *opts);

/* opts may be NULL for the defaults.  The buffers must stay valid until
 * the handle completes.  Names identify an operation across ranks: the
 * same name must be submitted with the same parameters on every member. */
hvd_status_t hvd_allreduce_async(const char *name, const void *sendbuf,
				 void *recvbuf, size_t count,
				 hvd_dtype_t dtype, hvd_op_t op,
				 const hvd_opts_t *opts, hvd_handle_t *handle);
/* count may differ between ranks (the first dimension, as in Horovod):
 * recvbuf must hold the sum of all counts; hvd_handle_count() gives it. */
hvd_status_t hvd_allgather_async(const char *name, const void *sendbuf,
				 void *recvbuf, size_t count,
				 hvd_dtype_t dtype, const hvd_opts_t *opts,
				 hvd_handle_t *handle);
hvd_status_t hvd_broadcast_async(const char *name, void *buf, size_t count,
				 hvd_dtype_t dtype, int root,
				 const hvd_opts_t *opts, hvd_handle_t *handle);
hvd_status_t hvd_alltoall_async(const char *name, const void *sendbuf,
				void *recvbuf, size_t count,
				hvd_dtype_t dtype, const hvd_opts_t *opts,
				hvd_handle_t *handle);
hvd_status_t hvd_reducescatter_async(const char *name, const void *sendbuf,
				     void *recvbuf, size_t count,
				     hvd_dtype_t dtype, hvd_op_t op,
				     const hvd_opts_t *opts,
				     hvd_handle_t *handle);

/* Wait for completion and release the handle; returns the op's status. */
hvd_status_t hvd_wait(hvd_handle_t handle);
/* HVD_IN_PROGRESS while running; otherwise the op's status (the handle is
 * still owned by the caller and must be released by hvd_wait()). */
hvd_status_t hvd_test(hvd_handle_t handle);
/* Elements produced by a finished allgather (sum of all ranks' counts). */
size_t hvd_handle_count(hvd_handle_t handle);

/* Group: the next n ops submitted by this thread with opts->group set to
 * the returned id are enqueued together and execute in the same cycle. */
hvd_status_t hvd_group_begin(int *group_id);
hvd_status_t hvd_group_end(int group_id);

/* This rank has run out of data: it takes part in every collective the
 * others start, contributing zeros, until all ranks have joined.  Returns
 * the last rank to join in *last_rank. */
hvd_status_t hvd_join(int *last_rank);

/* Device memory and a framework's stream: the CUDA stream (a
 * cudaStream_t) whose queued work this thread's later asynchronous device
 * operations wait for, on the GPU, before they read their buffers; each
 * one's completion is then also queued on that stream, so work the caller
 * queues after hvd_wait sees the result.  No host synchronization is
 * needed in between.  NULL (the default) orders nothing: device buffers
 * must be ready when submitted (the legacy default stream's work always
 * is).  Thread-local.  HVD_ERR_UNSUPPORTED for a stream without the GPU
 * path.  The blocking collectives ignore it. */
hvd_status_t hvd_stream_set(void *stream);

/* Timeline control (HOROVOD_TIMELINE gives the file at init). */
hvd_status_t hvd_timeline_start(const char *path, int mark_cycles);
hvd_status_t hvd_timeline_stop(void);

/* ---------------------------------------------------------------------- */
/* Checkpointing.                                                          */

typedef struct hvd_ckpt hvd_ckpt_t;

typedef enum {
	HVD_CKPT_REPLICATED = 0, /* identical on every rank, written once */
	HVD_CKPT_PER_RANK = 1,   /* each rank's own copy: opaque, restores
				    only on the same number of ranks     */
	HVD_CKPT_SHARDED = 2,    /* this rank's block of one global array
				    (hvd_ckpt_register_sharded): resliced
				    when restored on another size         */
} hvd_ckpt_kind_t;

typedef struct {
	const char *dir; /* NULL: HOROVOD_CHECKPOINT_DIR              */
	long every;      /* <=0: HOROVOD_CHECKPOINT_EVERY (default 0:
			    only on a stop request)                    */
	int keep;        /* <=0: HOROVOD_CHECKPOINT_KEEP (default 3)  */
	int async;       /* write in the background                   */
	int overlap;     /* async: the staging copy runs in the
			    background too; the program must call
			    hvd_ckpt_fence() before it modifies a
			    registered buffer                         */
} hvd_ckpt_config_t;

/* hvd_ckpt_step() returns HVD_OK and sets *stop to 1 when a SIGTERM or
 * SIGUSR1 arrived and the checkpoint was written: the program should exit
 * with HVD_CKPT_EXIT_STATUS so that a requeued job resumes. */
#define HVD_CKPT_EXIT_STATUS 85

hvd_status_t hvd_ckpt_open(const hvd_ckpt_config_t *config,
			   hvd_ckpt_t **ckpt);
hvd_status_t hvd_ckpt_register(hvd_ckpt_t *ckpt, const char *name,
			       void *buf, size_t bytes,
			       hvd_ckpt_kind_t kind);
/* A global array of count elements of elem bytes, split in blocks over
 * the ranks (the first count % size ranks hold one element more): buf is
 * this rank's block, hvd_ckpt_shard_range(count, rank, size) elements.
 * Restored on any number of ranks: each rank reads its new block from the
 * files of the ranks that wrote it. */
hvd_status_t hvd_ckpt_register_sharded(hvd_ckpt_t *ckpt, const char *name,
				       void *buf, uint64_t count,
				       size_t elem);
/* The block of rank among size ranks of an array of count elements:
 * *first its first element, the return value its length. */
uint64_t hvd_ckpt_shard_range(uint64_t count, int rank, int size,
			      uint64_t *first);
/* A global sampler position: consumed = the samples of the epoch taken so
 * far by all ranks together (keep it replicated, in a registered buffer or
 * the metadata).  Each step the ranks take the next size * batch positions
 * of the epoch's order, rank r those at consumed + r, + r + size, ...:
 * hvd_ckpt_sampler_batch() writes rank's positions into pos (at most batch,
 * fewer at the end of the epoch) and returns how many; the new consumed is
 * hvd_ckpt_sampler_advance().  Restored on another number of ranks, the
 * same consumed gives the ranks the rest of the epoch, every sample once. */
size_t hvd_ckpt_sampler_batch(uint64_t epoch_size, uint64_t consumed,
			      int rank, int size, size_t batch,
			      uint64_t *pos);
uint64_t hvd_ckpt_sampler_advance(uint64_t epoch_size, uint64_t consumed,
				  int size, size_t batch);
/* Metadata blob saved with each checkpoint (copied at each write). */
hvd_status_t hvd_ckpt_set_meta(hvd_ckpt_t *ckpt, const void *meta,
			       size_t bytes);
/* After restore: the metadata of the loaded checkpoint. */
hvd_status_t hvd_ckpt_get_meta(hvd_ckpt_t *ckpt, void *meta, size_t max,
			       size_t *bytes);
/* Load the newest checkpoint that verifies on every rank; *step is its
 * step, or 0 when there is none (hvd_last_error() says why). */
hvd_status_t hvd_ckpt_restore(hvd_ckpt_t *ckpt, long *step);
hvd_status_t hvd_ckpt_step(hvd_ckpt_t *ckpt, long step, int *stop);
/* Write now, whatever the step. */
hvd_status_t hvd_ckpt_save(hvd_ckpt_t *ckpt, long step);
/* Wait for a background write to finish. */
hvd_status_t hvd_ckpt_wait(hvd_ckpt_t *ckpt);
/* The program is about to modify registered buffers: returns once the
 * staging copy of the checkpoint in flight is done (config.overlap; at
 * once otherwise).  Not collective. */
hvd_status_t hvd_ckpt_fence(hvd_ckpt_t *ckpt);
hvd_status_t hvd_ckpt_close(hvd_ckpt_t *ckpt);
/* 1 when a stop (SIGTERM/SIGUSR1) was requested on this rank, or the
 * ranks agreed on another rank's at hvd_ckpt_step(). */
int hvd_ckpt_stop_requested(void);


/* ---------------------------------------------------------------------- */
/* Elastic training (HOROVOD_ELASTIC=1: srun --horovod=elastic, or hvdrun
 * --elastic).  doc/elastic.md has the whole story.
 *
 * When a rank dies, the operations in flight fail on every other rank with
 * HVD_ERR_PEER_FAILED (within HOROVOD_PEER_TIMEOUT).  The survivors then
 * roll their state back to its last commit and call hvd_elastic_reset():
 * they agree on the new membership and libhvd re-forms itself around it -
 * ranks renumbered in their old order (rank 0 is the lowest survivor),
 * local/cross ranks and nodes computed again, the world communicator, the
 * engine (fresh caches) and, on first use, shared memory and NCCL made
 * anew; process sets other than the global one are gone (add them again).
 * Then every rank makes its state rank 0's (a broadcast) and goes on.
 *
 * Growing: a later srun --horovod=elastic step of the same job joins in its
 * hvd_init(), which returns once it is a member of the running world; the
 * running ranks learn of it at their next commit, where
 * hvd_elastic_check_hosts() returns HVD_HOSTS_UPDATED on every rank: they
 * call hvd_elastic_reset() too (no rollback) and sync.
 *
 * A program's commit is: copy its state aside, then
 * hvd_elastic_check_hosts().  hvd_elastic_run() below runs the whole loop
 * (Horovod's hvd.elastic.run) around four hooks.                          */

/* 1 with HOROVOD_ELASTIC=1. */
int hvd_elastic_enabled(void);
/* HOROVOD_ELASTIC_MIN_SIZE (default 1). */
int hvd_elastic_min_size(void);
/* Re-formings of this world so far (0 after hvd_init). */
unsigned hvd_elastic_epoch(void);
/* Collective over the live ranks: re-form the world.  HVD_OK, or
 * HVD_ERR_TOO_FEW_RANKS when fewer than the minimum are left (the world
 * is re-formed all the same, so that the program can checkpoint and
 * exit), HVD_ERR_REMOVED when this rank was left out (exit),
 * HVD_ERR_TIMEOUT when no agreement came within HOROVOD_ELASTIC_TIMEOUT
 * (default 600 s).  Call it from one thread, with no operation of this
 * rank in flight (those that were have completed with their error). */
hvd_status_t hvd_elastic_reset(void);
/* Collective: HVD_HOSTS_UPDATED on every rank when processes wait to join
 * (rank 0 decides), else HVD_OK (always, without elastic).  Horovod's
 * check_host_updates. */
hvd_status_t hvd_elastic_check_hosts(void);

typedef struct {
	/* Trains from the current state until done (HVD_OK) or until an
	 * operation or a commit fails; returns that status. */
	hvd_status_t (*train)(void *arg);
	/* Back to the state of the last commit (after HVD_ERR_PEER_FAILED). */
	void (*restore)(void *arg);
	/* Every rank's state becomes rank 0's (e.g. hvd_broadcast of each
	 * buffer from root 0); returns the status of the broadcasts. */
	hvd_status_t (*sync)(void *arg);
	/* After each re-forming, before sync: what depends on the world
	 * (process sets, a learning rate scaled by hvd_size(), a data
	 * split).  May be NULL. */
	void (*on_reset)(void *arg);
} hvd_elastic_hooks_t;

/* Horovod's elastic run loop (without elastic: sync and train once, a
 * failure ends it as before): sync, then train; on HVD_ERR_PEER_FAILED
 * (or HVD_ERR_TIMEOUT, HVD_ERR_TRANSPORT) restore, re-form, on_reset,
 * sync and train again; on HVD_HOSTS_UPDATED re-form, on_reset, sync and
 * train again.  Returns HVD_OK when train
 * does, or the first status it cannot handle (HVD_ERR_TOO_FEW_RANKS with
 * the world re-formed, HVD_ERR_REMOVED, ...). */
hvd_status_t hvd_elastic_run(const hvd_elastic_hooks_t *hooks, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* HVD_H */
