/*
 * horovod_topo.h - what the hints need to know about a node, as a plain
 * struct: GPUs, InfiniBand/RoCE ports, NUMA nodes, network interfaces, and
 * the part of the hwloc tree that links them (so the hint computation can
 * find smallest common ancestors without hwloc).
 *
 * Filled from hwloc (the live machine, or an XML file of hwloc 1.x or 2.x)
 * and sysfs (port state, link layer, RoCE GIDs, network interfaces; the
 * sysfs root is a parameter so tests can build a synthetic tree).
 */
#ifndef HOROVOD_TOPO_H
#define HOROVOD_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define HVDTOPO_MAX_CPUS 2048
#define HVDTOPO_MAX_NODES 512
#define HVDTOPO_MAX_GPUS 64
#define HVDTOPO_MAX_PORTS 64
#define HVDTOPO_MAX_NUMA 64
#define HVDTOPO_MAX_NETIFS 32
#define HVDTOPO_NAME 32

/* A set of CPUs (OS indices), as a plain bit array. */
struct hvd_cpuset {
	uint64_t w[HVDTOPO_MAX_CPUS / 64];
};

void hvdcpu_zero(struct hvd_cpuset *s);
void hvdcpu_set(struct hvd_cpuset *s, unsigned cpu);
int hvdcpu_isset(const struct hvd_cpuset *s, unsigned cpu);
int hvdcpu_count(const struct hvd_cpuset *s);
void hvdcpu_and(struct hvd_cpuset *d, const struct hvd_cpuset *a,
		const struct hvd_cpuset *b);
int hvdcpu_subset(const struct hvd_cpuset *a, const struct hvd_cpuset *b);
/* "0-3,8,10-11"; 0 or -1 when it does not fit.  Parse accepts the same. */
int hvdcpu_format(const struct hvd_cpuset *s, char *buf, size_t len);
int hvdcpu_parse(const char *str, struct hvd_cpuset *s);

/* Kinds of tree nodes, for the "why" of a choice. */
enum hvdtopo_kind {
	HVDTOPO_MACHINE,
	HVDTOPO_GROUP,
	HVDTOPO_PACKAGE,
	HVDTOPO_NUMA,
	HVDTOPO_OTHER_CPU, /* die, cache, core: anything with a cpuset */
	HVDTOPO_HOSTBRIDGE,
	HVDTOPO_PCISWITCH, /* a PCI-to-PCI bridge */
	HVDTOPO_PCIDEV
};

struct hvdtopo_node {
	int parent; /* index, -1 for the root */
	int depth;  /* 0 for the root */
	enum hvdtopo_kind kind;
	int os_index; /* package/NUMA P#, or -1 */
	char busid[16]; /* PCI "dddd:bb:dd.f" for PCI objects */
};

struct hvdtopo_gpu {
	char busid[16];
	uint16_t vendor, class_id, device_id;
	int node;     /* its PCI device in nodes[] */
	int locality; /* first non-I/O ancestor in nodes[] */
	char osdevs[HVDTOPO_NAME]; /* "cuda0 nvml0", or "" */
};

enum hvdtopo_link { HVDTOPO_LINK_UNKNOWN, HVDTOPO_LINK_IB,
		    HVDTOPO_LINK_ETH };

struct hvdtopo_port {
	char dev[HVDTOPO_NAME]; /* mlx5_0 */
	int port;		/* 1-based */
	int state;		/* 4 = ACTIVE */
	enum hvdtopo_link link;
	int gid_index; /* RoCE v2 IPv4 GID index, -1 if none */
	char netdev[HVDTOPO_NAME]; /* ib0 / ens1f0, or "" */
	char busid[16];
	int node;
	int locality;
};

struct hvdtopo_numa {
	int os_index;
	struct hvd_cpuset cpus; /* hwloc's: the locality it hangs from */
	struct hvd_cpuset own;	/* its own CPUs: empty when CPU-less */
};

struct hvdtopo_netif {
	char name[HVDTOPO_NAME];
	int up;
	int loopback;
	int primary; /* carries the default route / the node's address */
};

struct hvdtopo {
	int nnodes;
	struct hvdtopo_node nodes[HVDTOPO_MAX_NODES];
	struct hvd_cpuset node_cpus[HVDTOPO_MAX_NODES]; /* non-I/O nodes */
	struct hvd_cpuset all_cpus;
	int ngpus;
	struct hvdtopo_gpu gpus[HVDTOPO_MAX_GPUS]; /* PCI bus order */
	int nports;
	struct hvdtopo_port ports[HVDTOPO_MAX_PORTS];
	int nnuma;
	struct hvdtopo_numa numa[HVDTOPO_MAX_NUMA];
	int nnetifs;
	struct hvdtopo_netif netifs[HVDTOPO_MAX_NETIFS];
	char source[128]; /* "this machine" or the XML file name */
};

/*
 * Load the topology of this machine (xml NULL) or of an hwloc XML file.
 * sysfs_root (NULL: env HVD_SYSFS_ROOT, else "/sys") supplies port state,
 * link layer, GIDs and network interfaces; for an XML file, the port state
 * from the XML is kept unless the sysfs tree knows the device.  Returns 0,
 * or -1 with a message.  `t` is large: allocate it, do not put it on a
 * small stack.
 */
int hvdtopo_load(struct hvdtopo *t, const char *xml, const char *sysfs_root,
		 char *err, size_t errlen);

/*
 * Fill ports' link layer, GID index and netdev, and the network interfaces,
 * from a sysfs tree (class/infiniband, class/net).  Ports sysfs knows but
 * hwloc did not are added without a tree position.  Used by hvdtopo_load.
 */
void hvdtopo_read_sysfs(struct hvdtopo *t, const char *root, int live);

/*
 * Smallest common ancestor of two tree nodes (walks parent chains: hwloc's
 * own helper compares depths, which are negative for I/O objects).
 */
int hvdtopo_common_ancestor(const struct hvdtopo *t, int a, int b);

/* "PCI switch", "PCI host bridge", "package P#0", "NUMA node P#1"... */
void hvdtopo_describe(const struct hvdtopo *t, int node, char *buf,
		      size_t len);

#endif /* HOROVOD_TOPO_H */
