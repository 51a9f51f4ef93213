/*
 * place.h - the placement decisions of one task (GPU, network, CPUs), each
 * recording its variables and reasons through record_put.  hints_compute
 * calls them in this order: the network and the CPUs depend on the GPU.
 */
#ifndef SPANK_CORE_PLACE_H
#define SPANK_CORE_PLACE_H

#include <stddef.h>

#include "record.h"
#include "topo.h"

/* CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES; sets c->out->gpu. */
void place_gpu(struct record *c);

/* NCCL_IB_*, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, UCX_*; c->out->port. */
void place_network(struct record *c);

/* HOROVOD_CPU_LIST; c->out->cpus and c->out->bind. */
void place_cpus(struct record *c);

/*
 * Nearest ACTIVE port to GPU `gpu` for `net` (an enum opt_net): the
 * ports whose smallest common ancestor with the GPU is deepest; the GPUs
 * that share the same set of nearest ports take them in turn.  Returns the
 * port index or -1; `why` says how near.
 */
int place_port_for_gpu(const struct topo *t, int gpu, int net, char *why,
		       size_t whylen);

#endif /* SPANK_CORE_PLACE_H */
