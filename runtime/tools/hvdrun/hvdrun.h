/*
 * hvdrun.h - the single-machine launcher: shared declarations.
 *
 * hvdrun is a small PMIx server.  It forks N ranks of a program on this
 * machine, serves them PMIx (job info, Put/Commit/Fence/Get, events) through
 * the public PMIx server API, forwards their output line by line, forwards
 * SIGINT/SIGTERM, and stops every rank when one of them dies abnormally
 * (with --elastic it lets the others go on).
 *
 * Files:
 *   hvdrun.c         main: launch, event loop, exit policy
 *   hvdrun_opts.c    command line (pure)
 *   hvdrun_output.c  line-buffered forwarding of rank output (pure + write)
 *   hvdrun_launch.c  program lookup, rank environment, fork/exec
 *   hvdrun_pmix.c    PMIx server module, job registration, notifications
 *   hvdrun_pubsub.c  PMIx publish/lookup/unpublish within the job
 *
 * Threads: the main thread owns everything except the few flags the PMIx
 * progress thread sets from its upcalls (struct hvdrun_shared, under its
 * mutex); an upcall wakes the main loop through a pipe.
 */
#ifndef HVDRUN_H
#define HVDRUN_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#define HVDRUN_MAX_NP 4096

/* ---- command line (hvdrun_opts.c) */

struct hvdrun_opts {
	int np;		/* number of ranks */
	int tag_output; /* prefix each line with "[rank] " */
	int timeout;	/* seconds, 0 = none */
	int grace;	/* seconds between SIGTERM and SIGKILL */
	int verbose;
	int bind;	/* bind rank r to the r-th allowed CPU when there are
			   at least np of them (--bind-to core, default) */
	int elastic;	/* --elastic: a failed rank does not stop the others
			   (the ranks get HOROVOD_ELASTIC=1) */
	char **argv; /* program and its arguments (in main's argv) */
};

enum hvdrun_parse {
	HVDRUN_PARSE_OK = 0,
	HVDRUN_PARSE_HELP,    /* --help: print usage, exit 0 */
	HVDRUN_PARSE_VERSION, /* --version */
	HVDRUN_PARSE_ERROR,   /* message in err */
};

enum hvdrun_parse hvdrun_parse_args(int argc, char **argv,
				    struct hvdrun_opts *o, char *err,
				    size_t errlen);
void hvdrun_usage(FILE *f);

/* ---- output forwarding (hvdrun_output.c) */

/*
 * One output stream of one rank.  Bytes are held until a newline so that
 * lines of different ranks never interleave; a line longer than
 * HVDRUN_LINE_MAX is written in pieces.
 */
#define HVDRUN_LINE_MAX (1 << 20)

struct hvdrun_linebuf {
	char *buf;
	size_t len;
	size_t cap;
};

/* Where forwarded output goes; a closed destination (EPIPE) is dropped. */
struct hvdrun_sink {
	int fd;
	int broken;
};

int hvdrun_linebuf_feed(struct hvdrun_linebuf *lb, const char *data, size_t n,
			struct hvdrun_sink *sink, const char *prefix);
int hvdrun_linebuf_flush(struct hvdrun_linebuf *lb, struct hvdrun_sink *sink,
			 const char *prefix);
void hvdrun_linebuf_free(struct hvdrun_linebuf *lb);

/* ---- starting ranks (hvdrun_launch.c) */

/* The executable PROGRAM names (PATH lookup), malloc'd; NULL if none. */
char *hvdrun_resolve(const char *prog);
/* A rank's environment (malloc'd array of malloc'd strings). */
char **hvdrun_child_env(void);
void hvdrun_free_env(char **env);
/* Fork and exec rank r, bound to CPU cpu (-1: not bound); its stdout and
 * stderr go to pipes whose read ends are returned in fd[].  Returns the
 * pid, or -1 with a message printed. */
pid_t hvdrun_spawn(int r, int cpu, const char *path, char **argv, char **env,
		   const sigset_t *unblock, int fd[2]);

/* ---- torch.distributed variables (hvdrun_env.c, pure) */

/* Sets NAME=VALUE in the NULL-terminated malloc'd array *envp (replacing
 * an existing NAME only when replace is set); -1 when out of memory. */
int hvdrun_env_put(char ***envp, const char *name, const char *value,
		   int replace);
/* RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (always), MASTER_ADDR
 * (127.0.0.1) and MASTER_PORT (when master_port > 0), the last two only
 * where the environment has none. */
int hvdrun_torch_env(char ***envp, int rank, int np, int master_port);
/* A TCP port for MASTER_PORT, kept bound (never listening, SO_REUSEADDR,
 * close-on-exec) for hvdrun's lifetime so that no other hvdrun on this
 * machine is given it, while the job's rank 0 can still listen on it.
 * Returns the socket (*port set), or -1. */
int hvdrun_reserve_port(int *port);

/* ---- PMIx server (hvdrun_pmix.c) */

/* Flags set by the PMIx progress thread, read by the main thread. */
struct hvdrun_shared {
	pthread_mutex_t lock;
	int wake_fd; /* write end of the main loop's wake pipe */
	int np;
	unsigned char *connected; /* per rank: called PMIx_Init */
	unsigned char *finalized; /* per rank: called PMIx_Finalize */
	int abort_rank;		  /* first rank that called PMIx_Abort, or -1 */
	int abort_status;
	char abort_msg[256];
	unsigned fences; /* fence_nb upcalls served (for -v / tests) */
};

struct hvdrun_server {
	char tmpdir[4096];
	char nspace[256]; /* a pmix_nspace_t */
	int initialized;
	int registered;
};

int hvdrun_pmix_init(struct hvdrun_server *srv, struct hvdrun_shared *sh,
		     int np, int verbose);
/* Register rank r and add the PMIx client variables to *env. */
int hvdrun_pmix_setup_rank(struct hvdrun_server *srv, int rank, char ***env);
/* Tell the surviving ranks that `rank` terminated abnormally. */
void hvdrun_pmix_notify_term(struct hvdrun_server *srv, int rank, int exit_code,
			     int signo);
void hvdrun_pmix_fini(struct hvdrun_server *srv);

/* ---- PMIx publish/lookup/unpublish (hvdrun_pubsub.c) */
struct pmix_server_module_4_0_0_t;
void hvdrun_pubsub_install(struct pmix_server_module_4_0_0_t *m);

#endif /* HVDRUN_H */
