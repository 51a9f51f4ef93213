/*
 * api/rendezvous.h - the file through which a second srun step of an
 * elastic job finds the running world (api/elastic.c).
 *
 * Slurm gives every step its own PMIx namespace, so processes of two steps
 * cannot find each other through PMIx.  Rank 0 of the running world writes
 * one file, in a directory private to the user and shared by the nodes:
 * the job, the step that wrote it, the epoch, a random token, the job's
 * key (net/auth.h: the newcomer's own step drew another, and tags and
 * failure notices must be under the world's), the node and pid of rank 0
 * (a newcomer on the same node reaches it over shared memory and watches
 * the pid, as a world does its node's ranks) and the UCX address of its
 * current worker.  A newcomer that can read the file (the
 * same user: directory 0700, file 0600, both owned by the user, never
 * reached through a symbolic link) sends rank 0 a join request with the
 * token and its job id; rank 0 admits only requests that match both.
 *
 * Format, text, one "key value" per line, in this order:
 *     hvd-elastic-rendezvous 4
 *     job <SLURM_JOB_ID, or "local">
 *     restart <SLURM_RESTART_COUNT, or 0>
 *     step <the writer's first PMIx namespace>
 *     epoch <N>
 *     token <32 hex digits>
 *     key <32 hex digits>
 *     node <rank 0's node key (elastic.c), or - when it has none>
 *     pid <rank 0's pid, or 0>
 *     pidns <its pid namespace (hvd_pidns), or 0>
 *     addr <hex of the address>
 */
#ifndef HVD_API_RENDEZVOUS_H
#define HVD_API_RENDEZVOUS_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define RDV_TOKEN_BYTES 16
#define RDV_KEY_BYTES 16 /* AUTH_KEY_BYTES */
#define RDV_ADDR_MAX 65536
#define RDV_NODE_MAX 300 /* MEMB_KEY_MAX */
#define RDV_FILE_MAX (2 * RDV_ADDR_MAX + 1024 + RDV_NODE_MAX)

struct rdv_info {
	char job[64];
	long restart;
	char step[256];
	unsigned epoch;
	uint8_t token[RDV_TOKEN_BYTES];
	uint8_t key[RDV_KEY_BYTES];
	char node[RDV_NODE_MAX]; /* "" when the file had none ("-")      */
	long pid;                /* 0 when unknown                        */
	uint64_t pidns;          /* where pid means something; 0: unknown */
	uint8_t *addr; /* malloc'ed by rdv_parse */
	size_t addr_len;
};

/* Pure: the file's text into buf[len] (*out its length), and back.
 * rdv_parse refuses anything but the exact format (HVD_ERR_CORRUPT, with
 * the line that was wrong). */
hvd_status_t rdv_format(const struct rdv_info *in, char *buf, size_t len,
			size_t *out);
hvd_status_t rdv_parse(const char *text, size_t len, struct rdv_info *out);
void rdv_info_free(struct rdv_info *r);
/* Pure: a job id as it may appear in a file name ([A-Za-z0-9_-], else
 * '_'; "local" when empty). */
void rdv_job_name(const char *job, char *out, size_t len);

/* The directory: HOROVOD_ELASTIC_DIR, else $HOROVOD_CHECKPOINT_DIR/
 * .hvd-elastic, else $SLURM_SUBMIT_DIR/.hvd-elastic.  0 when none is
 * known (no growing: the message says why). */
int rdv_dir(char *out, size_t len, char *why, size_t whylen);

/* Rank 0: write the file for job (atomically: a temporary file in the
 * directory, renamed); the directory is made 0700 when missing. */
hvd_status_t rdv_write(const char *dir, const struct rdv_info *in);
/* A newcomer: read it.  HVD_ERR_IO with "no file" (errno ENOENT in
 * *missing = 1) when there is none; HVD_ERR_IO or HVD_ERR_CORRUPT when it
 * cannot be trusted or read. */
hvd_status_t rdv_read(const char *dir, const char *job, struct rdv_info *out,
		      int *missing);
/* Rank 0 at the end: remove the file if this step wrote the one there. */
void rdv_remove(const char *dir, const char *job, const char *step);

#pragma GCC visibility pop

#endif /* HVD_API_RENDEZVOUS_H */
