/*
 * hvdrun.c - run N ranks of a program on this machine under a PMIx server.
 *
 * The main thread forks the ranks and then runs one poll() loop over: a
 * signalfd (SIGCHLD, and the SIGINT/SIGTERM/SIGHUP/SIGQUIT we forward), a
 * wake pipe written by PMIx upcalls, and the stdout/stderr pipes of every
 * rank.  Those signals are blocked before PMIx starts its progress thread,
 * so they are only ever seen through the signalfd.
 *
 * Exit policy, in order:
 *   - a rank killed by a signal, or that exits without PMIx_Finalize (after
 *     PMIx_Init, or with a non-zero code), or that calls PMIx_Abort, is a
 *     failure: hvdrun says which rank and why, notifies the others through
 *     PMIx (PMIX_ERR_PROC_TERM_WO_SYNC, affected proc, exit code), gives
 *     them STOP_DELAY_MS to fail on their own, sends SIGTERM, then SIGKILL
 *     after --grace seconds; the exit status is the failed rank's exit code,
 *     or 128+signal;
 *   - --timeout expired: the ranks are stopped the same way, exit 124;
 *   - hvdrun got SIGINT/SIGTERM/SIGHUP/SIGQUIT: forwarded to every rank
 *     (SIGKILL after --grace seconds), exit 128+signal;
 *   - otherwise the first non-zero exit code of a rank (by time), or 0.
 * With --elastic (or HOROVOD_ELASTIC=1 in hvdrun's environment) a failed
 * rank does not stop the others: they are told through PMIx and go on
 * (libhvd re-forms the world without it); hvdrun's status is then that of
 * the ranks that did not fail (0 when they all exited 0), or the failure's
 * when every rank failed.
 * A rank that exits 0 without ever calling PMIx_Init (`hvdrun -np 2
 * hostname`) is not a failure, nor is the last rank exiting 0 without
 * PMIx_Finalize (nobody is left waiting for it: a warning).
 *
 * Each rank runs in its own process group (hvdrun_launch.c), so that
 * signals reach the programs a rank's shell wrapper starts, and the
 * terminal's Ctrl-C reaches the ranks once (through us) rather than twice.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/hvdrun/hvdrun.h"

/* Time a failed job's survivors get to notice the PMIx event and fail on
 * their own (with their own message) before we send SIGTERM. */
#define STOP_DELAY_MS 1000
/* After the last rank is reaped, how long to wait for output still held in
 * pipes by programs the ranks left behind. */
#define DRAIN_MS 2000

struct rank {
	pid_t pid;
	int fd[2]; /* stdout, stderr pipe read ends, -1 closed */
	struct hvdrun_linebuf lb[2];
	int running;
	int status; /* wait status once reaped */
	int lost;   /* --elastic: failed while others went on */
};

static struct hvdrun_opts opts;
static struct rank *ranks;
static int nrunning;
static struct hvdrun_shared shared;
static struct hvdrun_server server;
static struct hvdrun_sink sinks[2] = {{STDOUT_FILENO, 0}, {STDERR_FILENO, 0}};

/* Stop sequence state. */
static int stopping;
static long long term_at = -1, kill_at = -1; /* ms, monotonic */
static int fail_code; /* exit status of the first failure, or 0 */
static int failed;
static int timed_out;
static int got_signal;
static int first_nonzero;
static int abort_seen;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void prefix_of(int r, char *buf, size_t len)
{
	if (opts.tag_output)
		snprintf(buf, len, "[%d] ", r);
	else
		buf[0] = '\0';
}

/* ---- signals to the ranks */

static void signal_ranks(int sig)
{
	int r;

	for (r = 0; r < opts.np; r++)
		if (ranks[r].running && ranks[r].pid > 0)
			if (kill(-ranks[r].pid, sig) && errno == ESRCH)
				kill(ranks[r].pid, sig);
}

/* Begin stopping every rank: SIGTERM after delay_ms, SIGKILL after grace. */
static void stop_job(int delay_ms)
{
	if (stopping)
		return;
	stopping = 1;
	term_at = now_ms() + delay_ms;
	kill_at = term_at + (long long)opts.grace * 1000;
}

static void forward_signal(int sig)
{
	if (!got_signal)
		got_signal = sig;
	if (opts.verbose)
		fprintf(stderr,
			"hvdrun: got signal %d (%s); forwarding it to "
			"the ranks\n",
			sig, strsignal(sig));
	signal_ranks(sig);
	if (!stopping) {
		stopping = 1;
		term_at = -1;
		kill_at = now_ms() + (long long)opts.grace * 1000;
	}
}

static void run_deadlines(void)
{
	long long t = now_ms();

	if (term_at >= 0 && t >= term_at) {
		term_at = -1;
		signal_ranks(SIGTERM);
	}
	if (kill_at >= 0 && t >= kill_at) {
		kill_at = -1;
		if (nrunning) {
			fprintf(stderr,
				"hvdrun: %d rank%s still running "
				"after %d s; killing\n",
				nrunning, nrunning > 1 ? "s" : "", opts.grace);
			signal_ranks(SIGKILL);
		}
	}
}

/* ---- rank exits */

static void record_failure(int r, int code, int signo, const char *why)
{
	int others = nrunning > 0;

	if (opts.elastic && others) {
		ranks[r].lost = 1;
		fprintf(stderr,
			"hvdrun: rank %d (pid %ld) %s; elastic: the other "
			"ranks go on\n",
			r, (long)ranks[r].pid, why);
		hvdrun_pmix_notify_term(&server, r, code, signo);
		return;
	}

	failed = 1;
	fail_code = code ? code : 1;
	fprintf(stderr, "hvdrun: rank %d (pid %ld) %s%s\n", r,
		(long)ranks[r].pid, why,
		others ? "; stopping the other ranks" : "");
	if (others) {
		hvdrun_pmix_notify_term(&server, r, code, signo);
		stop_job(STOP_DELAY_MS);
	}
}

static void rank_exited(int r, int status)
{
	int conn, fin, code, signo = 0;
	char why[256];

	ranks[r].running = 0;
	ranks[r].status = status;
	nrunning--;

	pthread_mutex_lock(&shared.lock);
	conn = shared.connected[r];
	fin = shared.finalized[r];
	pthread_mutex_unlock(&shared.lock);

	if (WIFSIGNALED(status)) {
		signo = WTERMSIG(status);
		code = 128 + signo;
		snprintf(why, sizeof(why), "killed by signal %d (%s)", signo,
			 strsignal(signo));
	} else {
		code = WEXITSTATUS(status);
		snprintf(why, sizeof(why), "exited with code %d", code);
	}
	if (opts.verbose)
		fprintf(stderr, "hvdrun: rank %d (pid %ld) %s\n", r,
			(long)ranks[r].pid, why);
	if (stopping) {
		if (code && !first_nonzero)
			first_nonzero = code;
		return; /* expected: we are stopping everything */
	}
	if (signo) {
		record_failure(r, code, signo, why);
	} else if (!fin && conn && !code && !nrunning) {
		/* The last rank: nobody is left waiting for it. */
		fprintf(stderr,
			"hvdrun: warning: rank %d (pid %ld) exited "
			"without calling PMIx_Finalize\n",
			r, (long)ranks[r].pid);
	} else if (!fin && conn) {
		strncat(why, " without calling PMIx_Finalize",
			sizeof(why) - strlen(why) - 1);
		record_failure(r, code, 0, why);
	} else if (!fin && code) {
		strncat(why, " before connecting to PMIx",
			sizeof(why) - strlen(why) - 1);
		record_failure(r, code, 0, why);
	}
	/* A rank lost in an elastic job is not the job's result. */
	if (code && !first_nonzero && !ranks[r].lost)
		first_nonzero = code;
}

static void check_abort(void);

static void reap(void)
{
	/* A rank that called PMIx_Abort and then exited is reported as the
	 * abort, not as an exit without PMIx_Finalize. */
	check_abort();
	for (;;) {
		int status, r;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid <= 0)
			return;
		for (r = 0; r < opts.np; r++)
			if (ranks[r].running && ranks[r].pid == pid)
				break;
		if (r < opts.np)
			rank_exited(r, status);
	}
}

static void check_abort(void)
{
	int r, st;
	char msg[256], why[400];

	pthread_mutex_lock(&shared.lock);
	r = shared.abort_rank;
	st = shared.abort_status;
	memcpy(msg, shared.abort_msg, sizeof(msg));
	pthread_mutex_unlock(&shared.lock);
	if (r < 0 || abort_seen)
		return;
	abort_seen = 1;
	if (stopping)
		return;
	snprintf(why, sizeof(why), "called PMIx_Abort with status %d%s%s", st,
		 msg[0] ? ": " : "", msg);
	failed = 1;
	fail_code = st ? (st & 0xff ? st & 0xff : 1) : 1;
	fprintf(stderr, "hvdrun: rank %d (pid %ld) %s; stopping the ranks\n", r,
		(long)ranks[r].pid, why);
	hvdrun_pmix_notify_term(&server, r, st, 0);
	/* Not at once: ranks dying while PMIx still delivers the event (and
	 * answers the abort) can deadlock the PMIx 4.2 progress thread. */
	stop_job(STOP_DELAY_MS);
}

/* ---- output */

static int read_output(int r, int s)
{
	char buf[65536], prefix[32];
	ssize_t n = read(ranks[r].fd[s], buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	prefix_of(r, prefix, sizeof(prefix));
	if (n <= 0) {
		hvdrun_linebuf_flush(&ranks[r].lb[s], &sinks[s], prefix);
		close(ranks[r].fd[s]);
		ranks[r].fd[s] = -1;
		return 0;
	}
	if (hvdrun_linebuf_feed(&ranks[r].lb[s], buf, (size_t)n, &sinks[s],
				prefix)) {
		fprintf(stderr,
			"hvdrun: out of memory buffering the output "
			"of rank %d\n",
			r);
		return -1;
	}
	return 1;
}

/* ---- launch (the mechanics are in hvdrun_launch.c) */

/* The CPU rank r is bound to: the r-th CPU hvdrun may run on, when there
 * are at least as many as ranks (as mpirun binds to cores); else -1, so
 * that oversubscribed ranks are left to the scheduler. */
static int rank_cpu(int r)
{
	cpu_set_t allowed;
	int seen = 0;

	if (!opts.bind || sched_getaffinity(0, sizeof(allowed), &allowed) ||
	    CPU_COUNT(&allowed) < opts.np)
		return -1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed) && seen++ == r)
			return cpu;
	return -1;
}

/* MASTER_PORT of the job (0: none could be reserved). */
static int torch_port;

static int launch(int r, const char *path, sigset_t *blocked)
{
	char **env = hvdrun_child_env();
	int fd[2];
	pid_t pid;

	if (!env) {
		fprintf(stderr, "hvdrun: out of memory\n");
		return -1;
	}
	if (hvdrun_torch_env(&env, r, opts.np, torch_port)) {
		fprintf(stderr, "hvdrun: out of memory\n");
		hvdrun_free_env(env);
		return -1;
	}
	if (hvdrun_pmix_setup_rank(&server, r, &env)) {
		hvdrun_free_env(env);
		return -1;
	}
	pid = hvdrun_spawn(r, rank_cpu(r), path, opts.argv, env, blocked, fd);
	hvdrun_free_env(env);
	if (pid < 0)
		return -1;
	ranks[r].pid = pid;
	ranks[r].fd[0] = fd[0];
	ranks[r].fd[1] = fd[1];
	ranks[r].running = 1;
	nrunning++;
	return 0;
}

/* ---- private server directory */

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	remove(p);
	return 0;
}

static void remove_tmpdir(void)
{
	if (server.tmpdir[0])
		nftw(server.tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	server.tmpdir[0] = '\0';
}

/*
 * PMIx 4.2 has been seen (rarely, after ranks died mid-operation) to
 * deadlock its progress thread, and then PMIx_server_finalize never
 * returns.  Such jobs skip the teardown (see the end of main), but to be
 * sure it cannot hang a finished job, bound it: after
 * TEARDOWN_S the directory is removed and hvdrun exits with the job's
 * status anyway.
 */
#define TEARDOWN_S 5
static int teardown_ret;

static void *watchdog(void *arg)
{
	sleep(TEARDOWN_S);
	fprintf(stderr,
		"hvdrun: the PMIx server did not shut down in %d s; "
		"exiting without it\n",
		TEARDOWN_S);
	remove_tmpdir();
	_exit(teardown_ret);
	return arg;
}

static void start_watchdog(void)
{
	pthread_t t;

	if (!pthread_create(&t, NULL, watchdog, NULL))
		pthread_detach(t);
}

static int make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	/* The PMIx rendezvous socket lives in here: a Unix socket path must
	 * fit in 108 bytes. */
	if (!base || !*base || strlen(base) > 60 || access(base, W_OK))
		base = "/var/tmp";
	snprintf(server.tmpdir, sizeof(server.tmpdir), "%s/hvdrun.XXXXXX",
		 base);
	if (!mkdtemp(server.tmpdir)) {
		fprintf(stderr,
			"hvdrun: cannot create a directory in %s: "
			"%s; set TMPDIR to a writable directory\n",
			base, strerror(errno));
		server.tmpdir[0] = '\0';
		return -1;
	}
	return 0;
}

/* Did every rank that connected to PMIx also finalize? */
static int clean_finish(void)
{
	int r, clean = 1;

	pthread_mutex_lock(&shared.lock);
	for (r = 0; r < opts.np; r++)
		if (shared.connected[r] && !shared.finalized[r])
			clean = 0;
	pthread_mutex_unlock(&shared.lock);
	return clean;
}

/* ---- main loop */

static int any_fd_open(void)
{
	for (int r = 0; r < opts.np; r++)
		if (ranks[r].fd[0] >= 0 || ranks[r].fd[1] >= 0)
			return 1;
	return 0;
}

static int loop(int sfd, int wake_rd)
{
	struct pollfd *pfd = calloc((size_t)opts.np * 2 + 2, sizeof(*pfd));
	int *who = calloc((size_t)opts.np * 2 + 2, sizeof(*who));
	long long deadline =
	    opts.timeout ? now_ms() + (long long)opts.timeout * 1000 : -1;
	long long drain_end = -1;

	if (!pfd || !who) {
		fprintf(stderr, "hvdrun: out of memory\n");
		free(pfd);
		free(who);
		return -1;
	}
	for (;;) {
		long long t = now_ms(), next = -1;
		int n = 0, timeout_ms;

		if (!nrunning) {
			if (!any_fd_open())
				break;
			if (drain_end < 0)
				drain_end = t + DRAIN_MS;
			if (t >= drain_end)
				break;
		}
		if (deadline >= 0 && t >= deadline && !stopping) {
			timed_out = 1;
			fprintf(stderr,
				"hvdrun: --timeout of %d s expired; "
				"stopping the ranks\n",
				opts.timeout);
			stop_job(0);
		}
		run_deadlines();

		if (!stopping && deadline >= 0)
			next = deadline;
		if (term_at >= 0 && (next < 0 || term_at < next))
			next = term_at;
		if (kill_at >= 0 && (next < 0 || kill_at < next))
			next = kill_at;
		if (drain_end >= 0 && (next < 0 || drain_end < next))
			next = drain_end;
		timeout_ms = next < 0 ? -1 : (int)(next > t ? next - t : 0);

		pfd[n].fd = sfd;
		pfd[n].events = POLLIN;
		who[n++] = -1;
		pfd[n].fd = wake_rd;
		pfd[n].events = POLLIN;
		who[n++] = -2;
		for (int r = 0; r < opts.np; r++)
			for (int s = 0; s < 2; s++)
				if (ranks[r].fd[s] >= 0) {
					pfd[n].fd = ranks[r].fd[s];
					pfd[n].events = POLLIN;
					who[n++] = r * 2 + s;
				}
		if (poll(pfd, (nfds_t)n, timeout_ms) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "hvdrun: poll: %s\n", strerror(errno));
			break;
		}
		/* Output first: a rank's last lines come before hvdrun's
		 * message about its exit. */
		for (int i = 2; i < n; i++)
			if (pfd[i].revents)
				read_output(who[i] / 2, who[i] % 2);
		if (pfd[1].revents) {
			char junk[256];

			while (read(wake_rd, junk, sizeof(junk)) > 0)
				;
			check_abort();
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					reap();
				else
					forward_signal((int)si.ssi_signo);
			}
		}
	}
	free(pfd);
	free(who);
	return 0;
}

/* The rank table and the state shared with the PMIx server's threads. */
static int alloc_state(void)
{
	ranks = calloc((size_t)opts.np, sizeof(*ranks));
	shared.connected = calloc((size_t)opts.np, 1);
	shared.finalized = calloc((size_t)opts.np, 1);
	if (!ranks || !shared.connected || !shared.finalized) {
		fprintf(stderr, "hvdrun: out of memory\n");
		return -1;
	}
	for (int r = 0; r < opts.np; r++)
		ranks[r].fd[0] = ranks[r].fd[1] = -1;
	pthread_mutex_init(&shared.lock, NULL);
	shared.np = opts.np;
	shared.abort_rank = -1;
	return 0;
}

/* Signals to a signalfd, before any thread exists so that PMIx's threads
 * inherit the mask; a pipe that wakes the main loop. */
static int setup_signals(sigset_t *blocked, int *sfd, int wake[2])
{
	struct rlimit rl;

	/* Two pipes per rank plus a PMIx socket: lift the soft limit on
	 * descriptors as far as allowed. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigaddset(blocked, SIGCHLD);
	sigaddset(blocked, SIGINT);
	sigaddset(blocked, SIGTERM);
	sigaddset(blocked, SIGHUP);
	sigaddset(blocked, SIGQUIT);
	sigprocmask(SIG_BLOCK, blocked, NULL);
	signal(SIGPIPE, SIG_IGN);
	*sfd = signalfd(-1, blocked, SFD_CLOEXEC | SFD_NONBLOCK);
	if (*sfd < 0 || pipe2(wake, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "hvdrun: signalfd/pipe: %s\n", strerror(errno));
		return -1;
	}
	shared.wake_fd = wake[1];
	return 0;
}

/* hvdrun's own exit status, once every rank is gone: a launch failure,
 * the timeout (124), a signal (128+N), or the first rank's non-zero
 * code, which it names. */
static int exit_status(void)
{
	int ret;

	if (failed)
		return fail_code;
	if (timed_out)
		return 124;
	if (got_signal)
		return 128 + got_signal;
	ret = first_nonzero;
	for (int r = 0; ret && r < opts.np; r++) {
		int st = ranks[r].status;

		if (!ranks[r].lost && WIFEXITED(st) && WEXITSTATUS(st) == ret) {
			fprintf(stderr,
				"hvdrun: rank %d (pid %ld) exited with code "
				"%d\n",
				r, (long)ranks[r].pid, ret);
			break;
		}
	}
	return ret;
}

/* Ranks still alive (an error before the loop ended): do not leave
 * them; then the PMIx server and its directory go. */
static int finish(int ret, sigset_t *blocked)
{
	if (ranks && nrunning) {
		signal_ranks(SIGKILL);
		while (nrunning && waitpid(-1, NULL, 0) > 0)
			nrunning--;
	}
	/* From here on SIGINT/SIGTERM just end hvdrun (there are no ranks
	 * left to forward them to). */
	sigdelset(blocked, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, blocked, NULL);
	/*
	 * After ranks died connected (without PMIx_Finalize), PMIx 4.2's
	 * teardown is unsafe: PMIx_server_finalize has been seen to crash,
	 * and deregistering to deadlock, while the progress thread cleans
	 * up their lost connections.  The job is over and everything the
	 * server holds dies with this process except its directory, so then
	 * remove that and leave without the PMIx teardown.
	 */
	if (server.initialized && !clean_finish()) {
		remove_tmpdir();
		fflush(NULL);
		_exit(ret);
	}
	teardown_ret = ret;
	start_watchdog();
	hvdrun_pmix_fini(&server);
	remove_tmpdir();
	for (int r = 0; ranks && r < opts.np; r++) {
		for (int s = 0; s < 2; s++) {
			if (ranks[r].fd[s] >= 0)
				close(ranks[r].fd[s]);
			hvdrun_linebuf_free(&ranks[r].lb[s]);
		}
	}
	free(ranks);
	free(shared.connected);
	free(shared.finalized);
	return ret;
}

int main(int argc, char **argv)
{
	char err[512];
	char *path = NULL;
	sigset_t blocked;
	int sfd = -1, wake[2] = {-1, -1}, ret = 1, r;

	switch (hvdrun_parse_args(argc, argv, &opts, err, sizeof(err))) {
	case HVDRUN_PARSE_OK:
		break;
	case HVDRUN_PARSE_HELP:
		hvdrun_usage(stdout);
		return 0;
	case HVDRUN_PARSE_VERSION:
		printf("hvdrun (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
		return 0;
	default:
		fprintf(stderr, "hvdrun: %s\n", err);
		return 2;
	}
	/* Horovod's own switch works too; the ranks get it either way. */
	if (!opts.elastic) {
		const char *e = getenv("HOROVOD_ELASTIC");

		/* libhvd's spelling of true (base/env.c). */
		opts.elastic = e && (!strcmp(e, "1") || !strcasecmp(e, "true") ||
				     !strcasecmp(e, "yes") ||
				     !strcasecmp(e, "on"));
	}
	if (opts.elastic && setenv("HOROVOD_ELASTIC", "1", 1) != 0) {
		fprintf(stderr, "hvdrun: setenv: %s\n", strerror(errno));
		return 1;
	}
	path = hvdrun_resolve(opts.argv[0]);
	if (!path) {
		fprintf(stderr, "hvdrun: %s: %s\n", opts.argv[0],
			strchr(opts.argv[0], '/')
			    ? "not an executable file"
			    : "command not found in PATH");
		return 127;
	}
	sigemptyset(&blocked);
	if (alloc_state() || setup_signals(&blocked, &sfd, wake) ||
	    make_tmpdir())
		goto out;
	if (!getenv("MASTER_PORT") && hvdrun_reserve_port(&torch_port) < 0) {
		fprintf(stderr,
			"hvdrun: warning: no TCP port for MASTER_PORT (%s); "
			"torch.distributed's env:// needs MASTER_PORT set\n",
			strerror(errno));
		torch_port = 0;
	}
	if (hvdrun_pmix_init(&server, &shared, opts.np, opts.verbose)) {
		fprintf(stderr,
			"hvdrun: cannot start the PMIx server (server "
			"directory %s)\n",
			server.tmpdir);
		goto out;
	}
	for (r = 0; r < opts.np; r++) {
		if (launch(r, path, &blocked)) {
			failed = 1;
			fail_code = 1;
			if (nrunning)
				forward_signal(SIGTERM);
			break;
		}
	}
	loop(sfd, wake[0]);
	check_abort();
	ret = exit_status();
out:
	ret = finish(ret, &blocked);
	if (sfd >= 0)
		close(sfd);
	free(path);
	return ret;
}
