/*
 * layout.c - task layout from Slurm's step description.
 * See layout.h.  Input comes from the step environment, which the
 * user controls: every number is bounded and every string length checked.
 */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_num(const char **p, unsigned long max, unsigned long *out)
{
	unsigned long n = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		n = n * 10 + (unsigned long)(*s - '0');
		if (n > max)
			return -1;
		s++;
	}
	*p = s;
	*out = n;
	return 0;
}

int layout_tasks_per_node(const char *spec, unsigned *counts, unsigned max,
			  unsigned *n)
{
	const char *p = spec;

	*n = 0;
	if (!spec || !*spec)
		return -1;
	for (;;) {
		unsigned long c, rep = 1;

		if (parse_num(&p, 1000000, &c))
			return -1;
		if (*p == '(') {
			p++;
			if (*p++ != 'x' ||
			    parse_num(&p, LAYOUT_MAX_NODES, &rep) ||
			    *p++ != ')' || rep == 0)
				return -1;
		}
		if (rep > max - *n)
			return -1;
		for (unsigned long i = 0; i < rep; i++)
			counts[(*n)++] = (unsigned)c;
		if (*p == '\0')
			return 0;
		if (*p++ != ',')
			return -1;
	}
}

int layout_cross(const unsigned *counts, unsigned nnodes, unsigned node_id,
		 unsigned local_rank, unsigned *cross_rank,
		 unsigned *cross_size)
{
	unsigned r = 0, s = 0;

	if (node_id >= nnodes || local_rank >= counts[node_id])
		return -1;
	for (unsigned i = 0; i < nnodes; i++) {
		if (counts[i] <= local_rank)
			continue;
		if (i < node_id)
			r++;
		s++;
	}
	*cross_rank = r;
	*cross_size = s;
	return 0;
}

int layout_first_host(const char *nodelist, char *out, size_t len)
{
	size_t o = 0;
	const char *p = nodelist;

	if (!nodelist || !*nodelist || len == 0)
		return -1;
	while (*p && *p != ',') {
		if (*p == '[') {
			/* First element of the range list: up to '-', ',' or
			 * ']'; its zero padding is part of the name. */
			p++;
			while (*p >= '0' && *p <= '9') {
				if (o + 1 >= len)
					return -1;
				out[o++] = *p++;
			}
			while (*p && *p != ']')
				p++;
			if (*p != ']')
				return -1;
			p++;
			continue;
		}
		if (*p == ']' || *p == ' ')
			return -1;
		if (o + 1 >= len)
			return -1;
		out[o++] = *p++;
	}
	if (o == 0)
		return -1;
	out[o] = '\0';
	return 0;
}

unsigned layout_master_port(unsigned long job_id, unsigned long step_id)
{
	return 15000u +
	       (unsigned)(((job_id % 16000u) * 9889u + step_id % 16000u) %
			  16000u);
}

int layout_resv_port(const char *spec, unsigned *port)
{
	const char *p = spec;
	unsigned long a = 0, b = 0;

	if (!spec || !*spec)
		return -1;
	for (;;) {
		if (parse_num(&p, 65535, &a))
			return -1;
		b = a;
		if (*p == '-') {
			p++;
			if (parse_num(&p, 65535, &b) || b < a)
				return -1;
		}
		if (*p == '\0')
			break;
		if (*p++ != ',')
			return -1;
	}
	if (b == 0)
		return -1;
	*port = (unsigned)b;
	return 0;
}

int layout_addr_ok(const char *s)
{
	size_t n = 0;

	if (!s || !*s || *s == '-')
		return 0;
	for (; s[n]; n++) {
		char c = s[n];

		if (n >= 255 ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr(".:%_-", c)))
			return 0;
	}
	return 1;
}

/* "NODE=ADDR" into node and addr; 0 or -1. */
static int split_handover(const char *s, char *node, char *addr, size_t len)
{
	const char *eq = s ? strchr(s, '=') : NULL;
	size_t nl;

	if (!eq || (nl = (size_t)(eq - s)) >= len || strlen(eq + 1) >= len)
		return -1;
	memcpy(node, s, nl);
	node[nl] = '\0';
	strcpy(addr, eq + 1);
	return layout_addr_ok(node) && layout_addr_ok(addr) ? 0 : -1;
}

void layout_master(struct layout *l, const char *nodelist,
		   const char *handover, const char *resv_ports)
{
	char node[sizeof(l->master_node)], addr[sizeof(l->master_addr)];

	if (split_handover(handover, node, addr, sizeof(node)) == 0) {
		strcpy(l->master_node, node);
		strcpy(l->master_addr, addr);
		l->master_addr_from = LAYOUT_ADDR_NODEADDR;
	} else {
		if (!nodelist || layout_first_host(nodelist, l->master_node,
						   sizeof(l->master_node)))
			snprintf(l->master_node, sizeof(l->master_node), "%s",
				 l->hostname);
		snprintf(l->master_addr, sizeof(l->master_addr), "%s",
			 l->master_node);
		l->master_addr_from = LAYOUT_ADDR_NAME;
	}
	l->resv_ports[0] = '\0';
	if (resv_ports && strlen(resv_ports) < sizeof(l->resv_ports) &&
	    layout_resv_port(resv_ports, &l->master_port) == 0) {
		l->master_port_from = LAYOUT_PORT_RESERVED;
		strcpy(l->resv_ports, resv_ports);
		return;
	}
	l->master_port = layout_master_port(l->job_id, l->step_id);
	l->master_port_from = LAYOUT_PORT_DERIVED;
}
