/*
 * ckpt_manifest.h - the pure core of the checkpointer: the manifest that
 * commits a checkpoint, directory names, and retention planning.  No I/O
 * here (see ckpt_store.h), so every rule is unit-tested on its own.
 *
 * A checkpoint directory DIR/step-00000100 holds
 *   replicated.bin     replicated buffers, in registration order (rank 0)
 *   rank-00000.bin ... per-rank buffers of each rank, same layout everywhere
 *   shard-00000.bin .. each rank's slices of the sharded buffers (format 2)
 *   MANIFEST           written last, by rank 0: the commit record
 * and is created as DIR/step-00000100.partial-TAG, renamed when complete.
 * DIR/latest names the newest committed directory (a hint for people and
 * tools; restore trusts only manifests that verify).
 */
#ifndef HVD_CKPT_MANIFEST_H
#define HVD_CKPT_MANIFEST_H

#include "base/base.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Format 1: replicated and per-rank buffers.  Format 2 adds sharded
 * buffers (a line sharded_bytes, "buffer sharded NAME OFF BYTES ELEM",
 * shard-R.bin files); a checkpoint without sharded buffers is still
 * written as format 1, so that an older libhvd reads it. */
#define CKPT_FORMAT_VERSION 1
#define CKPT_FORMAT_SHARDED 2
#define CKPT_MAGIC "hvd-checkpoint"
#define CKPT_MANIFEST_NAME "MANIFEST"
#define CKPT_LATEST_NAME "latest"
#define CKPT_REPLICATED_FILE "replicated.bin"
#define CKPT_NAME_MAX 128           /* buffer names                     */
#define CKPT_FILE_NAME_MAX 32       /* replicated.bin, rank-00000.bin   */
#define CKPT_META_MAX (1u << 20)    /* user metadata blob               */
#define CKPT_MANIFEST_MAX (64u << 20)
#define CKPT_STEP_MAX 99999999999L  /* fits the %08ld name well enough  */
#define CKPT_WORLD_MAX 1000000

struct ckpt_file {
	char name[CKPT_FILE_NAME_MAX];
	uint64_t size;
	uint64_t hash; /* XXH3 64-bit of the whole file */
};

struct ckpt_buffer {
	char name[CKPT_NAME_MAX + 1];
	hvd_ckpt_kind_t kind;
	uint64_t offset; /* in replicated.bin or rank-R.bin; sharded: in the
			    concatenation of the global arrays         */
	uint64_t bytes;  /* sharded: of the whole (global) array         */
	uint64_t elem;   /* sharded: bytes per element (the split unit)  */
};

struct ckpt_manifest {
	int version;
	long step;
	int world_size;
	long long created;      /* unix seconds                        */
	char job[64];           /* SLURM_JOB_ID or "-"                 */
	uint64_t replicated_bytes;
	uint64_t per_rank_bytes;
	uint64_t sharded_bytes; /* sum of the sharded arrays' global bytes */
	size_t nbuffers;
	struct ckpt_buffer *buffers;
	size_t nfiles;
	struct ckpt_file *files;
	size_t meta_len;
	unsigned char *meta;
};

/* snprintf that may truncate (paths are checked for length up front);
 * a function so that the compiler's truncation analysis stays quiet. */
void ckpt_fmt(char *buf, size_t n, const char *fmt, ...) HVD_PRINTF(3, 4);

/* Buffer names: 1..CKPT_NAME_MAX of [A-Za-z0-9_.:/+-]. */
int ckpt_name_valid(const char *name);

/* File name of rank r's per-rank file ("rank-00003.bin") and of its
 * shard file ("shard-00003.bin"). */
void ckpt_rank_file(char *buf, size_t n, int rank);
void ckpt_shard_file(char *buf, size_t n, int rank);

/* Resharding arithmetic.  A sharded array of count elements is split in
 * blocks over size ranks, the first count % size ranks one element more
 * (numpy's array_split): rank's block starts at *first, *n elements. */
void ckpt_shard_range(uint64_t count, int rank, int size, uint64_t *first,
		      uint64_t *n);
/* Bytes of writer's shard file in a checkpoint of m->world_size ranks:
 * its slices of the sharded buffers, in order. */
uint64_t ckpt_shard_file_bytes(const struct ckpt_manifest *m, int writer);
/* One read that reslices: len bytes at file_off of shard-WRITER.bin go to
 * dst_off in the registered buffer number buf (an index of m->buffers). */
struct ckpt_shard_read {
	int writer;
	size_t buf;
	uint64_t file_off;
	uint64_t dst_off;
	uint64_t len;
};
/* The reads that fill rank's slices (of a world of size ranks) of every
 * sharded buffer of m, written by m->world_size ranks: for each buffer in
 * order, the writers whose blocks overlap rank's, in order, so that the
 * destination is covered exactly once.  *reads malloc'd (NULL when none);
 * HVD_ERR_NO_MEMORY. */
hvd_status_t ckpt_shard_plan(const struct ckpt_manifest *m, int rank,
			     int size, struct ckpt_shard_read **reads,
			     size_t *nreads);

/* The global sampler position (hvd_ckpt_sampler_batch/advance in hvd.h):
 * rank's positions of the next step, consumed + rank + k * size for
 * k < batch while below epoch_size; and consumed after that step. */
size_t ckpt_sampler_batch(uint64_t epoch_size, uint64_t consumed, int rank,
			  int size, size_t batch, uint64_t *pos);
uint64_t ckpt_sampler_advance(uint64_t epoch_size, uint64_t consumed,
			      int size, size_t batch);

/* Files a manifest must list, in order: replicated.bin when there are
 * replicated bytes, then rank-R.bin for every rank when there are per-rank
 * bytes, then shard-R.bin for every rank when there are sharded bytes
 * (sizes from the buffers).  Fills m->files names and sizes (hashes
 * zero); HVD_ERR_NO_MEMORY. */
hvd_status_t ckpt_manifest_layout(struct ckpt_manifest *m);

/* Text of the manifest (malloc'd, NUL-terminated, *len without the NUL). */
hvd_status_t ckpt_manifest_format(const struct ckpt_manifest *m, char **text,
				  size_t *len);
/* Strict parse: every field, order, count, size and the trailing checksum
 * are checked; HVD_ERR_CORRUPT with a message naming the line otherwise.
 * On success m owns allocations, freed by ckpt_manifest_free(). */
hvd_status_t ckpt_manifest_parse(const char *text, size_t len,
				 struct ckpt_manifest *m);
void ckpt_manifest_free(struct ckpt_manifest *m);
/* The manifest's entry for a file name, NULL when absent. */
const struct ckpt_file *ckpt_manifest_file(const struct ckpt_manifest *m,
					   const char *name);

/* Directory names. */
enum ckpt_dir_kind {
	CKPT_DIR_OTHER = 0,   /* not ours: never touched                   */
	CKPT_DIR_FINAL,       /* step-00000100                             */
	CKPT_DIR_PARTIAL,     /* step-00000100.partial-TAG                 */
};
void ckpt_dir_name(char *buf, size_t n, long step, const char *partial_tag);
/* Classify a directory entry; *step and, for partials, a pointer to the
 * tag within name. */
enum ckpt_dir_kind ckpt_dir_parse(const char *name, long *step,
				  const char **tag);

/* Retention.  An entry per directory found; plan marks what to delete. */
enum ckpt_state {
	CKPT_COMPLETE = 0,    /* final name, manifest parses               */
	CKPT_INCOMPLETE,      /* final name, manifest missing or corrupt   */
	CKPT_PARTIAL,         /* partial name (crash or in flight)         */
	CKPT_FOREIGN,         /* a checkpoint's name, but a link or another
				 user's: never followed, read or removed   */
};
struct ckpt_entry {
	char name[256];
	long step;
	enum ckpt_state state;
	int own;              /* partial of this run's in-flight write     */
	int remove;           /* set by ckpt_retention_plan()              */
};
/* Sort entries newest first (step descending; complete before others at
 * the same step). */
void ckpt_entries_sort(struct ckpt_entry *e, size_t n);
/* Keep the newest `keep` complete checkpoints (keep < 1 counts as 1); never
 * the one at protect_step (being restored; -1: none) nor the newest
 * complete; delete every partial that is not `own`; delete incomplete
 * ones older than the oldest kept complete one (newer ones stay, for
 * inspection).  Returns the number marked. */
size_t ckpt_retention_plan(struct ckpt_entry *e, size_t n, int keep,
			   long protect_step);

#pragma GCC visibility pop

#endif /* HVD_CKPT_MANIFEST_H */
