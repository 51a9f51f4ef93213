/*
 * machine.c - hwloc (live machine or XML) and sysfs to struct topo.
 *
 * GPUs are found as PCI devices (vendor 0x10de, class 0x0300 VGA or 0x0302
 * 3D), never through cuda/nvml OS devices: Debian's hwloc has no CUDA or
 * NVML component, so on a real Debian node those OS devices do not exist.
 * PCI bus order is the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID
 * use.  HCA ports come from OpenFabrics OS devices and their Port<N>State
 * infos.  Only the ancestors of those devices are copied into the node
 * table: that is all a smallest-common-ancestor search needs.
 */
#include "machine.h"
#include "err.h"
#include "sysfs.h"
#include "topo.h"

#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void from_hwloc_set(struct cpuset *d, hwloc_const_bitmap_t b)
{
	unsigned i;

	cpuset_zero(d);
	if (!b)
		return;
	hwloc_bitmap_foreach_begin(i, b) { cpuset_set(d, i); }
	hwloc_bitmap_foreach_end();
}

static void busid_of(hwloc_obj_t o, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%01x",
		 (unsigned)o->attr->pcidev.domain, o->attr->pcidev.bus,
		 o->attr->pcidev.dev, o->attr->pcidev.func);
}

/* The hwloc objects behind nodes[], to find one again when walking. */
struct builder {
	struct topo *t;
	hwloc_obj_t objs[TOPO_MAX_NODES];
};

static int node_of(struct builder *b, hwloc_obj_t o)
{
	struct topo *t = b->t;
	struct topo_node *n;
	int idx, parent;

	if (!o)
		return -1;
	for (int i = 0; i < t->nnodes; i++)
		if (b->objs[i] == o)
			return i;
	/* Parents first, so a parent's index is known. */
	parent = o->parent ? node_of(b, o->parent) : -1;
	if (o->parent && parent < 0)
		return -1;
	if (t->nnodes >= TOPO_MAX_NODES)
		return -1;
	idx = t->nnodes++;
	b->objs[idx] = o;
	n = &t->nodes[idx];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->depth = parent < 0 ? 0 : t->nodes[parent].depth + 1;
	n->os_index = -1;
	switch (o->type) {
	case HWLOC_OBJ_MACHINE:
		n->kind = TOPO_MACHINE;
		break;
	case HWLOC_OBJ_GROUP:
		n->kind = TOPO_GROUP;
		break;
	case HWLOC_OBJ_PACKAGE:
		n->kind = TOPO_PACKAGE;
		n->os_index = (int)o->os_index;
		break;
	case HWLOC_OBJ_NUMANODE:
		n->kind = TOPO_NUMA;
		n->os_index = (int)o->os_index;
		break;
	case HWLOC_OBJ_BRIDGE:
		n->kind = o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST
			      ? TOPO_HOSTBRIDGE
			      : TOPO_PCISWITCH;
		if (n->kind == TOPO_PCISWITCH)
			busid_of(o, n->busid, sizeof(n->busid));
		break;
	case HWLOC_OBJ_PCI_DEVICE:
		n->kind = TOPO_PCIDEV;
		busid_of(o, n->busid, sizeof(n->busid));
		break;
	default:
		n->kind = TOPO_OTHER_CPU;
		break;
	}
	if (o->cpuset)
		from_hwloc_set(&t->node_cpus[idx], o->cpuset);
	else
		cpuset_zero(&t->node_cpus[idx]);
	return idx;
}

static int gpu_cmp(const void *a, const void *b)
{
	return strcmp(((const struct topo_gpu *)a)->busid,
		      ((const struct topo_gpu *)b)->busid);
}

static void add_gpus(struct builder *b, hwloc_topology_t topo)
{
	struct topo *t = b->t;
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(topo, o)) != NULL) {
		struct topo_gpu *g;
		hwloc_obj_t c;

		if (o->attr->pcidev.vendor_id != 0x10de ||
		    (o->attr->pcidev.class_id != 0x0300 &&
		     o->attr->pcidev.class_id != 0x0302))
			continue;
		if (t->ngpus >= TOPO_MAX_GPUS)
			break;
		g = &t->gpus[t->ngpus];
		memset(g, 0, sizeof(*g));
		busid_of(o, g->busid, sizeof(g->busid));
		g->vendor = o->attr->pcidev.vendor_id;
		g->device_id = o->attr->pcidev.device_id;
		g->class_id = o->attr->pcidev.class_id;
		g->node = node_of(b, o);
		g->locality = node_of(b, hwloc_get_non_io_ancestor_obj(topo, o));
		for (c = o->io_first_child; c; c = c->next_sibling) {
			size_t l = strlen(g->osdevs);

			if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name ||
			    (strncmp(c->name, "cuda", 4) &&
			     strncmp(c->name, "nvml", 4)))
				continue;
			snprintf(g->osdevs + l, sizeof(g->osdevs) - l, "%s%s",
				 l ? " " : "", c->name);
		}
		t->ngpus++;
	}
	/* hwloc lists PCI devices in tree order, which is not bus order
	 * across host bridges of different domains: sort. */
	qsort(t->gpus, (size_t)t->ngpus, sizeof(t->gpus[0]), gpu_cmp);
}

/* The n-th (0-based) Network OS device beside an OpenFabrics one. */
static const char *sibling_netdev(hwloc_obj_t pci, int n)
{
	const char *first = NULL;

	if (!pci)
		return NULL;
	for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE ||
		    c->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK)
			continue;
		if (!first)
			first = c->name;
		if (n-- == 0)
			return c->name;
	}
	return first;
}

static void add_ports(struct builder *b, hwloc_topology_t topo)
{
	struct topo *t = b->t;
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_osdev(topo, o)) != NULL) {
		hwloc_obj_t pci = o->parent;

		if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS ||
		    !o->name)
			continue;
		while (pci && pci->type != HWLOC_OBJ_PCI_DEVICE &&
		       pci->type == HWLOC_OBJ_OS_DEVICE)
			pci = pci->parent;
		for (int p = 1; p <= 8; p++) {
			char key[32];
			const char *st, *lid, *nd;
			struct topo_port *pt;

			snprintf(key, sizeof(key), "Port%dState", p);
			st = hwloc_obj_get_info_by_name(o, key);
			if (!st)
				continue;
			if (t->nports >= TOPO_MAX_PORTS)
				return;
			pt = &t->ports[t->nports++];
			memset(pt, 0, sizeof(*pt));
			snprintf(pt->dev, sizeof(pt->dev), "%s", o->name);
			pt->port = p;
			pt->state = atoi(st);
			pt->gid_index = -1;
			snprintf(key, sizeof(key), "Port%dLID", p);
			lid = hwloc_obj_get_info_by_name(o, key);
			/* RoCE ports have no LID; sysfs link_layer, when
			 * present, replaces this guess. */
			if (lid)
				pt->link = strtoul(lid, NULL, 0) == 0
					       ? TOPO_LINK_ETH
					       : TOPO_LINK_IB;
			nd = sibling_netdev(pci, p - 1);
			if (nd)
				snprintf(pt->netdev, sizeof(pt->netdev), "%s",
					 nd);
			if (pci && pci->type == HWLOC_OBJ_PCI_DEVICE) {
				busid_of(pci, pt->busid, sizeof(pt->busid));
				pt->node = node_of(b, pci);
			} else {
				pt->node = node_of(b, o->parent);
			}
			pt->locality = node_of(
				b, hwloc_get_non_io_ancestor_obj(topo, o));
		}
	}
}

static void add_numa(struct topo *t, hwloc_topology_t topo)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o))) {
		struct topo_numa *n;

		if (t->nnuma >= TOPO_MAX_NUMA)
			break;
		n = &t->numa[t->nnuma++];
		n->os_index = (int)o->os_index;
		from_hwloc_set(&n->cpus, o->cpuset);
	}
	/*
	 * hwloc 2 gives a NUMA node the cpuset of the object it hangs from, so
	 * a CPU-less node (HBM, GPU memory, CXL) attached to the machine or to
	 * a package shows CPUs that belong to other nodes.  A node keeps only
	 * the CPUs not claimed by a node with a smaller cpuset, nor by an
	 * equal cpuset with a lower index: a CPU-less node ends up empty.
	 */
	for (int i = 0; i < t->nnuma; i++) {
		struct cpuset own = t->numa[i].cpus;
		int ci = cpuset_count(&t->numa[i].cpus);

		for (int j = 0; j < t->nnuma; j++) {
			int cj = cpuset_count(&t->numa[j].cpus);

			if (j == i ||
			    !cpuset_subset(&t->numa[j].cpus, &t->numa[i].cpus))
				continue;
			if (cj < ci || (cj == ci && j < i))
				for (size_t w = 0; w < CPUSET_MAX_CPUS / 64;
				     w++)
					own.w[w] &= ~t->numa[j].cpus.w[w];
		}
		t->numa[i].own = own;
	}
}

int machine_load(struct topo *t, const char *xml, const char *sysfs_root,
		 char *err, size_t errlen)
{
	hwloc_topology_t topo;
	struct builder *b;
	int live;

	memset(t, 0, sizeof(*t));
	if (!sysfs_root)
		sysfs_root = getenv("HVD_SYSFS_ROOT");
	live = !sysfs_root || strcmp(sysfs_root, "/sys") == 0;
	if (!sysfs_root)
		sysfs_root = "/sys";
	/* Built against one hwloc ABI, loaded with another: refuse. */
	if ((hwloc_get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
		err_set(err, errlen,
			"built for hwloc API 0x%x but running with 0x%x; "
			"rebuild against the installed hwloc",
			(unsigned)HWLOC_API_VERSION,
			(unsigned)hwloc_get_api_version());
		return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		err_set(err, errlen, "out of memory");
		return -1;
	}
	b->t = t;
	if (hwloc_topology_init(&topo)) {
		err_set(err, errlen, "hwloc_topology_init failed");
		goto err_free;
	}
	hwloc_topology_set_io_types_filter(topo,
					   HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/*
	 * Speed: this runs in slurmstepd for every step.  Caches, distances,
	 * memory attributes and CPU kinds are not needed; the OpenCL, GL,
	 * CUDA, NVML, RSMI and Level Zero components would initialise GPU
	 * drivers (tens of milliseconds or more) only to name OS devices we do
	 * not use: GPUs are found as PCI devices.  The libpciaccess "pci"
	 * component duplicates the Linux backend's own reading of
	 * /sys/bus/pci (and leaks a little): the Linux one is enough.
	 */
	hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
	hwloc_topology_set_icache_types_filter(topo,
					       HWLOC_TYPE_FILTER_KEEP_NONE);
	hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES |
					       HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
					       HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
	if (!xml) {
		static const char *const slow[] = { "opencl", "gl", "cuda",
						    "nvml", "rsmi",
						    "levelzero", "pci" };

		for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++)
			hwloc_topology_set_components(
				topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
				slow[i]);
	}
	if (xml && hwloc_topology_set_xml(topo, xml)) {
		err_set(err, errlen,
			"cannot read hwloc XML '%s' (expected a file written "
			"by lstopo/hwloc 1.x or 2.x)",
			xml);
		goto err_destroy;
	}
	if (hwloc_topology_load(topo)) {
		err_set(err, errlen, "hwloc cannot load the topology of %s",
			xml ? xml : "this machine");
		goto err_destroy;
	}
	snprintf(t->source, sizeof(t->source), "%s",
		 xml ? xml : "this machine");
	from_hwloc_set(&t->all_cpus, hwloc_topology_get_topology_cpuset(topo));
	add_gpus(b, topo);
	add_ports(b, topo);
	add_numa(t, topo);
	hwloc_topology_destroy(topo);
	free(b);
	/* An XML file describes another machine: only read sysfs for it when
	 * a tree was given explicitly (tests, hvd-topo --sysfs). */
	if (!xml || !live)
		sysfs_read(t, sysfs_root, live && !xml);
	return 0;
err_destroy:
	hwloc_topology_destroy(topo);
err_free:
	free(b);
	return -1;
}
