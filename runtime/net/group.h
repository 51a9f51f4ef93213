/*
 * net/group.h - a group of world ranks as the transport sees it: who is
 * in it, its context id and the sequence number of its next collective.
 * A communicator (comm/) embeds one; the service collectives and the
 * transport's transfers work on it alone, so that nothing in net/ knows
 * the communicator above.
 */
#ifndef HVD_NET_GROUP_H
#define HVD_NET_GROUP_H

#include "base/base.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

struct net_group {
	int rank, size;     /* this rank's place in the group, members  */
	int *world_ranks;   /* [size]                                   */
	uint32_t ctx;       /* context id (net/transport.h: tags)       */
	uint32_t seq;       /* next collective (one thread at a time)   */
	hvd_status_t broken; /* sticky error after a peer failure or a
				mismatch: later collectives fail at once */
};

#pragma GCC visibility pop

#endif /* HVD_NET_GROUP_H */
