/*
 * hvd-topo - print, for each local rank of a node, every variable the
 * horovod SPANK plugin would set and why.  Same code as the plugin
 * (spank/core): topology, layout, options and policy in, hints out.
 *
 *   hvd-topo [--topology FILE.xml] [--local-size N] [--gpus LIST]
 *            [--sysfs DIR] [--horovod OPTS] [--policy 'k=v k=v'] [--env]
 *            [--json]
 */
#include "core/cfg.h"
#include "core/hints.h"
#include "core/layout.h"
#include "core/machine.h"
#include "core/opt.h"
#include "core/topo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hvd-topo [--topology FILE.xml] [--local-size N] "
		"[--gpus LIST]\n"
		"                [--sysfs DIR] [--horovod OPTS] "
		"[--policy 'k=v ...'] [--env] [--json]\n"
		"Prints, for each local rank, the variables the horovod SPANK "
		"plugin would set\non this node (or the node an hwloc XML file "
		"describes), and why.\n"
		"  --topology FILE  hwloc XML (lstopo --of xml) instead of this "
		"machine\n"
		"  --local-size N   tasks on the node (default: one per GPU, "
		"or 1)\n"
		"  --gpus LIST      GPUs Slurm gave the step, as in "
		"SLURM_STEP_GPUS (0,1)\n"
		"  --sysfs DIR      sysfs root for port state, link layer, "
		"RoCE GIDs, interfaces\n"
		"  --horovod OPTS   the --horovod option value "
		"(ckpt-every=100,net=ib)\n"
		"  --policy WORDS   plugstack.conf arguments, space "
		"separated\n"
		"  --env            take this shell's environment as the task's "
		"(user-set\n"
		"                   variables are then kept)\n"
		"  --json           {\"ranks\":[{\"local_rank\":0,\"env\":{...},"
		"\"why\":{...}}]}\n");
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static const char *action_name(enum hint_action a)
{
	return a == HINT_KEPT ? "kept" : a == HINT_FORCED ? "forced" : "set";
}

static void print_json_rank(const struct hints *h, unsigned lr, int last)
{
	printf("%s{\"local_rank\":%u,\"env\":{", lr ? "" : "", lr);
	for (int i = 0; i < h->n; i++) {
		printf("%s", i ? "," : "");
		json_str(h->h[i].name);
		putchar(':');
		json_str(h->h[i].value);
	}
	printf("},\"why\":{");
	for (int i = 0; i < h->n; i++) {
		printf("%s", i ? "," : "");
		json_str(h->h[i].name);
		putchar(':');
		json_str(h->h[i].why);
	}
	printf("},\"action\":{");
	for (int i = 0; i < h->n; i++) {
		printf("%s", i ? "," : "");
		json_str(h->h[i].name);
		printf(":\"%s\"", action_name(h->h[i].action));
	}
	printf("},\"notes\":[");
	for (int i = 0; i < h->nnotes; i++) {
		printf("%s", i ? "," : "");
		json_str(h->notes[i]);
	}
	printf("],\"bind\":%s}%s", h->bind ? "true" : "false", last ? "" : ",");
}

static void print_text_rank(const struct hints *h, unsigned lr)
{
	printf("local rank %u:\n", lr);
	for (int i = 0; i < h->n; i++)
		printf("  %s=%s\n      %s%s\n", h->h[i].name, h->h[i].value,
		       h->h[i].action == HINT_KEPT     ? "[kept] "
		       : h->h[i].action == HINT_FORCED ? "[forced] "
						       : "",
		       h->h[i].why);
	for (int i = 0; i < h->nnotes; i++)
		printf("  note: %s\n", h->notes[i]);
}

static void print_summary(const struct topo *t)
{
	int active = 0;

	for (int i = 0; i < t->nports; i++)
		active += t->ports[i].state == 4;
	printf("# %s: %d NVIDIA GPU%s, %d HCA port%s (%d ACTIVE), %d NUMA "
	       "node%s\n",
	       t->source, t->ngpus, t->ngpus == 1 ? "" : "s", t->nports,
	       t->nports == 1 ? "" : "s", active, t->nnuma,
	       t->nnuma == 1 ? "" : "s");
	for (int i = 0; i < t->ngpus; i++)
		printf("#   GPU %d: PCI %s [%04x:%04x] class %04x%s%s\n", i,
		       t->gpus[i].busid, t->gpus[i].vendor,
		       t->gpus[i].device_id, t->gpus[i].class_id,
		       t->gpus[i].osdevs[0] ? " " : "", t->gpus[i].osdevs);
	for (int i = 0; i < t->nports; i++)
		printf("#   port %s:%d state %d %s%s%s\n", t->ports[i].dev,
		       t->ports[i].port, t->ports[i].state,
		       t->ports[i].link == TOPO_LINK_ETH  ? "Ethernet (RoCE)"
		       : t->ports[i].link == TOPO_LINK_IB ? "InfiniBand"
							  : "link unknown",
		       t->ports[i].busid[0] ? " PCI " : "", t->ports[i].busid);
}

/* Split --policy "a=1 b=2" into words (in place). */
static int split_words(char *s, char **av, int max)
{
	int n = 0;

	for (char *tok = strtok(s, " \t"); tok && n < max;
	     tok = strtok(NULL, " \t"))
		av[n++] = tok;
	return n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "topology", required_argument, NULL, 't' },
		{ "local-size", required_argument, NULL, 'n' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "sysfs", required_argument, NULL, 's' },
		{ "horovod", required_argument, NULL, 'o' },
		{ "policy", required_argument, NULL, 'p' },
		{ "env", no_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *xml = NULL, *gpus = NULL, *sysfs = NULL, *opts = NULL;
	char *policy = NULL, *pav[64], err[512];
	int json = 0, useenv = 0, c, pac = 0, rc = 1;
	long nlocal = -1;
	struct topo *t;
	struct hints *h;
	struct cfg cfg;
	struct opt o;
	char **env = NULL;
	size_t nenv = 0;

	while ((c = getopt_long(argc, argv, "t:n:g:s:o:p:ejh", lo, NULL)) !=
	       -1) {
		switch (c) {
		case 't':
			xml = optarg;
			break;
		case 'n': {
			char *end;

			nlocal = strtol(optarg, &end, 10);
			if (*end || nlocal < 1 || nlocal > 1024) {
				fprintf(stderr,
					"hvd-topo: --local-size=%s: expected "
					"a number of tasks from 1 to 1024\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'g':
			gpus = optarg;
			break;
		case 's':
			sysfs = optarg;
			break;
		case 'o':
			opts = optarg;
			break;
		case 'p':
			policy = optarg;
			break;
		case 'e':
			useenv = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hvd-topo: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	cfg_init(&cfg);
	if (policy) {
		pac = split_words(policy, pav, 64);
		if (cfg_parse(pac, pav, &cfg, err, sizeof(err))) {
			fprintf(stderr, "hvd-topo: --policy: %s\n", err);
			return 2;
		}
	}
	o = cfg.defaults;
	if (opt_parse(opts, &o, err, sizeof(err))) {
		fprintf(stderr, "hvd-topo: %s\n", err);
		return 2;
	}
	t = calloc(1, sizeof(*t));
	h = calloc(1, sizeof(*h));
	if (!t || !h) {
		fprintf(stderr, "hvd-topo: out of memory\n");
		goto out;
	}
	if (machine_load(t, xml, sysfs, err, sizeof(err))) {
		fprintf(stderr, "hvd-topo: %s\n", err);
		goto out;
	}
	if (nlocal < 0)
		nlocal = t->ngpus > 0 ? t->ngpus : 1;

	/* The task environment: empty, or this shell's, plus the GPUs. */
	env = calloc(4 + (useenv ? 1024 : 0), sizeof(*env));
	if (!env)
		goto out;
	for (char **e = environ; useenv && e && *e && nenv < 1024; e++)
		if (!gpus || strncmp(*e, "SLURM_STEP_GPUS=", 16) != 0)
			env[nenv++] = *e;
	if (gpus) {
		static char sg[600];

		snprintf(sg, sizeof(sg), "SLURM_STEP_GPUS=%s", gpus);
		env[nenv++] = sg;
	}

	if (json)
		printf("{\"source\":");
	if (json)
		json_str(t->source);
	if (json)
		printf(",\"ranks\":[");
	else
		print_summary(t);
	for (long lr = 0; lr < nlocal; lr++) {
		struct layout l;

		memset(&l, 0, sizeof(l));
		l.rank = l.local_rank = (unsigned)lr;
		l.size = l.local_size = (unsigned)nlocal;
		l.cross_rank = 0;
		l.cross_size = 1;
		l.nnodes = 1;
		if (gethostname(l.hostname, sizeof(l.hostname) - 1))
			strcpy(l.hostname, "localhost");
		layout_master(&l, l.hostname, NULL, NULL);
		snprintf(l.user, sizeof(l.user), "%s",
			 getenv("USER") ? getenv("USER") : "user");
		strcpy(l.job_name, "hvd-topo");
		if (!getcwd(l.cwd, sizeof(l.cwd)))
			l.cwd[0] = '\0';
		if (hints_compute(t, &l, &o, env, &cfg, h, err, sizeof(err))) {
			if (json)
				printf("]}\n");
			fprintf(stderr, "hvd-topo: local rank %ld: %s\n", lr,
				err);
			goto out;
		}
		if (json)
			print_json_rank(h, (unsigned)lr, lr == nlocal - 1);
		else
			print_text_rank(h, (unsigned)lr);
	}
	if (json)
		printf("]}\n");
	rc = 0;
out:
	free(env);
	free(h);
	free(t);
	return rc;
}
