/*
 * ckpt_signal.c - SIGTERM and SIGUSR1 turn into a stop request.
 *
 * Slurm sends SIGTERM at the time limit, on scancel and on preemption
 * (after GraceTime), and `sbatch --signal=B:USR1@120` sends SIGUSR1 to the
 * batch shell, which job scripts forward to srun.  The handler only sets a
 * flag (async-signal-safe); hvd_ckpt_step() agrees on it with the other
 * ranks, writes a checkpoint and tells the program to stop.
 *
 * The program's own handlers keep working: whatever was installed before
 * the first hvd_ckpt_open() is called after the flag is set (SIG_DFL and
 * SIG_IGN are not called: the point is to survive the signal).  Handlers the
 * program installs later replace ours, as sigaction always does; install
 * yours first.  Installed once, with SA_RESTART so that interrupted system
 * calls of the program resume; removed by the last hvd_ckpt_close() when
 * ours is still the one installed and no stop was requested, on this rank
 * or (agreed through the per-step allreduce) on another: srun forwards
 * the signal to each node in turn, and a rank that stopped on another's
 * signal and closed before its own copy arrived died of it (SIGUSR1's
 * default action) instead of exiting with HVD_CKPT_EXIT_STATUS, and the
 * job was not requeued.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <errno.h>
#include <string.h>

static volatile sig_atomic_t stop_pending;
static struct sigaction old_term, old_usr1;
static int users;
static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *old = sig == SIGTERM ? &old_term : &old_usr1;
	int saved = errno;

	/* which one, for the message (SIGTERM outranks SIGUSR1: the
	 * per-step allreduce takes the MAX) */
	if (sig > stop_pending)
		stop_pending = sig;
	if (old->sa_flags & SA_SIGINFO) {
		if (old->sa_sigaction)
			old->sa_sigaction(sig, si, uc);
	} else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	}
	errno = saved;
}

hvd_status_t ckpt_signals_install(void)
{
	struct sigaction sa;
	hvd_status_t st = HVD_OK;

	pthread_mutex_lock(&sig_mu);
	if (users++ > 0)
		goto out;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, &old_term) != 0 ||
	    sigaction(SIGUSR1, &sa, &old_usr1) != 0) {
		users--;
		st = hvd_error(HVD_ERR_INTERNAL, "checkpoint: cannot install "
			       "the SIGTERM/SIGUSR1 handler: %s",
			       strerror(errno));
	}
out:
	pthread_mutex_unlock(&sig_mu);
	return st;
}

static void restore_one(int sig, const struct sigaction *old)
{
	struct sigaction cur;

	if (sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == on_signal)
		sigaction(sig, old, NULL);
}

void ckpt_signals_remove(void)
{
	pthread_mutex_lock(&sig_mu);
	/* After a stop request the handler stays: the program is on its way
	 * to exit with HVD_CKPT_EXIT_STATUS, and a second SIGTERM/SIGUSR1
	 * (the batch shell's trap and slurmstepd both signal the tasks) must
	 * not kill it with a signal status on the way. */
	if (users > 0 && --users == 0 && !stop_pending) {
		restore_one(SIGTERM, &old_term);
		restore_one(SIGUSR1, &old_usr1);
	}
	pthread_mutex_unlock(&sig_mu);
}

void ckpt_signals_agreed(int sig)
{
	/* Read by the handler and ckpt_signals_remove(); a signal arriving
	 * now writes it too, and any value this store or the handler's
	 * leaves is a stop. */
	if (sig > stop_pending)
		stop_pending = sig;
}

int ckpt_signals_pending(void)
{
	return stop_pending;
}

int hvd_ckpt_stop_requested(void)
{
	return stop_pending != 0;
}
