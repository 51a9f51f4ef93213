/*
 * horovod_opt.h - the --horovod=KEY=VALUE,... option: a pure parser.
 *
 * The same parser runs in srun/sbatch/salloc (to refuse a bad option before
 * any task starts), in slurmstepd as root (again: the srun-side check can be
 * bypassed), on the admin's default_* plugstack arguments, in hvd-topo and in
 * the fuzz target.  It allocates nothing and touches no global state: a
 * string goes in, a settings struct or an error message comes out.
 */
#ifndef HOROVOD_OPT_H
#define HOROVOD_OPT_H

#include <stddef.h>

/* Longest accepted option string, and longest path value. */
#define HVDOPT_MAX_LEN 1024
#define HVDOPT_PATH_MAX 512
/* Room for an error message (the message itself is cut to fit). */
#define HVDOPT_ERR_LEN 256

enum hvdopt_key {
	HVDOPT_CKPT_EVERY,
	HVDOPT_CKPT_DIR,
	HVDOPT_CKPT_KEEP,
	HVDOPT_FUSION_MB,
	HVDOPT_CYCLE_MS,
	HVDOPT_CACHE,
	HVDOPT_TIMELINE,
	HVDOPT_HIERARCHICAL,
	HVDOPT_STALL_S,
	HVDOPT_LOG,
	HVDOPT_GPU_BIND,
	HVDOPT_CPU_BIND,
	HVDOPT_NET,
	HVDOPT_VERBOSE,
	HVDOPT_NKEYS
};

enum hvdopt_log {
	HVDOPT_LOG_TRACE,
	HVDOPT_LOG_DEBUG,
	HVDOPT_LOG_INFO,
	HVDOPT_LOG_WARNING,
	HVDOPT_LOG_ERROR
};
enum hvdopt_gpu_bind { HVDOPT_GPU_CLOSEST, HVDOPT_GPU_NONE };
enum hvdopt_cpu_bind { HVDOPT_CPU_NONE, HVDOPT_CPU_NUMA };
enum hvdopt_net { HVDOPT_NET_AUTO, HVDOPT_NET_IB, HVDOPT_NET_ROCE,
		  HVDOPT_NET_TCP };

/*
 * Parsed settings.  A key not given keeps its default and its bit in `set`
 * stays clear: hints then export no variable for it (the runtime applies
 * Horovod's own defaults).  Paths are kept as templates: %u, %j and %x are
 * expanded in slurmstepd where the job is known (hvdopt_expand_path).
 */
struct hvdopt {
	unsigned set;	/* 1u << enum hvdopt_key for each key with a value */
	unsigned given; /* keys given by the last parse (the user's) */
	unsigned long ckpt_every;
	char ckpt_dir[HVDOPT_PATH_MAX];
	unsigned long ckpt_keep;
	unsigned long fusion_mb;
	char cycle_ms[16]; /* validated decimal text, exported verbatim */
	unsigned long cache;
	char timeline[HVDOPT_PATH_MAX];
	int hierarchical; /* 0 off, 1 on */
	unsigned long stall_s;
	enum hvdopt_log log;
	enum hvdopt_gpu_bind gpu_bind;
	enum hvdopt_cpu_bind cpu_bind;
	enum hvdopt_net net;
	int verbose;
};

/* Defaults of every key (nothing in `set`). */
void hvdopt_init(struct hvdopt *o);

/*
 * Parse `str` (NULL means "--horovod" without a value: all defaults) into
 * `o`, which the caller has initialised (hvdopt_init, or admin defaults:
 * keys given in `str` replace them).  Returns 0, or -1 with a message in
 * err naming the key, the value and the accepted form.
 */
int hvdopt_parse(const char *str, struct hvdopt *o, char *err, size_t errlen);

/* Key name ("ckpt-every") and its accepted form ("ckpt-every=N (0..1e9)"). */
const char *hvdopt_key_name(enum hvdopt_key k);
const char *hvdopt_key_form(enum hvdopt_key k);
/* Key from its name with '-' or '_' ("ckpt_every"); -1 if unknown. */
int hvdopt_key_lookup(const char *name, size_t len);

/* Names of enum values, for messages and verbose output. */
const char *hvdopt_log_name(enum hvdopt_log l);
const char *hvdopt_net_name(enum hvdopt_net n);

/*
 * Expand %u (user), %j (job id), %x (job name) and %% in a path template and
 * normalise it: absolute, no "." or ".." component, no "//", no trailing
 * '/'.  The job name comes from the user: characters other than
 * [A-Za-z0-9._-] become '_', and a name that is "." or ".." becomes "_".
 * Returns 0, or -1 with a message.
 */
int hvdopt_expand_path(const char *tmpl, const char *user, unsigned long jobid,
		       const char *jobname, char *out, size_t outlen, char *err,
		       size_t errlen);

/*
 * Is `path` (normalised) equal to or below one of the ':'-separated roots?
 * Component-wise: /scratch2 is not under /scratch.  1 yes, 0 no.
 */
int hvdopt_path_under(const char *path, const char *roots);

/* Normalise an absolute path in place (see hvdopt_expand_path); 0 or -1. */
int hvdopt_normalise_path(char *path, char *err, size_t errlen);

/* Write the settings back as an option string (for verbose output). */
void hvdopt_format(const struct hvdopt *o, char *buf, size_t len);

#endif /* HOROVOD_OPT_H */
