/*
 * place.c - where a task runs: its GPU, its network port or interface, its
 * CPUs, chosen on the node's topology (see place.h).
 *
 * GPU: the i-th of those Slurm gave the step, round-robin.  Slurm itself
 * sets CUDA_VISIBLE_DEVICES when it allocates GPUs (with SLURM_STEP_GPUS or
 * SLURM_JOB_GPUS beside it): that value is Slurm's, not the user's, and is
 * narrowed to one GPU per local rank.  Its tokens are reused as they are
 * (local indices under ConstrainDevices, global ones otherwise), while the
 * physical GPU, for locality, comes from the global indices in
 * SLURM_STEP_GPUS.
 *
 * Network: the nearest ACTIVE port to that GPU, else to the task's CPUs,
 * else TCP over the best interface.  CPUs: the GPU's locality, else the
 * local ranks spread over the NUMA nodes with CPUs, always within the
 * task's allowed CPUs.
 */
#include "place.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
void place_gpu(struct record *c)
{
	const struct topo *t = c->t;
	const char *cvd = vars_getenv(c->env, "CUDA_VISIBLE_DEVICES");
	const char *sg = vars_getenv(c->env, "SLURM_STEP_GPUS");
	const char *src = "SLURM_STEP_GPUS";
	char tok[TOPO_MAX_GPUS][64], glob[TOPO_MAX_GPUS][64];
	int ntok, nglob, pick, phys;

	c->out->gpu = -1;
	if (t->ngpus == 0) {
		record_note(
		    c, "no NVIDIA GPU (PCI vendor 0x10de, class 0x0300/0x0302)"
		       " on this node: no GPU variables");
		return;
	}
	record_put(c, "CUDA_DEVICE_ORDER", "PCI_BUS_ID",
		   "number GPUs in PCI bus order, like nvidia-smi and this "
		   "plugin");
	if (!sg) {
		sg = vars_getenv(c->env, "SLURM_JOB_GPUS");
		src = "SLURM_JOB_GPUS";
	}
	if (cvd && !sg) {
		/* No Slurm GPU allocation beside it: the user's choice. */
		phys = small_index(cvd, t->ngpus);
		c->out->gpu = phys;
		record_put(c, "CUDA_VISIBLE_DEVICES", cvd,
			   "no GPUs allocated by Slurm");
		return;
	}
	if (c->o->gpu_bind == OPT_GPU_NONE) {
		record_note(
		    c, "gpu-bind=none: every GPU of the step stays visible");
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
		record_put(c, "CUDA_VISIBLE_DEVICES", tok[pick],
			   "local rank %u of %u gets GPU %d of the node's %d "
			   "(PCI %s)%s",
			   c->l->local_rank, c->l->local_size, pick, ntok,
			   phys >= 0 ? t->gpus[phys].busid : "?",
			   c->l->local_size > (unsigned)ntok ? ", round-robin"
							     : "");
	else
		record_put(c, "CUDA_VISIBLE_DEVICES", tok[pick],
			   "local rank %u of %u gets entry %d of the %d GPUs "
			   "Slurm gave the step (%s=%.32s; PCI %s)%s",
			   c->l->local_rank, c->l->local_size, pick, ntok, src,
			   sg, phys >= 0 ? t->gpus[phys].busid : "?",
			   c->l->local_size > (unsigned)ntok ? ", round-robin"
							     : "");
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

int place_port_for_gpu(const struct topo *t, int gpu, int net, char *why,
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

static const struct cpuset *task_cpus(struct record *c)
{
	return c->l->have_allowed ? &c->l->allowed : &c->t->all_cpus;
}

/* Without a GPU: the port whose locality holds most of the task's CPUs;
 * among equals the most local one; remaining ties by local rank. */
static int port_for_cpus(struct record *c, int net, char *why, size_t whylen)
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
static void admin_ifname(struct record *c)
{
	const char *v = c->cfg->nccl_socket_ifname;
	const char *names = v[0] == '=' ? v + 1 : v;
	int exact = v[0] == '=';

	record_put(c, "NCCL_SOCKET_IFNAME", v,
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
	record_put(c, "GLOO_SOCKET_IFNAME", names,
		   "torch.distributed's gloo over the admin's interface "
		   "(nccl_socket_ifname=)");
	return;
no_gloo:
	record_note(c,
		    "nccl_socket_ifname=%.64s is not a list of this node's "
		    "interfaces: GLOO_SOCKET_IFNAME left unset",
		    v);
}

static void tcp(struct record *c, const char *why, const char *tls)
{
	const struct topo *t = c->t;
	int i = pick_netif(t);
	char val[80];

	record_put(c, "NCCL_IB_DISABLE", "1", "%s", why);
	if (c->cfg->nccl_socket_ifname[0]) {
		admin_ifname(c);
	} else if (i >= 0) {
		snprintf(val, sizeof(val), "=%s", t->netifs[i].name);
		record_put(c, "NCCL_SOCKET_IFNAME", val,
			   "%s is up and %s (lo, docker*, virbr* are never "
			   "used)",
			   t->netifs[i].name,
			   t->netifs[i].primary
			       ? "carries the default route"
			       : "the best remaining interface");
		record_put(c, "UCX_NET_DEVICES", t->netifs[i].name,
			   "UCX and libhvd's TCP lane over the same "
			   "interface as NCCL");
		/* gloo would take the address the host name resolves to,
		 * which may be a loopback one (127.0.1.1 on Debian) or one
		 * of another interface. */
		record_put(c, "GLOO_SOCKET_IFNAME", t->netifs[i].name,
			   "torch.distributed's gloo over the same interface");
	} else {
		record_note(c,
			    "no usable network interface found (lo, docker*, "
			    "virbr* excluded): NCCL_SOCKET_IFNAME left unset");
	}
	record_put(c, "UCX_TLS", tls,
		   "no usable InfiniBand/RoCE port: TCP, shared "
		   "memory and self");
}

void place_network(struct record *c)
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

		record_put(c, "NCCL_IB_HCA", u,
			   "pinned by the admin (ib_hca=)");
		if (u[0] != '^')
			record_put(c, "UCX_NET_DEVICES",
				   u[0] == '=' ? u + 1 : u,
				   "pinned by the admin (ib_hca=)");
		record_put(c, "UCX_TLS", tls_ib,
			   "InfiniBand/RoCE verbs transports, "
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
		p = place_port_for_gpu(t, gpu, net, why, sizeof(why));
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
	record_put(c, "NCCL_IB_HCA", val, "%s", why);
	record_put(c, "UCX_NET_DEVICES", val + 1, "same port as NCCL_IB_HCA");
	if (t->ports[p].link == TOPO_LINK_ETH) {
		if (t->ports[p].gid_index >= 0)
			record_put_uint(
			    c, "NCCL_IB_GID_INDEX",
			    (unsigned long)t->ports[p].gid_index,
			    "%s:%d is RoCE; GID %d is its RoCE v2 IPv4 "
			    "address (sysfs gid_attrs)",
			    t->ports[p].dev, t->ports[p].port,
			    t->ports[p].gid_index);
		else
			record_note(
			    c,
			    "%s:%d is RoCE but has no RoCE v2 IPv4 GID in "
			    "sysfs: NCCL_IB_GID_INDEX left to NCCL",
			    t->ports[p].dev, t->ports[p].port);
	}
	record_put(c, "UCX_TLS", tls_ib,
		   "InfiniBand/RoCE verbs transports, shared memory and self%s",
		   hasgpu ? ", CUDA copies" : "");
	if (c->cfg->nccl_socket_ifname[0])
		admin_ifname(c);
}

void place_cpus(struct record *c)
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
				record_printf(where + wl, sizeof(where) - wl,
					      " NUMA P#%d",
					      t->numa[i].os_index);
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
	record_put(c, "HOROVOD_CPU_LIST", list,
		   "CPUs of %s%s, within the task's "
		   "allowed CPUs%s",
		   gpu >= 0 ? "its GPU's locality, " : "", where,
		   c->out->bind ? "; the task is bound to them (cpu-bind=numa)"
				: "; a hint only (cpu-bind=none)");
}
