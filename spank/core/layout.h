/*
 * layout.h - where a task sits in its step: ranks, local and cross
 * ranks, the master address and port.  Pure functions of Slurm's step
 * description (SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NODELIST, ids,
 * SLURM_STEP_RESV_PORTS) and of the first node's NodeAddr, which srun looks
 * up and hands to the tasks (plugin/srun.c).
 */
#ifndef SPANK_CORE_LAYOUT_H
#define SPANK_CORE_LAYOUT_H

#include <stddef.h>

#include "cpuset.h"

#define LAYOUT_MAX_NODES 65536

/*
 * The variable through which srun hands "NODE=ADDR" to slurmstepd: the
 * node that runs task 0 and its NodeAddr.  Set in srun's environment (which
 * becomes the tasks'), read and removed from each task's environment by the
 * plugin.
 */
#define LAYOUT_ADDR_VAR "HOROVOD_SPANK_MASTER_ADDR"

/* Where MASTER_ADDR and MASTER_PORT came from, for their reasons. */
enum layout_addr_from {
	LAYOUT_ADDR_NODEADDR, /* task 0's node's NodeAddr, from srun */
	LAYOUT_ADDR_NAME      /* the first node's name: none handed over */
};
enum layout_port_from {
	LAYOUT_PORT_RESERVED, /* Slurm's reserved ports (MpiParams=ports) */
	LAYOUT_PORT_DERIVED   /* from job and step id */
};

struct layout {
	unsigned rank, size;		 /* global task id, task count */
	unsigned local_rank, local_size; /* on this node */
	unsigned cross_rank, cross_size; /* among tasks of equal local rank */
	unsigned node_id, nnodes;
	char hostname[256];
	char master_node[256]; /* NodeName of the node that runs task 0 */
	char master_addr[256]; /* an address that reaches it */
	enum layout_addr_from master_addr_from;
	unsigned master_port;
	enum layout_port_from master_port_from;
	char resv_ports[64]; /* SLURM_STEP_RESV_PORTS, when it gave the port */
	unsigned long job_id, step_id;
	char user[64];
	char job_name[128];
	char cwd[512]; /* the task's working directory, "" if unknown */
	int have_allowed;	    /* 0: all CPUs of the topology */
	struct cpuset allowed;	    /* the task's affinity mask */
};

/*
 * Expand Slurm's tasks-per-node list ("2(x3),1") into counts[0..*n-1].
 * Returns 0, or -1 if malformed or more than `max` nodes.
 */
int layout_tasks_per_node(const char *spec, unsigned *counts, unsigned max,
			  unsigned *n);

/*
 * Horovod's cross rank and size: the tasks with local rank `local_rank`, one
 * per node that has that many tasks, numbered in node order.  Correct for
 * block, cyclic and uneven distributions since only per-node counts matter.
 */
int layout_cross(const unsigned *counts, unsigned nnodes, unsigned node_id,
		 unsigned local_rank, unsigned *cross_rank,
		 unsigned *cross_size);

/* First host of a Slurm host list: "n[01-04,7],m1" -> "n01",
 * "rack[1-2]-n[3-4]" -> "rack1-n3".  Returns 0 or -1. */
int layout_first_host(const char *nodelist, char *out, size_t len);

/*
 * MASTER_PORT derived from the ids, when Slurm reserved no ports:
 * 15000 + (job * 9889 + step) mod 16000, in [15000, 30999], below Linux's
 * ephemeral range (32768-60999).  The steps of one job never meet (their
 * ids differ by less than 16000).  9889 is about 16000 / golden ratio and
 * prime to 16000, so jobs close in number start far apart: any 32
 * consecutive jobs stay apart while their step ids are below 331 (64 jobs:
 * below 105).  Jobs further apart can meet: only Slurm's reserved ports
 * rule that out.
 */
unsigned layout_master_port(unsigned long job_id, unsigned long step_id);

/*
 * The last port of Slurm's SLURM_STEP_RESV_PORTS ("12000-12002" or
 * "12000,12004-12005"): slurmctld reserves, with MpiParams=ports=, the same
 * ports on every node of the step and gives none of them to another step
 * while this one runs.  It reserves (most tasks on a node) + 1, one per
 * task for MPI libraries that use them, and the last one is the spare.
 * 0, or -1 when the list is malformed.
 */
int layout_resv_port(const char *spec, unsigned *port);

/* Is `s` usable as MASTER_ADDR: 1 to 255 characters of a host name or an
 * IPv4/IPv6 address ([A-Za-z0-9.:%_-], not starting with '-')? */
int layout_addr_ok(const char *s);

/*
 * Fill l->master_*: from srun's "NODE=ADDR" (`handover`, LAYOUT_ADDR_VAR),
 * else the first node of `nodelist` (else l->hostname) by its name; the
 * port from `resv_ports` (SLURM_STEP_RESV_PORTS), else derived from
 * l->job_id and l->step_id.  Any argument may be NULL; a malformed one
 * counts as absent.
 */
void layout_master(struct layout *l, const char *nodelist,
		   const char *handover, const char *resv_ports);

#endif /* SPANK_CORE_LAYOUT_H */
