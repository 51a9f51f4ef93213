/*
 * hvdrun_launch.c - starting one rank: finding the program, the rank's
 * environment, fork/exec with its output on pipes.
 *
 * Each rank gets its own process group (so signals sent to the group reach
 * whatever a shell wrapper started) and PR_SET_PDEATHSIG (so the ranks die
 * with a SIGKILLed hvdrun).  The signals hvdrun handles through its
 * signalfd are blocked in hvdrun; the child unblocks them before exec,
 * since a blocked mask survives exec.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/hvdrun/hvdrun.h"

extern char **environ;

/* PATH lookup done once, so a missing program is one clear message. */
char *hvdrun_resolve(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(prog, '/'))
		return access(prog, X_OK) ? NULL : strdup(prog);
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *c = strchr(path, ':');
		size_t len = c ? (size_t)(c - path) : strlen(path);
		struct stat st;

		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)len,
			 len ? path : ".", len ? "/" : "", prog);
		if (!len)
			snprintf(buf, sizeof(buf), "./%s", prog);
		if (!stat(buf, &st) && S_ISREG(st.st_mode) &&
		    !access(buf, X_OK))
			return strdup(buf);
		path += len + (c ? 1 : 0);
	}
	return NULL;
}

/*
 * Open MPI 4.1 decides how it was launched before it looks at PMIx: with no
 * sign of mpirun, Slurm or Flux it declares itself a singleton and ignores
 * our server.  A daemon URI in the environment makes it take the
 * "launched by mpirun" path, which uses PMIx for everything it needs; the
 * daemon itself is never contacted in a normal run (nothing listens on
 * 127.0.0.1:1, so a program that tries, e.g. MPI_Comm_spawn, fails).
 */
#define OMPI_DAEMON_VAR "OMPI_MCA_orte_local_daemon_uri"

static char *ompi_daemon_uri(void)
{
	char *s = NULL;

	if (getenv(OMPI_DAEMON_VAR))
		return NULL; /* the user's choice (or an outer mpirun) */
	if (asprintf(&s, "%s=%lu.0;tcp://127.0.0.1:1", OMPI_DAEMON_VAR,
		     ((unsigned long)getpid() & 0x7fff) << 16) < 0)
		return NULL;
	return s;
}

/* A rank's environment: ours minus any PMIx client settings inherited from
 * an outer launcher (srun, mpirun), which would make the rank connect to
 * that server instead of ours.  PMIX_MCA_* are user tuning: kept. */
char **hvdrun_child_env(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(environ[i], "PMIX_", 5) &&
		    strncmp(environ[i], "PMIX_MCA_", 9))
			continue;
		env[k] = strdup(environ[i]);
		if (!env[k])
			goto err;
		k++;
	}
	env[k] = ompi_daemon_uri();
	return env;
err:
	while (k)
		free(env[--k]);
	free(env);
	return NULL;
}

/* SO_REUSEADDR on both sides lets torch's TCPStore listen on a port this
 * socket holds (Linux refuses the bind only against a listening socket),
 * while bind(port 0) elsewhere skips ports that have any socket bound. */
int hvdrun_reserve_port(int *port)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &alen)) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

void hvdrun_free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

pid_t hvdrun_spawn(int r, int cpu, const char *path, char **argv, char **env,
		   const sigset_t *unblock, int fd[2])
{
	int out[2] = {-1, -1}, err[2] = {-1, -1};
	pid_t parent = getpid(), pid;

	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		fprintf(stderr, "hvdrun: pipe: %s\n", strerror(errno));
		goto err;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "hvdrun: cannot start rank %d: fork: %s\n", r,
			strerror(errno));
		goto err;
	}
	if (pid == 0) {
		int in;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		/* Rank 0 gets our stdin unless it is a terminal, which a rank
		 * outside the foreground process group may not read. */
		if (r != 0 || isatty(STDIN_FILENO)) {
			in = open("/dev/null", O_RDONLY);
			if (in >= 0 && in != STDIN_FILENO) {
				dup2(in, STDIN_FILENO);
				close(in);
			}
		}
		if (cpu >= 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			/* Binding is a placement hint: a failure is not fatal. */
			if (sched_setaffinity(0, sizeof(set), &set))
				fprintf(stderr,
					"hvdrun: rank %d: cannot bind to CPU %d: "
					"%s\n",
					r, cpu, strerror(errno));
		}
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_UNBLOCK, unblock, NULL);
		execve(path, argv, env);
		fprintf(stderr, "hvdrun: cannot execute %s: %s\n", path,
			strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* also in the child: whichever runs first */
	close(out[1]);
	close(err[1]);
	fd[0] = out[0];
	fd[1] = err[0];
	return pid;
err:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	return -1;
}
