/*
 * opt.h - the --horovod=KEY=VALUE,... option: a pure parser.
 *
 * The same parser runs in srun/sbatch/salloc (to refuse a bad option before
 * any task starts), in slurmstepd as root (again: the srun-side check can be
 * bypassed), on the admin's default_* plugstack arguments, in hvd-topo and in
 * the fuzz target.  It allocates nothing and touches no global state: a
 * string goes in, a settings struct or an error message comes out.
 */
#ifndef SPANK_CORE_OPT_H
#define SPANK_CORE_OPT_H

#include <stddef.h>

#include "err.h"
#include "path.h"

/* Longest accepted option string. */
#define OPT_MAX_LEN 1024

enum opt_key {
	OPT_CKPT_EVERY,
	OPT_CKPT_DIR,
	OPT_CKPT_KEEP,
	OPT_FUSION_MB,
	OPT_CYCLE_MS,
	OPT_CACHE,
	OPT_TIMELINE,
	OPT_HIERARCHICAL,
	OPT_STALL_S,
	OPT_LOG,
	OPT_GPU_BIND,
	OPT_CPU_BIND,
	OPT_NET,
	OPT_ELASTIC,
	OPT_ELASTIC_MIN,
	OPT_VERBOSE,
	OPT_NKEYS
};

enum opt_log {
	OPT_LOG_TRACE,
	OPT_LOG_DEBUG,
	OPT_LOG_INFO,
	OPT_LOG_WARNING,
	OPT_LOG_ERROR
};
enum opt_gpu_bind { OPT_GPU_CLOSEST, OPT_GPU_NONE };
enum opt_cpu_bind { OPT_CPU_NONE, OPT_CPU_NUMA };
enum opt_net { OPT_NET_AUTO, OPT_NET_IB, OPT_NET_ROCE, OPT_NET_TCP };

/*
 * Parsed settings.  A key not given keeps its default and its bit in `set`
 * stays clear: hints then export no variable for it (the runtime applies
 * Horovod's own defaults).  Paths are kept as templates: %u, %j and %x are
 * expanded in slurmstepd where the job is known (path_expand).
 */
struct opt {
	unsigned set;	/* 1u << enum opt_key for each key with a value */
	unsigned given; /* keys given by the last parse (the user's) */
	unsigned long ckpt_every;
	char ckpt_dir[PATH_LEN];
	unsigned long ckpt_keep;
	unsigned long fusion_mb;
	char cycle_ms[16]; /* validated decimal text, exported verbatim */
	unsigned long cache;
	char timeline[PATH_LEN];
	int hierarchical; /* 0 off, 1 on */
	unsigned long stall_s;
	enum opt_log log;
	enum opt_gpu_bind gpu_bind;
	enum opt_cpu_bind cpu_bind;
	enum opt_net net;
	int elastic;		    /* 1: elastic training (elastic.h) */
	unsigned long elastic_min; /* fewest tasks to go on with, 0 unset */
	int verbose;
};

/* Defaults of every key (nothing in `set`). */
void opt_init(struct opt *o);

/*
 * Parse `str` (NULL means "--horovod" without a value: all defaults) into
 * `o`, which the caller has initialised (opt_init, or admin defaults:
 * keys given in `str` replace them).  Returns 0, or -1 with a message in
 * err naming the key, the value and the accepted form.
 */
int opt_parse(const char *str, struct opt *o, char *err, size_t errlen);

/* Key name ("ckpt-every") and its accepted form ("ckpt-every=N (0..1e9)"). */
const char *opt_key_name(enum opt_key k);
const char *opt_key_form(enum opt_key k);
/* Key from its name with '-' or '_' ("ckpt_every"); -1 if unknown. */
int opt_key_lookup(const char *name, size_t len);

/* Names of enum values, for messages and verbose output. */
const char *opt_log_name(enum opt_log l);
const char *opt_net_name(enum opt_net n);

/* Write the settings back as an option string (for verbose output). */
void opt_format(const struct opt *o, char *buf, size_t len);

#endif /* SPANK_CORE_OPT_H */
