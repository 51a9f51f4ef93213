/*
 * sys.c - clocks, naps and process liveness.
 */
#include "config.h"

#include "base/base.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

double hvd_now(void)
{
	return (double)hvd_now_ns() * 1e-9;
}

unsigned long long hvd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL +
	       (unsigned long long)ts.tv_nsec;
}

void hvd_sleep_us(unsigned long us)
{
	struct timespec ts = {(time_t)(us / 1000000),
			      (long)(us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

int hvd_pid_dead(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int dead = 0;

	if (pid <= 0)
		return 0;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	/* A zombie (or a process of another user: EPERM) still exists for
	 * kill(): its state in /proc says whether it has exited. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			dead = 1;
	}
	fclose(f);
	return dead;
}

uint64_t hvd_pidns(void)
{
	static uint64_t ns;
	struct stat sb;

	/* Fixed for the life of the process: setns() and unshare() of the
	 * pid namespace move only its children. */
	if (!__atomic_load_n(&ns, __ATOMIC_RELAXED) &&
	    stat("/proc/self/ns/pid", &sb) == 0)
		__atomic_store_n(&ns, (uint64_t)sb.st_ino, __ATOMIC_RELAXED);
	return __atomic_load_n(&ns, __ATOMIC_RELAXED);
}

pid_t hvd_pid_here(pid_t pid, uint64_t ns)
{
	uint64_t mine = hvd_pidns();

	return ns && mine && ns != mine ? 0 : pid;
}
