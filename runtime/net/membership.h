/*
 * net/membership.h - elastic training's agreement on the next world, over
 * the current world's transport.
 *
 * After a failure (or when rank 0 admits newcomers) every live rank calls
 * memb_agree().  The coordinator is the lowest rank nobody has seen fail;
 * the others send it a proposal (what they know has failed, and how to
 * reach them in the next world).  It takes the union of the failed sets,
 * waits a bounded time for every rank not in it, and sends the decision -
 * the next world's members in rank order with their addresses - to each
 * of them.  If the coordinator dies, the next lowest takes over: every
 * rank keeps what it received, watches whoever it waits for, and sends its
 * proposal again to whoever it now thinks coordinates.  A rank left out
 * (it came too late) is told so; a rank that hears nothing within the
 * bound gives up.  Nothing waits without a bound.
 *
 * Newcomers (a second srun step of the same job) send rank 0 a join
 * request; rank 0 keeps requests whose token and job id match
 * (memb_poll_joins), and the coordinator adds every step whose ranks have
 * all asked to the decision, after the survivors.
 *
 * Messages use two context ids no communicator gets (MEMB_CTX, JOIN_CTX;
 * comm.c stops below them), and every tag of an agreement carries its
 * epoch, so agreements of different epochs never mix.
 */
#ifndef HVD_NET_MEMBERSHIP_H
#define HVD_NET_MEMBERSHIP_H

#include "net/memb_core.h"

#pragma GCC visibility push(hidden)

/* Context ids of the agreement and of join requests: just below the
 * failure notices' (net/notice.h). */
#define MEMB_CTX 0xfffeu
#define JOIN_CTX 0xfffdu

struct memb_round {
	uint32_t epoch;       /* the current world's                       */
	int min_size;         /* HOROVOD_ELASTIC_MIN_SIZE                   */
	double timeout;       /* seconds (HOROVOD_ELASTIC_TIMEOUT)          */
	const char *world;    /* the current world's name (the next one is
				 named after it)                             */
	struct memb_peer self; /* this process in the next world (addr: the
				  next worker's)                             */
	int admit;            /* coordinator: add the complete steps of the
				 join requests taken in                      */
};

/* Survivors: agree on the next world.  *out is the decision (status
 * HVD_OK, or HVD_ERR_TOO_FEW_RANKS when it has fewer than min_size
 * members: the world is re-formed anyway, so that the program can
 * checkpoint), *index this process's rank in it.  Errors:
 * HVD_ERR_REMOVED (left out), HVD_ERR_TIMEOUT (no decision within the
 * bound), HVD_ERR_NO_MEMORY. */
hvd_status_t memb_agree(const struct memb_round *in, struct memb_decide *out,
			int *index);

/* A newcomer: ask the running world's rank 0 (its address, from the
 * rendezvous file; rank0_pid its pid when it runs on this node, else 0)
 * to join, and wait up to wait_s seconds for the decision.
 * HVD_ERR_TIMEOUT when none came (the caller reads the file again and
 * retries), HVD_ERR_PEER_FAILED when rank 0 cannot be reached,
 * HVD_ERR_REMOVED when refused. */
hvd_status_t memb_join(const struct memb_join *req, uint32_t epoch,
		       const void *rank0_addr, long rank0_pid, double wait_s,
		       struct memb_decide *out, int *index);

/* Rank 0 between agreements: take in join requests (those with another
 * token or job id are refused and logged).  Returns how many steps are
 * complete (every rank of the step asked). */
int memb_poll_joins(const uint8_t token[MEMB_TOKEN_BYTES], const char *jobid);
/* Forget the requests (finalize, or after they were admitted). */
void memb_joins_clear(void);

/* The pid to watch, over shared memory, for a peer of node key peer_node
 * that gave pid in pid namespace peer_ns, seen from this process, of node
 * key my_node: pid when both keys name one node and this process can see
 * the pid (hvd_pid_here), else 0 (then TCP, with UCX's failure
 * handling).  What memb_join, memb_reachable and the decision to a
 * newcomer go by. */
long memb_local_pid(const char *peer_node, long pid, uint64_t peer_ns,
		    const char *my_node);

/* A newcomer's first look: 1 when a worker at addr (pid: its process
 * when on this node, else 0) answers within limit_s seconds (0: the
 * rendezvous file is stale, its world gone). */
int memb_reachable(const void *addr, long pid, double limit_s);

/* Send buffers still in flight when the agreement ended; freed once the
 * worker they were posted on is gone (net/reform.c, after the switch). */
void memb_release_sends(void);

#pragma GCC visibility pop

#endif /* HVD_NET_MEMBERSHIP_H */
