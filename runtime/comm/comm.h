/*
 * comm/comm.h - communicators.
 *
 * A communicator is an ordered group of world ranks with its own context
 * id, so that traffic of different communicators (the world, the engine's
 * private duplicate of it, process sets, node-local and cross-node groups)
 * never mixes even when they run concurrently on different threads.  All
 * collectives on one communicator must be called in the same order on
 * every member, from one thread at a time.
 *
 * The public blocking API (hvd_allreduce, ...) runs on the world
 * communicator; the engine runs on its own duplicate; the checkpointer
 * uses the public API.  The collectives themselves are coll/coll.h.
 */
#ifndef HVD_COMM_H
#define HVD_COMM_H

#include "net/group.h"
#include "net/world.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

typedef struct hvd_comm hvd_comm_t;

/* The world communicator (all ranks, rank order); NULL before init. */
hvd_comm_t *comm_world(void);
/* init.c: create and destroy the world communicator. */
hvd_status_t comm_world_create(const struct hvd_world *w);
void comm_world_destroy(void);
/* A communicator over the given world ranks (in that order).  Collective
 * over the members only: every member must call it with the same list;
 * non-members must not call it.  Gets a fresh context id. */
hvd_status_t comm_create(const int *world_ranks, int n, hvd_comm_t **out);
/* Collective over parent's members: those listed in world_ranks get the
 * new communicator in *out (comm_create), the others NULL; then every
 * registered backend derives its state for the child from the parent's
 * (comm/backend.h: an NCCL communicator by ncclCommSplit). */
hvd_status_t comm_split(hvd_comm_t *parent, const int *world_ranks, int n,
			hvd_comm_t **out);
/* Same group, new context id (collective over the members). */
hvd_status_t comm_dup(hvd_comm_t *comm, hvd_comm_t **out);
void comm_destroy(hvd_comm_t *comm);
int comm_rank(const hvd_comm_t *comm);
int comm_size(const hvd_comm_t *comm);
/* World rank of comm rank r. */
int comm_world_rank(const hvd_comm_t *comm, int r);
/* The group the transport and the service collectives work on. */
struct net_group *comm_net(hvd_comm_t *comm);
/* The first failed world rank among the members, or -1. */
int comm_failed(const hvd_comm_t *comm);

#pragma GCC visibility pop

#endif /* HVD_COMM_H */
