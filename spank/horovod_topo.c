/*
 * horovod_topo.c - hwloc (live machine or XML) to struct hvdtopo.
 *
 * GPUs are found as PCI devices (vendor 0x10de, class 0x0300 VGA or 0x0302
 * 3D), never through cuda/nvml OS devices: Debian's hwloc has no CUDA or
 * NVML component, so on a real Debian node those OS devices do not exist.
 * PCI bus order is the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID
 * use.  HCA ports come from OpenFabrics OS devices and their Port<N>State
 * infos.  Only the ancestors of those devices are copied into the node
 * table: that is all a smallest-common-ancestor search needs.
 */
#include "horovod_topo.h"
#include "horovod_err.h"

#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hvdcpu_zero(struct hvd_cpuset *s)
{
	memset(s, 0, sizeof(*s));
}

void hvdcpu_set(struct hvd_cpuset *s, unsigned cpu)
{
	if (cpu < HVDTOPO_MAX_CPUS)
		s->w[cpu / 64] |= 1ULL << (cpu % 64);
}

int hvdcpu_isset(const struct hvd_cpuset *s, unsigned cpu)
{
	return cpu < HVDTOPO_MAX_CPUS && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}

int hvdcpu_count(const struct hvd_cpuset *s)
{
	int n = 0;

	for (size_t i = 0; i < HVDTOPO_MAX_CPUS / 64; i++)
		n += __builtin_popcountll(s->w[i]);
	return n;
}

void hvdcpu_and(struct hvd_cpuset *d, const struct hvd_cpuset *a,
		const struct hvd_cpuset *b)
{
	for (size_t i = 0; i < HVDTOPO_MAX_CPUS / 64; i++)
		d->w[i] = a->w[i] & b->w[i];
}

int hvdcpu_subset(const struct hvd_cpuset *a, const struct hvd_cpuset *b)
{
	for (size_t i = 0; i < HVDTOPO_MAX_CPUS / 64; i++)
		if (a->w[i] & ~b->w[i])
			return 0;
	return 1;
}

int hvdcpu_format(const struct hvd_cpuset *s, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return -1;
	buf[0] = '\0';
	for (unsigned c = 0; c < HVDTOPO_MAX_CPUS; c++) {
		unsigned e = c;
		int w;

		if (!hvdcpu_isset(s, c))
			continue;
		while (e + 1 < HVDTOPO_MAX_CPUS && hvdcpu_isset(s, e + 1))
			e++;
		if (e == c)
			w = snprintf(buf + n, len - n, "%s%u", n ? "," : "", c);
		else
			w = snprintf(buf + n, len - n, "%s%u-%u", n ? "," : "",
				     c, e);
		if (w < 0 || (size_t)w >= len - n)
			return -1;
		n += (size_t)w;
		c = e;
	}
	return 0;
}

int hvdcpu_parse(const char *str, struct hvd_cpuset *s)
{
	const char *p = str;

	hvdcpu_zero(s);
	while (*p) {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;

		if (end == p || a >= HVDTOPO_MAX_CPUS)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtoul(++p, &end, 10);
			if (end == p || b >= HVDTOPO_MAX_CPUS || b < a)
				return -1;
			p = end;
		}
		for (unsigned long c = a; c <= b; c++)
			hvdcpu_set(s, (unsigned)c);
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return 0;
}


static void from_hwloc_set(struct hvd_cpuset *d, hwloc_const_bitmap_t b)
{
	unsigned i;

	hvdcpu_zero(d);
	if (!b)
		return;
	hwloc_bitmap_foreach_begin(i, b) {
		hvdcpu_set(d, i);
	}
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
	struct hvdtopo *t;
	hwloc_obj_t objs[HVDTOPO_MAX_NODES];
};

static int node_of(struct builder *b, hwloc_obj_t o)
{
	struct hvdtopo *t = b->t;
	struct hvdtopo_node *n;
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
	if (t->nnodes >= HVDTOPO_MAX_NODES)
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
		n->kind = HVDTOPO_MACHINE;
		break;
	case HWLOC_OBJ_GROUP:
		n->kind = HVDTOPO_GROUP;
		break;
	case HWLOC_OBJ_PACKAGE:
		n->kind = HVDTOPO_PACKAGE;
		n->os_index = (int)o->os_index;
		break;
	case HWLOC_OBJ_NUMANODE:
		n->kind = HVDTOPO_NUMA;
		n->os_index = (int)o->os_index;
		break;
	case HWLOC_OBJ_BRIDGE:
		n->kind = o->attr->bridge.upstream_type ==
					  HWLOC_OBJ_BRIDGE_HOST
				  ? HVDTOPO_HOSTBRIDGE
				  : HVDTOPO_PCISWITCH;
		if (n->kind == HVDTOPO_PCISWITCH)
			busid_of(o, n->busid, sizeof(n->busid));
		break;
	case HWLOC_OBJ_PCI_DEVICE:
		n->kind = HVDTOPO_PCIDEV;
		busid_of(o, n->busid, sizeof(n->busid));
		break;
	default:
		n->kind = HVDTOPO_OTHER_CPU;
		break;
	}
	if (o->cpuset)
		from_hwloc_set(&t->node_cpus[idx], o->cpuset);
	else
		hvdcpu_zero(&t->node_cpus[idx]);
	return idx;
}

static int gpu_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hvdtopo_gpu *)a)->busid,
		      ((const struct hvdtopo_gpu *)b)->busid);
}

static void add_gpus(struct builder *b, hwloc_topology_t topo)
{
	struct hvdtopo *t = b->t;
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_pcidev(topo, o)) != NULL) {
		struct hvdtopo_gpu *g;
		hwloc_obj_t c;

		if (o->attr->pcidev.vendor_id != 0x10de ||
		    (o->attr->pcidev.class_id != 0x0300 &&
		     o->attr->pcidev.class_id != 0x0302))
			continue;
		if (t->ngpus >= HVDTOPO_MAX_GPUS)
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
	struct hvdtopo *t = b->t;
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
			struct hvdtopo_port *pt;

			snprintf(key, sizeof(key), "Port%dState", p);
			st = hwloc_obj_get_info_by_name(o, key);
			if (!st)
				continue;
			if (t->nports >= HVDTOPO_MAX_PORTS)
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
						   ? HVDTOPO_LINK_ETH
						   : HVDTOPO_LINK_IB;
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

static void add_numa(struct hvdtopo *t, hwloc_topology_t topo)
{
	hwloc_obj_t o = NULL;

	while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o))) {
		struct hvdtopo_numa *n;

		if (t->nnuma >= HVDTOPO_MAX_NUMA)
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
		struct hvd_cpuset own = t->numa[i].cpus;
		int ci = hvdcpu_count(&t->numa[i].cpus);

		for (int j = 0; j < t->nnuma; j++) {
			int cj = hvdcpu_count(&t->numa[j].cpus);

			if (j == i || !hvdcpu_subset(&t->numa[j].cpus,
						     &t->numa[i].cpus))
				continue;
			if (cj < ci || (cj == ci && j < i))
				for (size_t w = 0; w < HVDTOPO_MAX_CPUS / 64;
				     w++)
					own.w[w] &= ~t->numa[j].cpus.w[w];
		}
		t->numa[i].own = own;
	}
}

int hvdtopo_load(struct hvdtopo *t, const char *xml, const char *sysfs_root,
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
		hvd_seterr(err, errlen,
		       "built for hwloc API 0x%x but running with 0x%x; rebuild "
		       "against the installed hwloc",
		       (unsigned)HWLOC_API_VERSION,
		       (unsigned)hwloc_get_api_version());
		return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		hvd_seterr(err, errlen, "out of memory");
		return -1;
	}
	b->t = t;
	if (hwloc_topology_init(&topo)) {
		hvd_seterr(err, errlen, "hwloc_topology_init failed");
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
		hvd_seterr(err, errlen,
		       "cannot read hwloc XML '%s' (expected a file written "
		       "by lstopo/hwloc 1.x or 2.x)",
		       xml);
		goto err_destroy;
	}
	if (hwloc_topology_load(topo)) {
		hvd_seterr(err, errlen, "hwloc cannot load the topology of %s",
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
		hvdtopo_read_sysfs(t, sysfs_root, live && !xml);
	return 0;
err_destroy:
	hwloc_topology_destroy(topo);
err_free:
	free(b);
	return -1;
}

int hvdtopo_common_ancestor(const struct hvdtopo *t, int a, int b)
{
	if (a < 0 || b < 0 || a >= t->nnodes || b >= t->nnodes)
		return -1;
	while (t->nodes[a].depth > t->nodes[b].depth)
		a = t->nodes[a].parent;
	while (t->nodes[b].depth > t->nodes[a].depth)
		b = t->nodes[b].parent;
	while (a != b && a >= 0 && b >= 0) {
		a = t->nodes[a].parent;
		b = t->nodes[b].parent;
	}
	return a == b ? a : -1;
}

void hvdtopo_describe(const struct hvdtopo *t, int node, char *buf,
		      size_t len)
{
	const struct hvdtopo_node *n;

	if (node < 0 || node >= t->nnodes) {
		snprintf(buf, len, "nothing in common");
		return;
	}
	n = &t->nodes[node];
	switch (n->kind) {
	case HVDTOPO_PCIDEV:
		snprintf(buf, len, "the same PCI device %s", n->busid);
		break;
	case HVDTOPO_PCISWITCH:
		snprintf(buf, len, "a PCI switch (bridge %s)", n->busid);
		break;
	case HVDTOPO_HOSTBRIDGE:
		snprintf(buf, len, "a PCI host bridge");
		break;
	case HVDTOPO_PACKAGE:
		snprintf(buf, len, "package P#%d", n->os_index);
		break;
	case HVDTOPO_NUMA:
		snprintf(buf, len, "NUMA node P#%d", n->os_index);
		break;
	case HVDTOPO_GROUP:
		snprintf(buf, len, "a group of CPUs");
		break;
	case HVDTOPO_OTHER_CPU:
		snprintf(buf, len, "a CPU object");
		break;
	case HVDTOPO_MACHINE:
	default:
		snprintf(buf, len, "only the machine");
		break;
	}
}
