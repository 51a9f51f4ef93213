/*
 * net/peers.h - what the transport knows of every world rank besides its
 * endpoint: its UCX address, its pid and whether it is on this node, and
 * whether (and why) it failed.  The failed set only grows during a job;
 * it is read without a lock from every thread that waits on a peer.
 */
#ifndef HVD_NET_PEERS_H
#define HVD_NET_PEERS_H

#include "net/bootstrap.h"
#include "net/group.h"
#include "net/world.h"

#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* Takes the peers' addresses out of bp (bp[r].addr becomes NULL). */
hvd_status_t peers_init(const struct hvd_world *w, struct bootstrap_peer *bp);
void peers_free(void);
/* World size and this rank while the table is up (-1 otherwise). */
int peers_count(void);
int peers_self(void);
/* Peer r's UCX worker address and its length (NULL: no table). */
const void *peers_addr(int r);
/* 1 when r runs on this node in this pid namespace (its pid is
 * checked, shm transports). */
int peers_local(int r);

/* How sure a failure is, weakest first: a suspect (it made no progress,
 * and may be waiting on another; another rank's word), one that cannot
 * be reached (a connection that timed out), one whose process is known
 * gone (its pid, PMIx, a connection reset by its host).  The elastic
 * agreement clears suspicions it can check and counts only the dead as
 * certainly gone (net/membership.c). */
enum peer_gone { PEER_SUSPECT = 0, PEER_QUIET = 1, PEER_DEAD = 2 };

/* A peer is gone (world rank, or -1 for "the launcher"), with how it is
 * known; a later surer kind replaces the record. */
void peers_mark(int world_rank, const char *why, int announce,
		enum peer_gone kind);
/* The kind of a failed rank's record (PEER_DEAD when not failed). */
enum peer_gone peers_gone_kind(int world_rank);
/* peers_mark(..., PEER_DEAD).  Safe from any thread; the first reason
 * for a rank is kept unless a surer kind comes.  announce: tell the
 * other ranks too (net/notice.c sends what peers_take_announce()
 * returns). */
void peers_mark_failed(int world_rank, const char *why, int announce);
/* The same with announce (what the bootstrap's death events and the
 * pid checks report). */
void transport_mark_failed(int world_rank, const char *why);
int peers_failed(int world_rank);
/* Next rank whose failure is still to be announced, or -1. */
int peers_take_announce(void);
/* 1 once the launcher (PMIx server) is gone. */
int peers_launcher_failed(void);
/* First failed world rank among g's members, or in the world (-1). */
int transport_group_failed(const struct net_group *g);
int transport_any_failed(void);
const char *transport_fail_reason(int world_rank);
/* Checks the pids of g's members on this node first (for errors
 * reported by the shared-memory layer, to name the world rank). */
void peers_check_local_pids(const struct net_group *g);
int transport_check_failed(const struct net_group *g);

#pragma GCC visibility pop

#endif /* HVD_NET_PEERS_H */
