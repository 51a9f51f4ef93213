/*
 * net/auth.h - the job's key, and what it protects between ranks.
 * Private to net/.
 *
 * Rank 0 draws 128 random bits at bootstrap and publishes them through
 * PMIx, whose data only the job's processes can read; every rank Gets
 * them (bootstrap.c).  From the key:
 *
 *  - every failure notice carries a SipHash-2-4 MAC under the key and a
 *    sequence number per reporter, so that a process outside the job can
 *    neither forge one nor replay one (auth_notice_seal/open);
 *  - every UCX tag on the wire is XORed with a 64-bit tag key derived
 *    from it (auth_tag): receives match all 64 bits, so a process that can
 *    reach a worker (over TCP anyone on the node can connect to its
 *    port) but does not know the key delivers nothing into a posted
 *    receive unless it guesses the 64 bits.  That costs one XOR per
 *    message; the data itself is neither encrypted nor MACed
 *    (doc/design.md, "Who may talk to a rank", says exactly what is and
 *    is not protected).
 */
#ifndef HVD_NET_AUTH_H
#define HVD_NET_AUTH_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define AUTH_KEY_BYTES 16

/* 128 bits from getrandom(2). */
hvd_status_t auth_draw_key(uint8_t key[AUTH_KEY_BYTES]);
/* The job's key (until auth_clear): derives the tag key. */
void auth_set_key(const uint8_t key[AUTH_KEY_BYTES]);
void auth_clear(void);
/* The key now set (zeros without one): what a step that joins an elastic
 * world must take on (api/elastic.c, through the rendezvous file). */
void auth_get_key(uint8_t key[AUTH_KEY_BYTES]);

/* XORed into every tag sent and every tag received (0 without a key). */
extern uint64_t auth_tag_key;
static inline uint64_t auth_tag(uint64_t tag)
{
	return tag ^ auth_tag_key;
}

/* The messages of the elastic agreement (net/memb_wire.c) end in a MAC:
 * SipHash-2-4 under the job's key of a fixed prefix, the message's plain
 * tag (its context, epoch, type and source) and its bytes, so that a
 * process without the key can neither forge one nor move a recorded one
 * to another epoch, type or sender.  The tag key alone does not help: the
 * MAC key does not follow from it. */
#define AUTH_MAC_BYTES 8
/* 0 with *mac; -1 when out of memory (nothing to send, nothing taken). */
int auth_msg_mac(uint64_t tag, const void *msg, size_t len, uint64_t *mac);

/* A failure notice as it travels: reporter says rank dead is gone, and
 * how it knows (an enum peer_gone of net/peers.h: 0 no progress from it,
 * 1 its connection timed out, 2 dead). */
#define AUTH_NOTICE_HOW_MAX 2
struct auth_notice {
	uint32_t magic;
	int32_t dead;
	int32_t reporter;
	uint32_t seq; /* per reporter, from 1, growing */
	uint32_t how;
	uint32_t zero;
	uint64_t mac; /* SipHash-2-4 of the fields above under the key */
};

/* Fill m for sending. */
void auth_notice_seal(struct auth_notice *m, int dead, int reporter,
		      uint32_t seq, unsigned how);
/* Check a received notice of len bytes for a job of n ranks, this rank
 * me; last_seq[n] holds the last sequence number taken from each
 * reporter (updated when the notice is taken).  0: take it; -1: drop it,
 * and *why says why (for the log). */
int auth_notice_open(const struct auth_notice *m, size_t len, int n, int me,
		     uint32_t *last_seq, const char **why);

#pragma GCC visibility pop

#endif /* HVD_NET_AUTH_H */
