/*
 * topo.h - what the hints need to know about a node, as a plain
 * struct: GPUs, InfiniBand/RoCE ports, NUMA nodes, network interfaces, and
 * the part of the hwloc tree that links them (so the hint computation can
 * find smallest common ancestors without hwloc).
 *
 * Filled by machine_load (machine.h) from hwloc (the live machine, or an
 * XML file of hwloc 1.x or 2.x) and sysfs (sysfs.h: port state, link
 * layer, RoCE GIDs, network interfaces; the sysfs root is a parameter so
 * tests can build a synthetic tree).
 */
#ifndef SPANK_CORE_TOPO_H
#define SPANK_CORE_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "cpuset.h"

#define TOPO_MAX_NODES 512
#define TOPO_MAX_GPUS 64
#define TOPO_MAX_PORTS 64
#define TOPO_MAX_NUMA 64
#define TOPO_MAX_NETIFS 32
#define TOPO_NAME 32

/* Kinds of tree nodes, for the "why" of a choice. */
enum topo_kind {
	TOPO_MACHINE,
	TOPO_GROUP,
	TOPO_PACKAGE,
	TOPO_NUMA,
	TOPO_OTHER_CPU, /* die, cache, core: anything with a cpuset */
	TOPO_HOSTBRIDGE,
	TOPO_PCISWITCH, /* a PCI-to-PCI bridge */
	TOPO_PCIDEV
};

struct topo_node {
	int parent; /* index, -1 for the root */
	int depth;  /* 0 for the root */
	enum topo_kind kind;
	int os_index; /* package/NUMA P#, or -1 */
	char busid[16]; /* PCI "dddd:bb:dd.f" for PCI objects */
};

struct topo_gpu {
	char busid[16];
	uint16_t vendor, class_id, device_id;
	int node;     /* its PCI device in nodes[] */
	int locality; /* first non-I/O ancestor in nodes[] */
	char osdevs[TOPO_NAME]; /* "cuda0 nvml0", or "" */
};

enum topo_link { TOPO_LINK_UNKNOWN, TOPO_LINK_IB, TOPO_LINK_ETH };

struct topo_port {
	char dev[TOPO_NAME];	/* mlx5_0 */
	int port;		/* 1-based */
	int state;		/* 4 = ACTIVE */
	enum topo_link link;
	int gid_index; /* RoCE v2 IPv4 GID index, -1 if none */
	char netdev[TOPO_NAME]; /* ib0 / ens1f0, or "" */
	char busid[16];
	int node;
	int locality;
};

struct topo_numa {
	int os_index;
	struct cpuset cpus; /* hwloc's: the locality it hangs from */
	struct cpuset own;  /* its own CPUs: empty when CPU-less */
};

struct topo_netif {
	char name[TOPO_NAME];
	int up;
	int loopback;
	int primary; /* carries the default route / the node's address */
};

struct topo {
	int nnodes;
	struct topo_node nodes[TOPO_MAX_NODES];
	struct cpuset node_cpus[TOPO_MAX_NODES]; /* non-I/O nodes */
	struct cpuset all_cpus;
	int ngpus;
	struct topo_gpu gpus[TOPO_MAX_GPUS]; /* PCI bus order */
	int nports;
	struct topo_port ports[TOPO_MAX_PORTS];
	int nnuma;
	struct topo_numa numa[TOPO_MAX_NUMA];
	int nnetifs;
	struct topo_netif netifs[TOPO_MAX_NETIFS];
	char source[128]; /* "this machine" or the XML file name */
};

/*
 * Smallest common ancestor of two tree nodes (walks parent chains: hwloc's
 * own helper compares depths, which are negative for I/O objects).
 */
int topo_common_ancestor(const struct topo *t, int a, int b);

/* "PCI switch", "PCI host bridge", "package P#0", "NUMA node P#1"... */
void topo_describe(const struct topo *t, int node, char *buf, size_t len);

#endif /* SPANK_CORE_TOPO_H */
