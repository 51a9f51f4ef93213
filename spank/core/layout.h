/*
 * layout.h - where a task sits in its step: ranks, local and cross
 * ranks, the master address and port.  Pure functions of Slurm's step
 * description (SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NODELIST, ids).
 */
#ifndef SPANK_CORE_LAYOUT_H
#define SPANK_CORE_LAYOUT_H

#include <stddef.h>

#include "cpuset.h"

#define LAYOUT_MAX_NODES 65536

struct layout {
	unsigned rank, size;		 /* global task id, task count */
	unsigned local_rank, local_size; /* on this node */
	unsigned cross_rank, cross_size; /* among tasks of equal local rank */
	unsigned node_id, nnodes;
	char hostname[256];
	char master_addr[256]; /* first node of the step */
	unsigned master_port;
	unsigned long job_id, step_id;
	char user[64];
	char job_name[128];
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
 * MASTER_PORT for torch.distributed: 15000 + (job * 31 + step) mod 16000,
 * i.e. in [15000, 30999], below Linux's ephemeral range (32768-60999), and
 * different for consecutive steps and jobs.
 */
unsigned layout_master_port(unsigned long job_id, unsigned long step_id);

#endif /* SPANK_CORE_LAYOUT_H */
