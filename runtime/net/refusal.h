/*
 * net/refusal.h - a blocking collective refused on some ranks only.
 *
 * The public blocking collectives (hvd_allreduce() and the others) run on
 * the world in the same order on every rank, so each rank numbers its
 * calls: call k is the same call everywhere.  A rank that refuses its
 * call k (a bad argument: nothing was sent) used to return at once, and
 * its next call paired with the others' call k: an allreduce returned
 * HVD_OK with the data of the refused rank's next call.  Now:
 *
 *  - the refusing rank tells every other rank "refused k" and waits for
 *    each one's word on k, as long as a collective would wait for it
 *    (HOROVOD_PEER_TIMEOUT): its own "refused k", or "made k";
 *  - a rank that made call k (it had valid arguments), or made it
 *    already, fails it (or its next call, if it completed k before it
 *    heard: a broadcast's leaf) with HVD_ERR_MISMATCH, naming the rank
 *    and its refusal, and answers "made k" to the refusing rank alone;
 *  - where every rank refused k, nothing was sent, and the world goes
 *    on; where some made it, every rank's world is "apart": each later
 *    blocking collective fails at once, because the ranks' transfers and
 *    shared-memory steps are no longer in step.
 *
 * An allreduce, reducescatter or broadcast of 0 elements is skipped by
 * the collectives in the same way, so a count of 0 on some ranks only
 * paired the same way: such a call says "empty k" and settles like a
 * refusal (HVD_OK where every rank skipped it).
 *
 * Messages go on a context id no communicator gets, through the keyed
 * tags (net/auth.h); a rank takes them in while it waits: the
 * transport's watch, the shared-memory waits' check, the refusing rank's
 * own wait, and hvd_finalize()'s wait for every rank.  Only the thread of
 * the public calls does (the engine's thread runs collectives of its own
 * communicator): the callers see to that (transport_is_background()).
 */
#ifndef HVD_NET_REFUSAL_H
#define HVD_NET_REFUSAL_H

#include "base/base.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* The context id of these messages (after the elastic join requests':
 * net/membership.h). */
#define REFUSAL_CTX 0xfffcu

/* A new world (hvd_init, an elastic re-forming): calls count from 1. */
void refusal_start(void);
/* Free the send buffers (after the worker is gone). */
void refusal_free(void);

/* A public blocking collective fn begins: it is numbered.  HVD_OK, or
 * HVD_ERR_MISMATCH when the world is apart (the message says since
 * which call). */
hvd_status_t refusal_call(const char *fn);
/* This rank refuses the call just numbered, with status st (whose
 * message hvd_last_error() holds): the others are told and answer, and
 * st is returned with its message. */
hvd_status_t refusal_refuse(const char *fn, hvd_status_t st);
/* The call just numbered has nothing to send or receive here (an
 * allreduce, reducescatter or broadcast of 0 elements), which the
 * collectives skip: the others are told and answer as for a refusal.
 * HVD_OK where every rank skipped or refused it, HVD_ERR_MISMATCH where
 * some made it with data (they waited on this rank, and its next call
 * would have paired with this one). */
hvd_status_t refusal_empty(const char *fn);
/* The call just numbered goes ahead: HVD_OK, or HVD_ERR_MISMATCH when
 * another rank refused it (or an earlier one this rank made). */
hvd_status_t refusal_go(void);
/* In hvd_finalize(), until every rank has reached it: a word about a
 * call this rank made is answered (a broadcast's rank that needed nothing
 * from the refusing one completed it, and may have nothing else to call),
 * and the finding logged as a warning: the refusing rank would otherwise
 * wait until the others exit.  A rank that sent words says goodbye to
 * each rank it sent them to on its first call, after them; 1 once each
 * answered that (it heard every word), or where there was nothing to
 * say: only then may this rank join the fence that ends the wait. */
int refusal_finalizing(void);
/* In a wait of the public calls' thread (never the engine's): HVD_OK,
 * or HVD_ERR_MISMATCH with why[len] saying which rank refused what. */
hvd_status_t refusal_watch(char *why, size_t len);

#pragma GCC visibility pop

#endif /* HVD_NET_REFUSAL_H */
