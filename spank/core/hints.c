/*
 * hints.c - the environment of one task (see hints.h).
 *
 * Order of decisions: ranks; GPU (the i-th of those Slurm gave the step,
 * round-robin); network (nearest ACTIVE port to that GPU, else to the
 * task's CPUs, else TCP); CPU hint; runtime knobs.  Every value is checked
 * against the task's environment last, in put(): a variable the user set is
 * kept unless the admin forces it.
 *
 * Slurm itself sets CUDA_VISIBLE_DEVICES when it allocates GPUs (with
 * SLURM_STEP_GPUS or SLURM_JOB_GPUS beside it): that value is Slurm's, not
 * the user's, and is narrowed to one GPU per local rank.  Its tokens are
 * reused as they are (local indices under ConstrainDevices, global ones
 * otherwise), while the physical GPU, for locality, comes from the global
 * indices in SLURM_STEP_GPUS.
 */
#include "hints.h"
#include "vars.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct hint *hints_find(const struct hints *h, const char *name)
{
	for (int i = 0; i < h->n; i++)
		if (strcmp(h->h[i].name, name) == 0)
			return &h->h[i];
	return NULL;
}

struct ctx {
	const struct topo *t;
	const struct layout *l;
	const struct opt *o;
	char *const *env;
	const struct cfg *cfg;
	struct hints *out;
	int slurms; /* the variable in env is Slurm's, not the user's */
};

/* snprintf where a cut message is fine (reasons are bounded on purpose). */
static void bprintf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void bprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void put(struct ctx *c, const char *name, const char *value,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Record a hint, applying the user-set and force rules. */
static void put(struct ctx *c, const char *name, const char *value,
		const char *fmt, ...)
{
	struct hints *out = c->out;
	struct hint *h;
	const char *user = c->slurms ? NULL : vars_getenv(c->env, name);
	char why[HINTS_WHY_LEN];
	va_list ap;

	if (out->n >= HINTS_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	h = &out->h[out->n++];
	snprintf(h->name, sizeof(h->name), "%s", name);
	if (user && !cfg_forced(c->cfg, name)) {
		h->action = HINT_KEPT;
		snprintf(h->value, sizeof(h->value), "%s", user);
		bprintf(h->why, sizeof(h->why),
			 "set by the user, kept (the plugin would set %.64s: "
			 "%s)",
			 value, why);
		return;
	}
	h->action = user ? HINT_FORCED : HINT_SET;
	snprintf(h->value, sizeof(h->value), "%s", value);
	if (user)
		bprintf(h->why, sizeof(h->why),
			 "forced by the admin over the user's %.64s: %s", user,
			 why);
	else
		snprintf(h->why, sizeof(h->why), "%s", why);
}

static void note(struct ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->out->nnotes >= HINTS_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(c->out->notes[c->out->nnotes++], HINTS_WHY_LEN, fmt, ap);
	va_end(ap);
}

static void put_uint(struct ctx *c, const char *name, unsigned long v,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void put_uint(struct ctx *c, const char *name, unsigned long v,
		     const char *fmt, ...)
{
	char val[24], why[HINTS_WHY_LEN];
	va_list ap;

	snprintf(val, sizeof(val), "%lu", v);
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	put(c, name, val, "%s", why);
}

static void ranks(struct ctx *c)
{
	const struct layout *l = c->l;

	put_uint(c, "HOROVOD_RANK", l->rank, "global task id (SLURM_PROCID)");
	put_uint(c, "HOROVOD_SIZE", l->size, "tasks in the step");
	put_uint(c, "HOROVOD_LOCAL_RANK", l->local_rank,
		 "task id on this node (SLURM_LOCALID)");
	put_uint(c, "HOROVOD_LOCAL_SIZE", l->local_size,
		 "tasks of the step on this node");
	put_uint(c, "HOROVOD_CROSS_RANK", l->cross_rank,
		 "this node's place among the %u nodes with a local rank %u",
		 l->cross_size, l->local_rank);
	put_uint(c, "HOROVOD_CROSS_SIZE", l->cross_size,
		 "nodes with a local rank %u", l->local_rank);
	if (l->hostname[0])
		put(c, "HOROVOD_HOSTNAME", l->hostname, "this node");
	put_uint(c, "RANK", l->rank, "PyTorch name of HOROVOD_RANK");
	put_uint(c, "WORLD_SIZE", l->size, "PyTorch name of HOROVOD_SIZE");
	put_uint(c, "LOCAL_RANK", l->local_rank,
		 "PyTorch name of HOROVOD_LOCAL_RANK");
	put_uint(c, "LOCAL_WORLD_SIZE", l->local_size,
		 "PyTorch name of HOROVOD_LOCAL_SIZE");
	if (l->master_addr[0] && l->master_addr_from == LAYOUT_ADDR_NODEADDR)
		put(c, "MASTER_ADDR", l->master_addr,
		    "NodeAddr of %.64s, which runs rank 0 and so "
		    "torch.distributed's store (looked up by srun)",
		    l->master_node);
	else if (l->master_addr[0])
		put(c, "MASTER_ADDR", l->master_addr,
		    "name of the first node of the step (srun handed over no "
		    "NodeAddr for it): it must resolve on every node");
	if (l->master_port && l->master_port_from == LAYOUT_PORT_RESERVED)
		put_uint(c, "MASTER_PORT", l->master_port,
			 "the last of the ports Slurm reserved for this step "
			 "(SLURM_STEP_RESV_PORTS=%s): no other running step "
			 "has it",
			 l->resv_ports);
	else if (l->master_port)
		put_uint(c, "MASTER_PORT", l->master_port,
			 "15000 + (job id * 9889 + step id) mod 16000: "
			 "differs between the steps of the job; unique among "
			 "all steps only with Slurm's MpiParams=ports=");
}

/* Split "a,b,c" into at most max tokens of at most 63 characters. */
static int split(const char *s, char tok[][64], int max)
{
	int n = 0;

	while (s && *s && n < max) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);

		if (l > 0 && l < 64) {
			memcpy(tok[n], s, l);
			tok[n++][l] = '\0';
		}
		if (!e)
			break;
		s = e + 1;
	}
	return n;
}

static int small_index(const char *s, int limit)
{
	char *end;
	long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	v = strtol(s, &end, 10);
	return *end || v >= limit ? -1 : (int)v;
}

/* Choose this task's GPU; sets out->gpu (the physical one, for locality). */
static void gpus(struct ctx *c)
{
	const struct topo *t = c->t;
	const char *cvd = vars_getenv(c->env, "CUDA_VISIBLE_DEVICES");
	const char *sg = vars_getenv(c->env, "SLURM_STEP_GPUS");
	const char *src = "SLURM_STEP_GPUS";
	char tok[TOPO_MAX_GPUS][64], glob[TOPO_MAX_GPUS][64];
	int ntok, nglob, pick, phys;

	c->out->gpu = -1;
	if (t->ngpus == 0) {
		note(c, "no NVIDIA GPU (PCI vendor 0x10de, class 0x0300/0x0302)"
			" on this node: no GPU variables");
		return;
	}
	put(c, "CUDA_DEVICE_ORDER", "PCI_BUS_ID",
	    "number GPUs in PCI bus order, like nvidia-smi and this plugin");
	if (!sg) {
		sg = vars_getenv(c->env, "SLURM_JOB_GPUS");
		src = "SLURM_JOB_GPUS";
	}
	if (cvd && !sg) {
		/* No Slurm GPU allocation beside it: the user's choice. */
		phys = small_index(cvd, t->ngpus);
		c->out->gpu = phys;
		put(c, "CUDA_VISIBLE_DEVICES", cvd,
		    "no GPUs allocated by Slurm");
		return;
	}
	if (c->o->gpu_bind == OPT_GPU_NONE) {
		note(c, "gpu-bind=none: every GPU of the step stays visible");
		return;
	}
	nglob = sg ? split(sg, glob, TOPO_MAX_GPUS) : 0;
	ntok = cvd ? split(cvd, tok, TOPO_MAX_GPUS) : 0;
	if (ntok == 0 && nglob > 0) {
		memcpy(tok, glob, sizeof(glob[0]) * (size_t)nglob);
		ntok = nglob;
	}
	if (ntok == 0) {
		/* No GPU gres at all: Slurm does not restrict GPUs. */
		for (int i = 0; i < t->ngpus; i++)
			snprintf(tok[i], sizeof(tok[i]), "%d", i);
		ntok = t->ngpus;
		src = NULL;
	}
	pick = (int)(c->l->local_rank % (unsigned)ntok);
	if (nglob == ntok)
		phys = small_index(glob[pick], t->ngpus);
	else if (!src)
		phys = pick;
	else
		phys = small_index(tok[pick], t->ngpus);
	c->out->gpu = phys;
	c->slurms = 1; /* narrow Slurm's list, it is not the user's */
	if (!src)
		put(c, "CUDA_VISIBLE_DEVICES", tok[pick],
		    "local rank %u of %u gets GPU %d of the node's %d "
		    "(PCI %s)%s",
		    c->l->local_rank, c->l->local_size, pick, ntok,
		    phys >= 0 ? t->gpus[phys].busid : "?",
		    c->l->local_size > (unsigned)ntok ? ", round-robin" : "");
	else
		put(c, "CUDA_VISIBLE_DEVICES", tok[pick],
		    "local rank %u of %u gets entry %d of the %d GPUs Slurm "
		    "gave the step (%s=%.32s; PCI %s)%s",
		    c->l->local_rank, c->l->local_size, pick, ntok, src, sg,
		    phys >= 0 ? t->gpus[phys].busid : "?",
		    c->l->local_size > (unsigned)ntok ? ", round-robin" : "");
	c->slurms = 0;
}

static int port_ok(const struct topo_port *p, int net)
{
	if (p->state != 4)
		return 0;
	if (net == OPT_NET_IB)
		return p->link != TOPO_LINK_ETH;
	if (net == OPT_NET_ROCE)
		return p->link == TOPO_LINK_ETH;
	return net != OPT_NET_TCP;
}

/* Ports nearest to GPU g: fills set[] (ascending), returns the count and
 * the common ancestor's depth in *depth. */
static int nearest_ports(const struct topo *t, int g, int net, int *set,
			 int *depth, int *anc)
{
	int n = 0, best = -2;

	for (int p = 0; p < t->nports; p++) {
		int a, d;

		if (!port_ok(&t->ports[p], net))
			continue;
		a = topo_common_ancestor(t, t->gpus[g].node, t->ports[p].node);
		d = a >= 0 ? t->nodes[a].depth : -1;
		if (d > best) {
			best = d;
			n = 0;
			*anc = a;
		}
		if (d == best)
			set[n++] = p;
	}
	*depth = best;
	return n;
}

int hints_port_for_gpu(const struct topo *t, int gpu, int net, char *why,
		       size_t whylen)
{
	int set[TOPO_MAX_PORTS], other[TOPO_MAX_PORTS];
	int n, depth, anc = -1, k = 0, pick;
	char where[96];

	if (gpu < 0 || gpu >= t->ngpus)
		return -1;
	n = nearest_ports(t, gpu, net, set, &depth, &anc);
	if (n == 0)
		return -1;
	/* GPUs before this one with the same nearest set take turns. */
	for (int g = 0; g < gpu; g++) {
		int d2, a2, m = nearest_ports(t, g, net, other, &d2, &a2);

		if (m == n && memcmp(set, other, sizeof(int) * (size_t)n) == 0)
			k++;
	}
	pick = set[k % n];
	topo_describe(t, anc, where, sizeof(where));
	if (anc >= 0 && (t->nodes[anc].kind == TOPO_PCISWITCH ||
			 t->nodes[anc].kind == TOPO_HOSTBRIDGE ||
			 t->nodes[anc].kind == TOPO_PCIDEV))
		snprintf(why, whylen, "%s:%d shares %s with GPU %s",
			 t->ports[pick].dev, t->ports[pick].port, where,
			 t->gpus[gpu].busid);
	else
		snprintf(why, whylen,
			 "%s:%d is nearest to GPU %s: both under %s",
			 t->ports[pick].dev, t->ports[pick].port,
			 t->gpus[gpu].busid, where);
	if (n > 1) {
		size_t l = strlen(why);

		snprintf(why + l, whylen - l,
			 "; %d ACTIVE ports equally near, taken in turn by "
			 "the GPUs that share them",
			 n);
	}
	return pick;
}

static const struct cpuset *task_cpus(struct ctx *c)
{
	return c->l->have_allowed ? &c->l->allowed : &c->t->all_cpus;
}

/* Without a GPU: the port whose locality holds most of the task's CPUs;
 * among equals the most local one; remaining ties by local rank. */
static int port_for_cpus(struct ctx *c, int net, char *why, size_t whylen)
{
	const struct topo *t = c->t;
	int set[TOPO_MAX_PORTS], n = 0, bs = -1, bl = 0, pick;
	char where[96];

	for (int p = 0; p < t->nports; p++) {
		struct cpuset x;
		int s, lsz;

		if (!port_ok(&t->ports[p], net))
			continue;
		if (t->ports[p].locality >= 0) {
			cpuset_and(&x, task_cpus(c),
				   &t->node_cpus[t->ports[p].locality]);
			s = cpuset_count(&x);
			lsz = cpuset_count(&t->node_cpus[t->ports[p].locality]);
		} else {
			s = 0;
			lsz = CPUSET_MAX_CPUS;
		}
		if (s > bs || (s == bs && lsz < bl)) {
			bs = s;
			bl = lsz;
			n = 0;
		}
		if (s == bs && lsz == bl)
			set[n++] = p;
	}
	if (n == 0)
		return -1;
	pick = set[c->l->local_rank % (unsigned)n];
	topo_describe(t, t->ports[pick].locality, where, sizeof(where));
	snprintf(why, whylen,
		 "no GPU for this task: %s:%d is local to %d of its CPUs (%s)%s",
		 t->ports[pick].dev, t->ports[pick].port, bs, where,
		 n > 1 ? "; equally near ports taken in turn by local rank"
		       : "");
	return pick;
}

/* The interface NCCL's sockets should use when there is no usable port. */
static int pick_netif(const struct topo *t)
{
	int best = -1, bscore = -1;

	for (int i = 0; i < t->nnetifs; i++) {
		const struct topo_netif *n = &t->netifs[i];
		int s;

		if (!n->up || n->loopback || strcmp(n->name, "lo") == 0 ||
		    strncmp(n->name, "docker", 6) == 0 ||
		    strncmp(n->name, "virbr", 5) == 0)
			continue;
		s = n->primary ? 3 : strncmp(n->name, "ib", 2) == 0 ? 2 : 1;
		if (s > bscore) {
			bscore = s;
			best = i;
		}
	}
	return best;
}

/* Does this node have an interface called exactly `name` (len bytes)? */
static int has_netif(const struct topo *t, const char *name, size_t len)
{
	for (int i = 0; i < t->nnetifs; i++)
		if (strlen(t->netifs[i].name) == len &&
		    strncmp(t->netifs[i].name, name, len) == 0)
			return 1;
	return 0;
}

/*
 * The admin's nccl_socket_ifname=, for NCCL and for torch.distributed's
 * gloo, which takes only exact interface names: "=eth0,eth1" and names of
 * this node's interfaces carry over; a prefix NCCL would match ("ib") or an
 * exclusion ("^docker") does not, and GLOO_SOCKET_IFNAME stays unset.
 */
static void admin_ifname(struct ctx *c)
{
	const char *v = c->cfg->nccl_socket_ifname;
	const char *names = v[0] == '=' ? v + 1 : v;
	int exact = v[0] == '=';

	put(c, "NCCL_SOCKET_IFNAME", v,
	    "pinned by the admin (nccl_socket_ifname=)");
	if (v[0] == '^')
		goto no_gloo;
	for (const char *p = names; *p;) {
		size_t l = strcspn(p, ",");

		if (l == 0 || (!exact && !has_netif(c->t, p, l)))
			goto no_gloo;
		p += l;
		if (*p)
			p++;
	}
	put(c, "GLOO_SOCKET_IFNAME", names,
	    "torch.distributed's gloo over the admin's interface "
	    "(nccl_socket_ifname=)");
	return;
no_gloo:
	note(c, "nccl_socket_ifname=%.64s is not a list of this node's "
		"interfaces: GLOO_SOCKET_IFNAME left unset",
	     v);
}

static void tcp(struct ctx *c, const char *why, const char *tls)
{
	const struct topo *t = c->t;
	int i = pick_netif(t);
	char val[80];

	put(c, "NCCL_IB_DISABLE", "1", "%s", why);
	if (c->cfg->nccl_socket_ifname[0]) {
		admin_ifname(c);
	} else if (i >= 0) {
		snprintf(val, sizeof(val), "=%s", t->netifs[i].name);
		put(c, "NCCL_SOCKET_IFNAME", val,
		    "%s is up and %s (lo, docker*, virbr* are never used)",
		    t->netifs[i].name,
		    t->netifs[i].primary ? "carries the default route"
					 : "the best remaining interface");
		put(c, "UCX_NET_DEVICES", t->netifs[i].name,
		    "TCP over the same interface as NCCL");
		/* gloo would take the address the host name resolves to,
		 * which may be a loopback one (127.0.1.1 on Debian) or one
		 * of another interface. */
		put(c, "GLOO_SOCKET_IFNAME", t->netifs[i].name,
		    "torch.distributed's gloo over the same interface");
	} else {
		note(c, "no usable network interface found (lo, docker*, "
			"virbr* excluded): NCCL_SOCKET_IFNAME left unset");
	}
	put(c, "UCX_TLS", tls, "no usable InfiniBand/RoCE port: TCP, shared "
			       "memory and self");
}

static void network(struct ctx *c)
{
	const struct topo *t = c->t;
	int net = c->o->net, p = -1, gpu = c->out->gpu;
	int hasgpu = gpu >= 0;
	char why[HINTS_WHY_LEN], val[64], down[128] = "";
	const char *tls_ib = hasgpu ? "rc,ud,sm,self,cuda_copy,cuda_ipc"
				    : "rc,ud,sm,self";
	const char *tls_tcp = hasgpu ? "tcp,sm,self,cuda_copy,cuda_ipc"
				     : "tcp,sm,self";

	c->out->port = -1;
	if (c->cfg->ib_hca[0] && net != OPT_NET_TCP) {
		const char *u = c->cfg->ib_hca;

		put(c, "NCCL_IB_HCA", u, "pinned by the admin (ib_hca=)");
		if (u[0] != '^')
			put(c, "UCX_NET_DEVICES", u[0] == '=' ? u + 1 : u,
			    "pinned by the admin (ib_hca=)");
		put(c, "UCX_TLS", tls_ib, "InfiniBand/RoCE verbs transports, "
					  "shared memory and self");
		if (c->cfg->nccl_socket_ifname[0])
			admin_ifname(c);
		return;
	}
	if (net == OPT_NET_TCP) {
		tcp(c, "net=tcp: NCCL uses sockets", tls_tcp);
		return;
	}
	if (hasgpu)
		p = hints_port_for_gpu(t, gpu, net, why, sizeof(why));
	if (p < 0)
		p = port_for_cpus(c, net, why, sizeof(why));
	if (p < 0) {
		size_t l = 0;

		for (int i = 0; i < t->nports && l < sizeof(down) - 40; i++) {
			const struct topo_port *pt = &t->ports[i];
			const char *st = pt->state != 4 ? "not ACTIVE"
					 : pt->link == TOPO_LINK_ETH
						 ? "is RoCE"
						 : "is InfiniBand";

			l += (size_t)snprintf(down + l, sizeof(down) - l,
					      "%s%s:%d %s", l ? ", " : "",
					      pt->dev, pt->port, st);
		}
		snprintf(why, sizeof(why), "no ACTIVE %s port%s%s%s",
			 net == OPT_NET_IB     ? "InfiniBand"
			 : net == OPT_NET_ROCE ? "RoCE"
					       : "InfiniBand or RoCE",
			 down[0] ? " (" : "", down, down[0] ? ")" : "");
		tcp(c, why, tls_tcp);
		return;
	}
	c->out->port = p;
	snprintf(val, sizeof(val), "=%s:%d", t->ports[p].dev, t->ports[p].port);
	put(c, "NCCL_IB_HCA", val, "%s", why);
	put(c, "UCX_NET_DEVICES", val + 1, "same port as NCCL_IB_HCA");
	if (t->ports[p].link == TOPO_LINK_ETH) {
		if (t->ports[p].gid_index >= 0)
			put_uint(c, "NCCL_IB_GID_INDEX",
				 (unsigned long)t->ports[p].gid_index,
				 "%s:%d is RoCE; GID %d is its RoCE v2 IPv4 "
				 "address (sysfs gid_attrs)",
				 t->ports[p].dev, t->ports[p].port,
				 t->ports[p].gid_index);
		else
			note(c, "%s:%d is RoCE but has no RoCE v2 IPv4 GID in "
				"sysfs: NCCL_IB_GID_INDEX left to NCCL",
			     t->ports[p].dev, t->ports[p].port);
	}
	put(c, "UCX_TLS", tls_ib,
	    "InfiniBand/RoCE verbs transports, shared memory and self%s",
	    hasgpu ? ", CUDA copies" : "");
	if (c->cfg->nccl_socket_ifname[0])
		admin_ifname(c);
}

static void cpus(struct ctx *c)
{
	const struct topo *t = c->t;
	const struct cpuset *allowed = task_cpus(c);
	struct cpuset x;
	char list[1024], where[96];
	int gpu = c->out->gpu;

	cpuset_zero(&x);
	if (gpu >= 0 && t->gpus[gpu].locality >= 0) {
		cpuset_and(&x, allowed, &t->node_cpus[t->gpus[gpu].locality]);
		topo_describe(t, t->gpus[gpu].locality, where, sizeof(where));
		/* Name the NUMA node(s) too: that is what users look for. */
		for (int i = 0; i < t->nnuma; i++) {
			size_t wl = strlen(where);

			if (cpuset_count(&t->numa[i].own) > 0 &&
			    cpuset_subset(&t->numa[i].own,
					  &t->node_cpus[t->gpus[gpu].locality]))
				bprintf(where + wl, sizeof(where) - wl,
					" NUMA P#%d", t->numa[i].os_index);
		}
	} else {
		int withcpu[TOPO_MAX_NUMA], n = 0, pick;

		/* CPU-less NUMA nodes (HBM, GPU memory) hold no task. */
		for (int i = 0; i < t->nnuma; i++) {
			cpuset_and(&x, allowed, &t->numa[i].own);
			if (cpuset_count(&x) > 0)
				withcpu[n++] = i;
		}
		cpuset_zero(&x);
		if (n > 0) {
			pick = withcpu[c->l->local_size
					       ? c->l->local_rank * (unsigned)n /
							 c->l->local_size
					       : 0];
			cpuset_and(&x, allowed, &t->numa[pick].own);
			snprintf(where, sizeof(where),
				 "NUMA node P#%d (local ranks spread over the "
				 "%d NUMA nodes with CPUs)",
				 t->numa[pick].os_index, n);
		}
	}
	if (cpuset_count(&x) == 0) {
		x = *allowed;
		snprintf(where, sizeof(where), "all the CPUs the task may use");
	}
	c->out->cpus = x;
	if (cpuset_format(&x, list, sizeof(list)))
		return;
	c->out->bind = c->o->cpu_bind == OPT_CPU_NUMA;
	put(c, "HOROVOD_CPU_LIST", list, "CPUs of %s%s, within the task's "
					 "allowed CPUs%s",
	    gpu >= 0 ? "its GPU's locality, " : "", where,
	    c->out->bind ? "; the task is bound to them (cpu-bind=numa)"
			 : "; a hint only (cpu-bind=none)");
}

/* "--horovod=KEY=..." or "admin default (default_KEY)" */
static void source(unsigned given, enum opt_key k, char *buf, size_t len)
{
	if (given & (1u << k))
		snprintf(buf, len, "from --horovod=%s", opt_key_name(k));
	else
		snprintf(buf, len, "admin default (default_%s)",
			 opt_key_name(k));
	for (char *p = strstr(buf, "default_"); p && *p; p++)
		if (*p == '-')
			*p = '_';
}

/*
 * The admin's ckpt_roots hold for the directory the task will use, and
 * that is the user's own HOROVOD_CHECKPOINT_DIR when one was exported and
 * not overridden by a forced plugin value: taken from the task's working
 * directory when relative, normalised with '..' refused, and compared
 * component-wise, like ckpt-dir.
 */
static int user_dir_in_roots(struct ctx *c, char *err, size_t errlen)
{
	const struct hint *hd = hints_find(c->out, "HOROVOD_CHECKPOINT_DIR");
	const char *v = vars_getenv(c->env, "HOROVOD_CHECKPOINT_DIR");
	const char *roots = c->cfg->ckpt_roots;
	char path[PATH_LEN], why[ERR_LEN];
	int n;

	if (!v || !*v || (hd && hd->action != HINT_KEPT))
		return 0;
	if (v[0] != '/' && !c->l->cwd[0]) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun) "
			 "is relative and the task's working directory is "
			 "unknown; the site allows checkpoints only under %s: "
			 "export an absolute directory under one of them, or "
			 "unset it",
			 v, roots);
		return -1;
	}
	n = v[0] == '/' ? snprintf(path, sizeof(path), "%s", v)
			: snprintf(path, sizeof(path), "%s/%s", c->l->cwd, v);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun) "
			 "is longer than %d bytes; export a shorter directory "
			 "under %s",
			 v, PATH_LEN - 1, roots);
		return -1;
	}
	if (path_normalise(path, why, sizeof(why))) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun): "
			 "%s; the site allows checkpoints only under %s: export "
			 "a directory under one of them, or unset it",
			 v, why, roots);
		return -1;
	}
	if (!path_under(path, roots)) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s%s%.200s (exported before "
			 "srun) is outside the directories the admin allows for "
			 "checkpoints (%s); unset it, or export a directory "
			 "under one of them",
			 v, v[0] == '/' ? "" : ", that is ",
			 v[0] == '/' ? "" : path, roots);
		return -1;
	}
	return 0;
}

static int knobs(struct ctx *c, char *err, size_t errlen)
{
	const struct cfg *cfg = c->cfg;
	const struct layout *l = c->l;
	struct opt eff = *c->o;
	char src[80], v[PATH_LEN], e[ERR_LEN];

	/* A forced variable takes the admin's default over the user's key. */
#define ADMIN(var, k)                                                          \
	do {                                                                   \
		if (cfg_forced(cfg, var) && (cfg->defaults.set & (1u << (k)))) \
			eff.given &= ~(1u << (k));                             \
	} while (0)
	ADMIN("HOROVOD_CHECKPOINT_EVERY", OPT_CKPT_EVERY);
	ADMIN("HOROVOD_FUSION_THRESHOLD", OPT_FUSION_MB);
	ADMIN("HOROVOD_CYCLE_TIME", OPT_CYCLE_MS);
	ADMIN("HOROVOD_CACHE_CAPACITY", OPT_CACHE);
	ADMIN("HOROVOD_STALL_CHECK_TIME_SECONDS", OPT_STALL_S);
	ADMIN("HOROVOD_LOG_LEVEL", OPT_LOG);
	ADMIN("HOROVOD_HIERARCHICAL_ALLREDUCE", OPT_HIERARCHICAL);
	ADMIN("HOROVOD_CHECKPOINT_KEEP", OPT_CKPT_KEEP);
	ADMIN("HOROVOD_CHECKPOINT_DIR", OPT_CKPT_DIR);
	ADMIN("HOROVOD_TIMELINE", OPT_TIMELINE);
#undef ADMIN
#define VAL(k, field) (eff.given & (1u << (k)) ? c->o->field : cfg->defaults.field)
#define IS(k) (c->o->set & (1u << (k)))
	if (IS(OPT_CKPT_DIR)) {
		source(eff.given, OPT_CKPT_DIR, src, sizeof(src));
		if (path_expand(VAL(OPT_CKPT_DIR, ckpt_dir), l->user, l->job_id,
				l->job_name, v, sizeof(v), e, sizeof(e))) {
			snprintf(err, errlen, "ckpt-dir: %s", e);
			return -1;
		}
		if (cfg->ckpt_roots[0] && !path_under(v, cfg->ckpt_roots)) {
			snprintf(err, errlen,
				 "ckpt-dir=%s is outside the directories the "
				 "admin allows for checkpoints (%s); choose a "
				 "directory under one of them",
				 v, cfg->ckpt_roots);
			return -1;
		}
		put(c, "HOROVOD_CHECKPOINT_DIR", v, "%s, expanded%s", src,
		    cfg->ckpt_roots[0] ? ", inside ckpt_roots" : "");
		if (hints_find(c->out, "HOROVOD_CHECKPOINT_DIR")->action !=
		    HINT_KEPT)
			snprintf(c->out->ckpt_dir, sizeof(c->out->ckpt_dir),
				 "%s", v);
	}
	if (cfg->ckpt_roots[0] && user_dir_in_roots(c, err, errlen))
		return -1;
	if (IS(OPT_CKPT_EVERY)) {
		source(eff.given, OPT_CKPT_EVERY, src, sizeof(src));
		put_uint(c, "HOROVOD_CHECKPOINT_EVERY",
			 VAL(OPT_CKPT_EVERY, ckpt_every), "%s (steps)", src);
	}
	if (IS(OPT_CKPT_KEEP)) {
		source(eff.given, OPT_CKPT_KEEP, src, sizeof(src));
		put_uint(c, "HOROVOD_CHECKPOINT_KEEP",
			 VAL(OPT_CKPT_KEEP, ckpt_keep), "%s", src);
	}
	if (IS(OPT_FUSION_MB)) {
		source(eff.given, OPT_FUSION_MB, src, sizeof(src));
		put_uint(c, "HOROVOD_FUSION_THRESHOLD",
			 VAL(OPT_FUSION_MB, fusion_mb) * 1048576UL,
			 "%s, in bytes", src);
	}
	if (IS(OPT_CYCLE_MS)) {
		source(eff.given, OPT_CYCLE_MS, src, sizeof(src));
		put(c, "HOROVOD_CYCLE_TIME", VAL(OPT_CYCLE_MS, cycle_ms),
		    "%s, in milliseconds", src);
	}
	if (IS(OPT_CACHE)) {
		source(eff.given, OPT_CACHE, src, sizeof(src));
		put_uint(c, "HOROVOD_CACHE_CAPACITY", VAL(OPT_CACHE, cache),
			 "%s", src);
	}
	if (IS(OPT_TIMELINE)) {
		source(eff.given, OPT_TIMELINE, src, sizeof(src));
		if (path_expand(VAL(OPT_TIMELINE, timeline), l->user, l->job_id,
				l->job_name, v, sizeof(v), e, sizeof(e))) {
			snprintf(err, errlen, "timeline: %s", e);
			return -1;
		}
		put(c, "HOROVOD_TIMELINE", v, "%s, expanded", src);
	}
	if (IS(OPT_HIERARCHICAL)) {
		source(eff.given, OPT_HIERARCHICAL, src, sizeof(src));
		put(c, "HOROVOD_HIERARCHICAL_ALLREDUCE",
		    VAL(OPT_HIERARCHICAL, hierarchical) ? "1" : "0", "%s", src);
	}
	if (IS(OPT_STALL_S)) {
		source(eff.given, OPT_STALL_S, src, sizeof(src));
		put_uint(c, "HOROVOD_STALL_CHECK_TIME_SECONDS",
			 VAL(OPT_STALL_S, stall_s), "%s", src);
	}
	if (IS(OPT_LOG)) {
		source(eff.given, OPT_LOG, src, sizeof(src));
		put(c, "HOROVOD_LOG_LEVEL", opt_log_name(VAL(OPT_LOG, log)),
		    "%s", src);
	}
#undef VAL
#undef IS
	return 0;
}

int hints_compute(const struct topo *t, const struct layout *l,
		  const struct opt *o, char *const *env, const struct cfg *cfg,
		  struct hints *out, char *err, size_t errlen)
{
	struct ctx c = { t, l, o, env, cfg, out, 0 };

	memset(out, 0, sizeof(*out));
	out->gpu = -1;
	out->port = -1;
	ranks(&c);
	gpus(&c);
	network(&c);
	cpus(&c);
	return knobs(&c, err, errlen);
}
