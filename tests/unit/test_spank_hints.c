/* Hints on real machine topologies (tests/spank/topologies, with the
 * reference answers of its README), on a hand-written hwloc 1.x XML, on a
 * topology with a CPU-less NUMA node, a GPU seen only as a PCI device and no
 * HCA, and on a synthetic sysfs tree for RoCE GIDs and network interfaces. */
#include "core/cfg.h"
#include "core/hints.h"
#include "core/layout.h"
#include "core/machine.h"
#include "core/topo.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct topo *t;
static struct hints *h;
static struct cfg cfg;
static char err[512];
static char dir[1024];
static const char *task_cwd = ""; /* the working directory layout() gives */

static int load(const char *file, const char *sysfs)
{
	char path[2048];

	if (file[0] == '/')
		snprintf(path, sizeof(path), "%s", file);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (machine_load(t, path, sysfs ? sysfs : "/nonexistent", err,
			 sizeof(err))) {
		diag("load %s: %s", path, err);
		return -1;
	}
	return 0;
}

static void layout(struct layout *l, unsigned lr, unsigned ls)
{
	memset(l, 0, sizeof(*l));
	l->rank = l->local_rank = lr;
	l->size = l->local_size = ls;
	l->cross_size = l->nnodes = 1;
	strcpy(l->hostname, "n1");
	strcpy(l->user, "alice");
	strcpy(l->job_name, "train");
	l->job_id = 42;
	snprintf(l->cwd, sizeof(l->cwd), "%s", task_cwd);
	layout_master(l, "n[1-2]", NULL, NULL);
}

/* Hints of local rank lr of ls, with options `opt` and environment env. */
static int hints(unsigned lr, unsigned ls, const char *opt, char **env)
{
	struct layout l;
	struct opt o = cfg.defaults;

	layout(&l, lr, ls);
	if (opt_parse(opt, &o, err, sizeof(err)))
		return -1;
	return hints_compute(t, &l, &o, env, &cfg, h, err, sizeof(err));
}

static const char *val(const char *name)
{
	const struct hint *x = hints_find(h, name);

	return x ? x->value : NULL;
}

static const char *why(const char *name)
{
	const struct hint *x = hints_find(h, name);

	return x ? x->why : "";
}

static void fixtures(void)
{
	/* cts1-pascal: both GPUs share a PLX switch with mlx5_0. */
	if (load("topologies/mpibind__cts1-pascal__BDW_2xP100_1xmlx5.xml", NULL) == 0) {
		is_int(t->ngpus, 2, "cts1: 2 GPUs");
		for (unsigned r = 0; r < 2; r++) {
			hints(r, 2, NULL, NULL);
			is_str(val("NCCL_IB_HCA"), "=mlx5_0:1",
			       "cts1: GPU %u -> mlx5_0", r);
			ok(strstr(why("NCCL_IB_HCA"), "PCI switch") != NULL,
			   "cts1: reason names the switch: %s",
			   why("NCCL_IB_HCA"));
			is_str(val("UCX_NET_DEVICES"), "mlx5_0:1",
			       "cts1: UCX_NET_DEVICES");
		}
	} else {
		skip(6, "cts1 fixture missing");
	}
	/* coral-lassen: cuda0/1 -> mlx5_0/1 (socket 0), cuda2/3 ->
	 * mlx5_2/3 (socket 1); no switch shared. */
	if (load("topologies/mpibind__coral-lassen__P9_4xV100_4xmlx5.xml", NULL) == 0) {
		const char *want[] = { "=mlx5_0:1", "=mlx5_1:1", "=mlx5_2:1",
				       "=mlx5_3:1" };

		is_int(t->ngpus, 4, "lassen: 4 GPUs");
		is_int(t->nports, 4, "lassen: 4 ports");
		for (unsigned r = 0; r < 4; r++) {
			hints(r, 4, NULL, NULL);
			is_str(val("NCCL_IB_HCA"), want[r],
			       "lassen: GPU %u -> %s", r, want[r]);
			ok(strstr(why("NCCL_IB_HCA"), "package") &&
				   !strstr(why("NCCL_IB_HCA"), "switch"),
			   "lassen: common ancestor is the socket: %s",
			   why("NCCL_IB_HCA"));
		}
		/* 8 ranks on 4 GPUs: round-robin, HCA follows the GPU. */
		hints(5, 8, NULL, NULL);
		is_str(val("CUDA_VISIBLE_DEVICES"), "1",
		       "lassen: local rank 5 of 8 -> GPU 1 (round-robin)");
		is_str(val("NCCL_IB_HCA"), "=mlx5_1:1",
		       "lassen: ... and GPU 1's port");
	} else {
		skip(12, "lassen fixture missing");
	}
	/* 32em64t: 3 NVIDIA GPUs (one with cuda0) -> mlx5_0 via a bridge. */
	if (load("topologies/hwloc-2.9.3__32em64t-2n8c2t-pci-wholeio.xml", NULL) == 0) {
		int cuda0 = -1;

		is_int(t->ngpus, 3, "32em64t: 3 NVIDIA GPUs (AMD one ignored)");
		for (int i = 0; i < t->ngpus; i++)
			if (strstr(t->gpus[i].osdevs, "cuda0"))
				cuda0 = i;
		is_int(cuda0, 2, "32em64t: cuda0 is the 3rd in PCI bus order");
		hints((unsigned)cuda0, 3, NULL, NULL);
		is_str(val("NCCL_IB_HCA"), "=mlx5_0:1", "32em64t: cuda0 -> mlx5_0");
		ok(strstr(why("NCCL_IB_HCA"), "PCI switch") != NULL,
		   "32em64t: common PCI bridge: %s", why("NCCL_IB_HCA"));
		ok(strstr(why("HOROVOD_CPU_LIST"), "NUMA P#1") != NULL,
		   "32em64t: cuda0 on NUMA P#1: %s", why("HOROVOD_CPU_LIST"));
		is_str(val("HOROVOD_CPU_LIST"), "8-15,24-31",
		       "32em64t: CPUs of socket 1");
	} else {
		skip(6, "32em64t fixture missing");
	}
	/* epyc-corona: AMD GPUs only: no GPU hints, mlx5_0 for the net. */
	if (load("topologies/mpibind__epyc-corona-p2__8xAMDGPU_1xmlx5.xml", NULL) == 0) {
		is_int(t->ngpus, 0, "corona: no NVIDIA GPU");
		hints(0, 4, NULL, NULL);
		ok(!val("CUDA_VISIBLE_DEVICES") && !val("CUDA_DEVICE_ORDER"),
		   "corona: no GPU variables");
		is_str(val("NCCL_IB_HCA"), "=mlx5_0:1", "corona: mlx5_0");
		is_str(val("UCX_TLS"), "rc,ud,sm,self", "corona: UCX_TLS no cuda");
		ok(h->nnotes > 0 && strstr(h->notes[0], "no NVIDIA GPU"),
		   "corona: a note says why there is no GPU");
	} else {
		skip(5, "corona fixture missing");
	}
}

static void slurm_gpus(void)
{
	char *env1[] = { "SLURM_STEP_GPUS=2,3", "CUDA_VISIBLE_DEVICES=0,1",
			 NULL };
	char *env2[] = { "CUDA_VISIBLE_DEVICES=3", NULL };
	char *env3[] = { "SLURM_STEP_GPUS=1,3", "CUDA_VISIBLE_DEVICES=1,3",
			 NULL };

	if (load("topologies/mpibind__coral-lassen__P9_4xV100_4xmlx5.xml", NULL)) {
		skip(7, "lassen fixture missing");
		return;
	}
	/* ConstrainDevices: local indices in CVD, global in STEP_GPUS. */
	hints(1, 2, NULL, env1);
	is_str(val("CUDA_VISIBLE_DEVICES"), "1",
	       "ConstrainDevices: token kept as Slurm wrote it");
	is_int(h->gpu, 3, "... physical GPU from SLURM_STEP_GPUS");
	is_str(val("NCCL_IB_HCA"), "=mlx5_3:1", "... and its port");
	hints(0, 2, NULL, env3);
	is_str(val("CUDA_VISIBLE_DEVICES"), "1", "global indices: rank 0 -> 1");
	/* The user's own CVD (no Slurm GPUs) is kept. */
	hints(0, 2, NULL, env2);
	ok(hints_find(h, "CUDA_VISIBLE_DEVICES")->action == HINT_KEPT &&
	       strcmp(val("CUDA_VISIBLE_DEVICES"), "3") == 0,
	   "user CUDA_VISIBLE_DEVICES kept");
	is_str(val("NCCL_IB_HCA"), "=mlx5_3:1", "... its GPU's port used");
	hints(0, 2, "gpu-bind=none", NULL);
	ok(!val("CUDA_VISIBLE_DEVICES") && val("CUDA_DEVICE_ORDER"),
	   "gpu-bind=none: no CUDA_VISIBLE_DEVICES");
}

static void user_and_force(void)
{
	char *env[] = { "NCCL_IB_HCA=mlx5_9", "HOROVOD_FUSION_THRESHOLD=1",
			NULL };
	char *pol[] = { "force=NCCL_IB_HCA", "default_fusion_mb=16",
			"force=HOROVOD_FUSION_THRESHOLD",
			"ckpt_roots=/scratch:/home" };

	if (load("topologies/mpibind__cts1-pascal__BDW_2xP100_1xmlx5.xml", NULL)) {
		skip(9, "cts1 fixture missing");
		return;
	}
	hints(0, 2, "fusion-mb=64", env);
	ok(hints_find(h, "NCCL_IB_HCA")->action == HINT_KEPT &&
	       strcmp(val("NCCL_IB_HCA"), "mlx5_9") == 0,
	   "user NCCL_IB_HCA kept");
	ok(strstr(why("NCCL_IB_HCA"), "=mlx5_0:1") != NULL,
	   "... reason says what the plugin would set: %s", why("NCCL_IB_HCA"));
	is_str(val("HOROVOD_FUSION_THRESHOLD"), "1", "user knob kept");
	ok(cfg_parse(4, pol, &cfg, err, sizeof(err)) == 0, "policy parses");
	hints(0, 2, "fusion-mb=64", env);
	ok(hints_find(h, "NCCL_IB_HCA")->action == HINT_FORCED &&
	       strcmp(val("NCCL_IB_HCA"), "=mlx5_0:1") == 0,
	   "force=NCCL_IB_HCA overrides the user");
	is_str(val("HOROVOD_FUSION_THRESHOLD"), "16777216",
	       "forced admin default beats user option and env");
	ok(hints(0, 2, "ckpt-dir=/etc/%u", NULL) == -1 &&
		   strstr(err, "outside") && strstr(err, "/etc/alice"),
	   "ckpt-dir outside ckpt_roots refused: %s", err);
	ok(hints(0, 2, "ckpt-dir=/scratch/%u/%j,ckpt-every=10", NULL) == 0 &&
		   strcmp(val("HOROVOD_CHECKPOINT_DIR"), "/scratch/alice/42") ==
			   0 &&
		   strcmp(h->ckpt_dir, "/scratch/alice/42") == 0,
	   "ckpt-dir under a root expanded: %s", h->ckpt_dir);
	is_str(val("HOROVOD_CHECKPOINT_EVERY"), "10", "checkpoint every");
	cfg_init(&cfg);
}

/* ckpt_roots also hold for a HOROVOD_CHECKPOINT_DIR the user exported. */
static void roots_env(void)
{
	char *pol[] = { "ckpt_roots=/scratch:/work/shared" };
	char *forced[] = { "ckpt_roots=/scratch", "force=HOROVOD_CHECKPOINT_DIR" };
	char *out[] = { "HOROVOD_CHECKPOINT_DIR=/home/alice/ck", NULL };
	char *in[] = { "HOROVOD_CHECKPOINT_DIR=/scratch/alice/ck", NULL };
	char *rel[] = { "HOROVOD_CHECKPOINT_DIR=ck/run1", NULL };
	char *up[] = { "HOROVOD_CHECKPOINT_DIR=../../home/alice", NULL };
	char *dots[] = { "HOROVOD_CHECKPOINT_DIR=/scratch/../etc", NULL };
	char *prefix[] = { "HOROVOD_CHECKPOINT_DIR=/work/shared2/x", NULL };
	char *empty[] = { "HOROVOD_CHECKPOINT_DIR=", NULL };

	cfg_init(&cfg);
	ok(hints(0, 1, NULL, out) == 0,
	   "no ckpt_roots: any exported directory is the user's business");
	ok(cfg_parse(1, pol, &cfg, err, sizeof(err)) == 0, "ckpt_roots policy");
	ok(hints(0, 1, NULL, out) == -1 &&
		   strstr(err, "HOROVOD_CHECKPOINT_DIR=/home/alice/ck (exported "
			       "before srun) is outside") &&
		   strstr(err, "/scratch:/work/shared") && strstr(err, "unset it"),
	   "exported directory outside the roots refused: %s", err);
	ok(hints(0, 1, "ckpt-dir=/scratch/%u", out) == -1,
	   "... also when --horovod has a ckpt-dir inside (the export wins)");
	ok(hints(0, 1, NULL, in) == 0, "exported directory inside: accepted");
	ok(hints(0, 1, NULL, prefix) == -1,
	   "/work/shared2 is not below /work/shared: refused");
	ok(hints(0, 1, NULL, dots) == -1 && strstr(err, "'..'"),
	   "'..' in the export refused: %s", err);
	task_cwd = "/scratch/alice";
	ok(hints(0, 1, NULL, rel) == 0,
	   "relative export from a working directory inside: accepted");
	ok(hints(0, 1, NULL, up) == -1 && strstr(err, "'..'"),
	   "relative export climbing out with '..': refused: %s", err);
	task_cwd = "/home/alice";
	ok(hints(0, 1, NULL, rel) == -1 &&
		   strstr(err, "that is /home/alice/ck/run1"),
	   "relative export from a working directory outside: refused, "
	   "naming the full path: %s", err);
	task_cwd = "";
	ok(hints(0, 1, NULL, rel) == -1 && strstr(err, "working directory is "
						    "unknown"),
	   "relative export, working directory unknown: refused");
	ok(hints(0, 1, NULL, empty) == 0, "an empty export is no directory");
	cfg_init(&cfg);
	ok(cfg_parse(2, forced, &cfg, err, sizeof(err)) == 0 &&
		   hints(0, 1, "ckpt-dir=/scratch/%u", out) == 0 &&
		   strcmp(val("HOROVOD_CHECKPOINT_DIR"), "/scratch/alice") == 0,
	   "force=HOROVOD_CHECKPOINT_DIR: the plugin's directory replaces the "
	   "export, nothing to refuse");
	ok(hints(0, 1, NULL, out) == -1,
	   "... but without a ckpt-dir the export stays, and is checked");
	cfg_init(&cfg);
}

/* --horovod=elastic's variables, and elastic-min against the step. */
static void elastic_env(void)
{
	ok(hints(0, 4, "ckpt-every=5", NULL) == 0 &&
		   !val("HOROVOD_ELASTIC") && !val("HOROVOD_ELASTIC_MIN_SIZE"),
	   "not elastic: no elastic variables");
	ok(hints(0, 4, "elastic", NULL) == 0, "elastic");
	is_str(val("HOROVOD_ELASTIC"), "1", "... HOROVOD_ELASTIC=1");
	ok(!val("HOROVOD_ELASTIC_MIN_SIZE"),
	   "... no HOROVOD_ELASTIC_MIN_SIZE without elastic-min");
	ok(hints(0, 4, "elastic,elastic-min=2", NULL) == 0, "elastic-min=2");
	is_str(val("HOROVOD_ELASTIC_MIN_SIZE"), "2",
	       "... HOROVOD_ELASTIC_MIN_SIZE=2");
	ok(hints(0, 4, "elastic,elastic-min=4", NULL) == 0,
	   "elastic-min equal to the step's size");
	ok(hints(0, 4, "elastic,elastic-min=5", NULL) == -1 &&
		   strstr(err, "the step has 4 tasks; expected elastic-min at "
			       "most 4"),
	   "elastic-min above the step's size refused in slurmstepd: %s",
	   err);
}

static void knobs(void)
{
	if (load("topologies/mpibind__cts1-pascal__BDW_2xP100_1xmlx5.xml", NULL)) {
		skip(8, "cts1 fixture missing");
		return;
	}
	hints(0, 1, "fusion-mb=64,cycle-ms=2.5,cache=100,timeline=/t/%j.json,"
		    "hierarchical=on,stall-s=30,log=debug,ckpt-keep=2",
	      NULL);
	is_str(val("HOROVOD_FUSION_THRESHOLD"), "67108864", "fusion in bytes");
	is_str(val("HOROVOD_CYCLE_TIME"), "2.5", "cycle time");
	is_str(val("HOROVOD_CACHE_CAPACITY"), "100", "cache");
	is_str(val("HOROVOD_TIMELINE"), "/t/42.json", "timeline expanded");
	is_str(val("HOROVOD_HIERARCHICAL_ALLREDUCE"), "1", "hierarchical");
	is_str(val("HOROVOD_STALL_CHECK_TIME_SECONDS"), "30", "stall");
	is_str(val("HOROVOD_LOG_LEVEL"), "debug", "log level");
	is_str(val("HOROVOD_CHECKPOINT_KEEP"), "2", "keep");
}

static void hwloc1_and_cpuless(void)
{
	struct layout l;
	struct opt o;

	/* hwloc 1.x XML; GPUs as PCI devices only; mlx5_1's port DOWN. */
	if (load("hwloc1-2numa-2gpu-2hca.xml", NULL) == 0) {
		is_int(t->ngpus, 2, "hwloc 1.x XML: 2 GPUs from PCI class only");
		hints(0, 2, NULL, NULL);
		is_str(val("NCCL_IB_HCA"), "=mlx5_0:1", "v1: GPU 0 -> mlx5_0");
		is_str(val("HOROVOD_CPU_LIST"), "0-1", "v1: GPU 0's CPUs");
		hints(1, 2, "cpu-bind=numa", NULL);
		is_str(val("NCCL_IB_HCA"), "=mlx5_0:1",
		       "v1: GPU 1's own HCA is DOWN: the ACTIVE one");
		ok(h->bind && cpuset_isset(&h->cpus, 2) &&
		       cpuset_count(&h->cpus) == 2,
		   "v1: cpu-bind=numa binds to GPU 1's CPUs");
		hints(0, 2, "net=roce", NULL);
		is_str(val("NCCL_IB_DISABLE"), "1",
		       "net=roce without RoCE port: NCCL_IB_DISABLE");
		/* Binding never leaves the allowed mask. */
		layout(&l, 1, 2);
		l.have_allowed = 1;
		cpuset_parse("0-1", &l.allowed);
		o = cfg.defaults;
		opt_parse("cpu-bind=numa", &o, err, sizeof(err));
		hints_compute(t, &l, &o, NULL, &cfg, h, err, sizeof(err));
		is_str(val("HOROVOD_CPU_LIST"), "0-1",
		       "allowed mask outside the GPU's NUMA: stay inside it");
	} else {
		skip(7, "hwloc 1.x fixture missing");
	}
	if (load("hwloc2-cpuless-numa-nohca.xml", NULL) == 0) {
		is_int(t->ngpus, 1, "VGA-class GPU without OS device found");
		is_int(t->nnuma, 3, "3 NUMA nodes, one CPU-less");
		is_int(cpuset_count(&t->numa[2].own), 0, "P#2 owns no CPU");
		hints(2, 3, "gpu-bind=none", NULL);
		is_str(val("HOROVOD_CPU_LIST"), "2-3",
		       "no GPU: local ranks spread over NUMA nodes with CPUs");
		hints(0, 1, NULL, NULL);
		is_str(val("NCCL_IB_DISABLE"), "1", "no HCA: NCCL_IB_DISABLE=1");
		is_str(val("UCX_TLS"), "tcp,sm,self,cuda_copy,cuda_ipc",
		       "no HCA: UCX over TCP");
		is_str(val("CUDA_VISIBLE_DEVICES"), "0", "the GPU");
	} else {
		skip(7, "cpu-less fixture missing");
	}
}

static void wr(const char *root, const char *rel, const char *text)
{
	char path[2048], cmd[2300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd) != 0)
		return;
	f = fopen(path, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
}

static void sysfs(void)
{
	const char *root = "spank-sysfs.tmp";
	char *pol[] = { "nccl_socket_ifname=ib0" };

	if (system("rm -rf spank-sysfs.tmp") != 0)
		diag("rm failed");
	/* RoCE port: slot 0 v1, 1 v2 link-local IPv6, 2 v1 IPv4, 3 v2 IPv4. */
	wr(root, "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gid_attrs/types/0",
	   "IB/RoCE v1\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gids/0",
	   "fe80:0000:0000:0000:0a42:a1ff:fe6f:1954\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gid_attrs/types/1",
	   "RoCE v2\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gids/1",
	   "fe80:0000:0000:0000:0a42:a1ff:fe6f:1954\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gid_attrs/types/2",
	   "IB/RoCE v1\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gids/2",
	   "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gid_attrs/types/3",
	   "RoCE v2\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gids/3",
	   "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
	wr(root, "class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3",
	   "ens1f0\n");
	/* A second, DOWN InfiniBand port. */
	wr(root, "class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
	wr(root, "class/infiniband/mlx5_1/ports/1/link_layer", "InfiniBand\n");
	wr(root, "class/net/lo/operstate", "unknown\n");
	wr(root, "class/net/lo/type", "772\n");
	wr(root, "class/net/docker0/operstate", "up\n");
	wr(root, "class/net/docker0/type", "1\n");
	wr(root, "class/net/virbr0/operstate", "up\n");
	wr(root, "class/net/virbr0/type", "1\n");
	wr(root, "class/net/eth0/operstate", "up\n");
	wr(root, "class/net/eth0/type", "1\n");
	wr(root, "class/net/eth1/operstate", "down\n");
	wr(root, "class/net/eth1/type", "1\n");

	if (load("hwloc2-cpuless-numa-nohca.xml", root)) {
		skip(9, "cpu-less fixture missing");
		return;
	}
	is_int(t->nports, 2, "sysfs: 2 ports");
	hints(0, 1, "gpu-bind=none", NULL);
	is_str(val("NCCL_IB_HCA"), "=mlx5_0:1", "RoCE port chosen, DOWN one not");
	is_str(val("NCCL_IB_GID_INDEX"), "3", "RoCE v2 IPv4 GID index 3");
	hints(0, 1, "net=ib", NULL);
	is_str(val("NCCL_IB_DISABLE"), "1", "net=ib: only a DOWN IB port");
	is_str(val("NCCL_SOCKET_IFNAME"), "=eth0",
	       "socket interface: eth0, never lo/docker0/virbr0/down eth1");
	is_str(val("UCX_NET_DEVICES"), "eth0", "UCX over eth0");
	is_str(val("GLOO_SOCKET_IFNAME"), "eth0",
	       "torch.distributed's gloo over eth0 too");
	hints(0, 1, "net=tcp", NULL);
	is_str(val("NCCL_IB_DISABLE"), "1", "net=tcp");
	ok(cfg_parse(1, pol, &cfg, err, sizeof(err)) == 0 &&
	       hints(0, 1, "net=tcp", NULL) == 0 &&
	       strcmp(val("NCCL_SOCKET_IFNAME"), "ib0") == 0,
	   "admin nccl_socket_ifname= pins the value");
	ok(!val("GLOO_SOCKET_IFNAME") && h->nnotes > 0 &&
	       strstr(h->notes[h->nnotes - 1], "GLOO_SOCKET_IFNAME left unset"),
	   "... a prefix this node has no interface for is not gloo's: %s",
	   h->nnotes ? h->notes[h->nnotes - 1] : "no note");
	{
		char *exact[] = { "nccl_socket_ifname==eth0,eth1" };
		char *plain[] = { "nccl_socket_ifname=eth0" };
		char *excl[] = { "nccl_socket_ifname=^docker" };

		cfg_init(&cfg);
		ok(cfg_parse(1, exact, &cfg, err, sizeof(err)) == 0 &&
		       hints(0, 1, "net=tcp", NULL) == 0,
		   "nccl_socket_ifname==eth0,eth1");
		is_str(val("GLOO_SOCKET_IFNAME"), "eth0,eth1",
		       "... gloo gets the exact list without '='");
		cfg_init(&cfg);
		ok(cfg_parse(1, plain, &cfg, err, sizeof(err)) == 0 &&
		       hints(0, 1, "net=tcp", NULL) == 0,
		   "nccl_socket_ifname=eth0");
		is_str(val("GLOO_SOCKET_IFNAME"), "eth0",
		       "... a name this node has carries over");
		cfg_init(&cfg);
		ok(cfg_parse(1, excl, &cfg, err, sizeof(err)) == 0 &&
		       hints(0, 1, "net=tcp", NULL) == 0 &&
		       !val("GLOO_SOCKET_IFNAME"),
		   "nccl_socket_ifname=^docker: no GLOO_SOCKET_IFNAME");
	}
	cfg_init(&cfg);
	if (system("rm -rf spank-sysfs.tmp/class/net/eth0") != 0)
		diag("rm failed");
	load("hwloc2-cpuless-numa-nohca.xml", root);
	hints(0, 1, "net=tcp", NULL);
	ok(!val("NCCL_SOCKET_IFNAME"), "only lo/docker/virbr: no ifname");
	if (system("rm -rf spank-sysfs.tmp") != 0)
		diag("rm failed");
}

/* MASTER_ADDR and MASTER_PORT (layout_master and its parts). */
static void master(void)
{
	struct layout l;
	unsigned port = 0, bad = 0, lo = 65535, hi = 0;

	/* The derived port (layout.h): any 32 consecutive jobs with step
	 * ids below 331 all apart (the old job * 31 + step had job 101 step
	 * 0 on job 100 step 31), and the steps of one job apart. */
	static unsigned char used[16000];

	memset(used, 0, sizeof(used));
	for (unsigned long j = 4100; j < 4132; j++)
		for (unsigned long s = 0; s < 331; s++) {
			unsigned p = layout_master_port(j, s);

			bad += p < 15000 || p > 30999 || used[p - 15000]++;
			lo = p < lo ? p : lo;
			hi = p > hi ? p : hi;
		}
	is_int((int)bad, 0,
	       "derived ports: 32 consecutive jobs x steps 0-330 all apart");
	memset(used, 0, sizeof(used));
	bad = 0;
	for (unsigned long s = 0; s < 16000; s++)
		bad += used[layout_master_port(77, s) - 15000]++ != 0;
	is_int((int)bad, 0, "derived ports: 16000 steps of one job all apart");
	ok(lo >= 15000 && hi <= 30999, "derived ports in 15000-30999 (%u-%u)",
	   lo, hi);
	ok(layout_master_port(4294967295UL, 4294967290UL) <= 30999,
	   "largest ids stay in range");

	ok(layout_resv_port("12000-12004", &port) == 0 && port == 12004,
	   "resv ports 12000-12004 -> the last, 12004");
	ok(layout_resv_port("12000,12003-12005", &port) == 0 && port == 12005,
	   "resv ports 12000,12003-12005 -> 12005");
	ok(layout_resv_port("12000", &port) == 0 && port == 12000,
	   "a single reserved port");
	ok(layout_resv_port("", &port) && layout_resv_port("12000-", &port) &&
		   layout_resv_port("12005-12000", &port) &&
		   layout_resv_port("70000", &port) &&
		   layout_resv_port("1,,2", &port) &&
		   layout_resv_port("0", &port) && layout_resv_port("a", &port),
	   "malformed reserved ports refused");

	ok(layout_addr_ok("10.1.2.3") && layout_addr_ok("fe80::1%eth0") &&
		   layout_addr_ok("node1-ib.cluster"),
	   "addresses and host names accepted");
	ok(!layout_addr_ok("") && !layout_addr_ok("-x") &&
		   !layout_addr_ok("a b") && !layout_addr_ok("a;b") &&
		   !layout_addr_ok("a/b") && !layout_addr_ok(NULL),
	   "others refused");

	memset(&l, 0, sizeof(l));
	strcpy(l.hostname, "n7");
	l.job_id = 42;
	l.step_id = 3;
	layout_master(&l, "n[07-08]", "n08=10.0.0.8", NULL);
	ok(strcmp(l.master_addr, "10.0.0.8") == 0 &&
		   strcmp(l.master_node, "n08") == 0 &&
		   l.master_addr_from == LAYOUT_ADDR_NODEADDR,
	   "srun's NODE=ADDR: MASTER_ADDR %s (node %s)", l.master_addr,
	   l.master_node);
	ok(l.master_port == layout_master_port(42, 3) &&
		   l.master_port_from == LAYOUT_PORT_DERIVED,
	   "no reserved ports: derived %u", l.master_port);
	layout_master(&l, "n[07-08]", "garbage", "20001-20003");
	ok(strcmp(l.master_addr, "n07") == 0 &&
		   l.master_addr_from == LAYOUT_ADDR_NAME,
	   "no usable hand-over: the first node's name (%s)", l.master_addr);
	ok(l.master_port == 20003 && l.master_port_from == LAYOUT_PORT_RESERVED,
	   "reserved ports: the last one (%u)", l.master_port);
	layout_master(&l, "n[07-08]", "n08=a b", "x");
	ok(strcmp(l.master_addr, "n07") == 0 &&
		   l.master_port_from == LAYOUT_PORT_DERIVED,
	   "a bad address and bad reserved ports count as none");
	layout_master(&l, NULL, NULL, NULL);
	ok(strcmp(l.master_addr, "n7") == 0, "no node list: this host");

	{
		char *env[] = { "MASTER_ADDR=mine", NULL };
		struct opt o;

		opt_init(&o);
		layout(&l, 0, 1);
		layout_master(&l, "n[1-2]", "n1=192.0.2.1", "20001-20002");
		ok(hints_compute(t, &l, &o, NULL, &cfg, h, err,
				 sizeof(err)) == 0,
		   "hints with a NodeAddr and reserved ports");
		is_str(val("MASTER_ADDR"), "192.0.2.1", "MASTER_ADDR");
		ok(strstr(why("MASTER_ADDR"), "NodeAddr of n1") != NULL,
		   "... says it is n1's NodeAddr: %s", why("MASTER_ADDR"));
		is_str(val("MASTER_PORT"), "20002", "MASTER_PORT");
		ok(strstr(why("MASTER_PORT"),
			  "SLURM_STEP_RESV_PORTS=20001-20002") != NULL,
		   "... says Slurm reserved it: %s", why("MASTER_PORT"));
		hints_compute(t, &l, &o, env, &cfg, h, err, sizeof(err));
		ok(hints_find(h, "MASTER_ADDR")->action == HINT_KEPT &&
			   strcmp(val("MASTER_ADDR"), "mine") == 0,
		   "a MASTER_ADDR the user exported is kept");
	}
}

static void layouts(void)
{
	unsigned c[16], n, cr, cs;
	char host[64];

	ok(layout_tasks_per_node("2(x2)", c, 16, &n) == 0 && n == 2 &&
	       c[0] == 2 && c[1] == 2,
	   "tasks per node 2(x2)");
	ok(layout_tasks_per_node("2,1", c, 16, &n) == 0 && n == 2 && c[1] == 1,
	   "tasks per node 2,1");
	ok(layout_tasks_per_node("3(x2),1", c, 16, &n) == 0 && n == 3,
	   "tasks per node 3(x2),1");
	ok(layout_tasks_per_node("2(x", c, 16, &n) == -1, "bad list");
	ok(layout_tasks_per_node("1(x99)", c, 16, &n) == -1, "too many");
	ok(layout_tasks_per_node("", c, 16, &n) == -1, "empty");
	/* -n3 on 2 nodes: 2,1.  Local rank 1 exists on node 0 only. */
	layout_tasks_per_node("2,1", c, 16, &n);
	ok(layout_cross(c, n, 0, 0, &cr, &cs) == 0 && cr == 0 && cs == 2,
	   "-n3: node 0 local 0 -> cross 0/2");
	ok(layout_cross(c, n, 1, 0, &cr, &cs) == 0 && cr == 1 && cs == 2,
	   "-n3: node 1 local 0 -> cross 1/2");
	ok(layout_cross(c, n, 0, 1, &cr, &cs) == 0 && cr == 0 && cs == 1,
	   "-n3: node 0 local 1 -> cross 0/1");
	ok(layout_cross(c, n, 1, 1, &cr, &cs) == -1, "no local 1 on node 1");
	ok(layout_first_host("n[01-04,7],m1", host, sizeof(host)) == 0 &&
	       strcmp(host, "n01") == 0,
	   "first host n01");
	ok(layout_first_host("rack[1-2]-n[3-4]", host, sizeof(host)) == 0 &&
	       strcmp(host, "rack1-n3") == 0,
	   "first host rack1-n3");
	ok(layout_first_host("node1", host, sizeof(host)) == 0 &&
	       strcmp(host, "node1") == 0,
	   "first host plain");
	ok(layout_first_host("n[1-2", host, sizeof(host)) == -1,
	   "unclosed bracket refused");
	ok(layout_master_port(42, 0) >= 15000 &&
	       layout_master_port(42, 0) <= 30999 &&
	       layout_master_port(42, 0) != layout_master_port(42, 1),
	   "master port in range, per step");
	master();
}

int main(void)
{
	const char *src = getenv("top_srcdir");

	snprintf(dir, sizeof(dir), "%s/tests/spank", src ? src : "..");
	t = calloc(1, sizeof(*t));
	h = calloc(1, sizeof(*h));
	if (!t || !h)
		return 1;
	cfg_init(&cfg);
	fixtures();
	hwloc1_and_cpuless();
	sysfs();
	slurm_gpus();
	user_and_force();
	roots_env();
	elastic_env();
	knobs();
	layouts();
	free(t);
	free(h);
	return done_testing();
}
