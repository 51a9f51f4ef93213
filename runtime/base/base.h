/*
 * base/base.h - the bottom layer of libhvd, what every other part shares:
 * statuses and error messages, the checking macros, logging, environment
 * knobs, clocks.  Nothing here is exported (libhvd.map).
 */
#ifndef HVD_BASE_H
#define HVD_BASE_H

#include "hvd.h"

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define HVD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define HVD_HIDDEN __attribute__((visibility("hidden")))
#else
#define HVD_PRINTF(a, b)
#define HVD_HIDDEN
#endif

/* Internal functions keep the hvd_ prefix but never leave the library:
 * everything declared in internal headers is hidden. */
#pragma GCC visibility push(hidden)

/* Record a message for the calling thread's hvd_last_error() and return
 * the status, so that errors read:  return hvd_error(HVD_ERR_X, "...");  */
hvd_status_t hvd_error(hvd_status_t status, const char *fmt, ...)
	HVD_PRINTF(2, 3);
hvd_status_t hvd_verror(hvd_status_t status, const char *fmt, va_list ap);
/* Keep the current message but prefix it with context ("allreduce: ..."). */
hvd_status_t hvd_error_prefix(hvd_status_t status, const char *fmt, ...)
	HVD_PRINTF(2, 3);
void hvd_error_clear(void);
/* msg without the "HVD-NNNN " it starts with (a reason passed on to a
 * message that will get a code of its own). */
const char *hvd_error_text(const char *msg);
/* The failures of the peers or the network around them (a dead peer, one
 * that stopped answering, a broken transport): the communicator cannot
 * run, and an elastic re-forming can cure them.  A mismatch or a bad
 * argument is the program's. */
static inline int hvd_status_peers_broken(hvd_status_t st)
{
	return st == HVD_ERR_PEER_FAILED || st == HVD_ERR_TIMEOUT ||
	       st == HVD_ERR_TRANSPORT;
}

/* One pair of checking macros for the whole library (as NCCL's checks.h):
 * a status other than HVD_OK returns, or jumps to the cleanup label with
 * st set.  The callee has set the message; the debug log names the place
 * the error passed through, so that a failure deep in a call chain can be
 * followed up.  Use them for calls that return an hvd_status_t; a failure
 * that is first noticed here (NULL from malloc, a bad argument) sets its
 * message with hvd_error() itself. */
#define HVD_CHECK(call)                                                        \
	do {                                                                   \
		hvd_status_t st_ = (call);                                     \
		if (st_ != HVD_OK) {                                           \
			hvd_check_trace(st_, #call, __FILE__, __LINE__);       \
			return st_;                                            \
		}                                                              \
	} while (0)
#define HVD_CHECK_GOTO(call, st, label)                                        \
	do {                                                                   \
		(st) = (call);                                                 \
		if ((st) != HVD_OK) {                                          \
			hvd_check_trace((st), #call, __FILE__, __LINE__);      \
			goto label;                                            \
		}                                                              \
	} while (0)
/* The debug line of the macros ("hvd_check: x.c:12: f(a) -> HVD_ERR_IO"). */
void hvd_check_trace(hvd_status_t st, const char *call, const char *file,
		     int line);

/* Logging to stderr, "hvd: [rank] message", filtered by HOROVOD_LOG_LEVEL
 * (trace, debug, info, warning, error, fatal; default warning). */
enum hvd_log_level {
	HVD_LOG_TRACE = 0,
	HVD_LOG_DEBUG,
	HVD_LOG_INFO,
	HVD_LOG_WARNING,
	HVD_LOG_ERROR,
	HVD_LOG_FATAL,
};
void hvd_log(enum hvd_log_level level, const char *fmt, ...) HVD_PRINTF(2, 3);
int hvd_log_enabled(enum hvd_log_level level);
/* Rank shown in log lines (-1: none yet). */
void hvd_log_set_rank(int rank);

/* Environment knobs: value of NAME parsed as the type, or def when unset;
 * a malformed value is logged as a warning and the default used. */
long hvd_env_long(const char *name, long def);
double hvd_env_double(const char *name, double def);
int hvd_env_bool(const char *name, int def);
/* Sizes with K/M/G suffixes (binary), e.g. "64K". */
size_t hvd_env_size(const char *name, size_t def);
/* Parse "123", "64K", "1M", "2G" (binary units); -1 on a malformed value. */
int hvd_parse_size(const char *s, size_t *out);

/* 1 when process pid is gone or a zombie (exited, not yet reaped by its
 * launcher: it still answers kill(pid, 0)); 0 when it runs or pid <= 0. */
int hvd_pid_dead(pid_t pid);
/* The pid namespace of this process: the inode of /proc/self/ns/pid, or 0
 * where /proc does not say.  A pid names a process only within its own
 * namespace; ranks of one node may sit in different ones (a container
 * per task). */
uint64_t hvd_pidns(void);
/* pid when the process it names, in pid namespace ns, can be watched from
 * this one (hvd_pid_dead), else 0.  An unknown namespace (0) on either
 * side counts as ours. */
pid_t hvd_pid_here(pid_t pid, uint64_t ns);

/* Monotonic clock in seconds / nanoseconds. */
double hvd_now(void);
unsigned long long hvd_now_ns(void);
/* Sleep for us microseconds (a waiting loop's nap). */
void hvd_sleep_us(unsigned long us);

/* The CPU's spin-wait hint, for the body of a polling loop. */
static inline void hvd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#pragma GCC visibility pop

#endif /* HVD_BASE_H */
