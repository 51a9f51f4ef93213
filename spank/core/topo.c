/*
 * topo.c - questions about the tree in a struct topo (see topo.h), without
 * hwloc: the hint computation asks them of topologies loaded elsewhere.
 */
#include "topo.h"

#include <stdio.h>

int topo_common_ancestor(const struct topo *t, int a, int b)
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

void topo_describe(const struct topo *t, int node, char *buf, size_t len)
{
	const struct topo_node *n;

	if (node < 0 || node >= t->nnodes) {
		snprintf(buf, len, "nothing in common");
		return;
	}
	n = &t->nodes[node];
	switch (n->kind) {
	case TOPO_PCIDEV:
		snprintf(buf, len, "the same PCI device %s", n->busid);
		break;
	case TOPO_PCISWITCH:
		snprintf(buf, len, "a PCI switch (bridge %s)", n->busid);
		break;
	case TOPO_HOSTBRIDGE:
		snprintf(buf, len, "a PCI host bridge");
		break;
	case TOPO_PACKAGE:
		snprintf(buf, len, "package P#%d", n->os_index);
		break;
	case TOPO_NUMA:
		snprintf(buf, len, "NUMA node P#%d", n->os_index);
		break;
	case TOPO_GROUP:
		snprintf(buf, len, "a group of CPUs");
		break;
	case TOPO_OTHER_CPU:
		snprintf(buf, len, "a CPU object");
		break;
	case TOPO_MACHINE:
	default:
		snprintf(buf, len, "only the machine");
		break;
	}
}
