/*
 * tap.h - a small TAP producer for C tests (read by automake's tap-driver.sh).
 *
 *	plan(3);  ok(x == 1, "x is one");  is_int(a, b, "...");  done_testing();
 *
 * Header-only so that each test is one file.  Output goes to stdout, one
 * line per result; diagnostics go to stdout prefixed "# ".
 */
#ifndef HVD_TAP_H
#define HVD_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned = -1;
static int tap_run;
static int tap_failed;

static inline void plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

/* Skip the whole test with a reason ("1..0 # SKIP reason"). */
static inline void skip_all(const char *fmt, ...)
{
	va_list ap;

	printf("1..0 # SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(0);
}

static inline void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static inline int ok_at(int cond, const char *file, int line, const char *fmt,
			...)
{
	va_list ap;

	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		printf("#   failed at %s:%d\n", file, line);
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                 \
	do {                                                                   \
		long long got_ = (long long)(got), want_ = (long long)(want);  \
		if (!ok_at(got_ == want_, __FILE__, __LINE__, __VA_ARGS__))    \
			diag("  got %lld, want %lld", got_, want_);            \
	} while (0)

#define is_str(got, want, ...)                                                 \
	do {                                                                   \
		const char *got_ = (got), *want_ = (want);                     \
		int same_ = got_ && want_ ? strcmp(got_, want_) == 0           \
					  : got_ == want_;                     \
		if (!ok_at(same_, __FILE__, __LINE__, __VA_ARGS__))            \
			diag("  got \"%s\", want \"%s\"", got_ ? got_ : "(null)", \
			     want_ ? want_ : "(null)");                        \
	} while (0)

/* Skip n planned tests with a reason. */
static inline void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++) {
		tap_run++;
		printf("ok %d # SKIP %s\n", tap_run, why);
	}
	fflush(stdout);
}

/* Ends the test: prints the plan when none was given; exit status says
 * whether every test passed and the plan was met. */
static inline int done_testing(void)
{
	if (tap_planned < 0)
		printf("1..%d\n", tap_run);
	else if (tap_run != tap_planned)
		printf("# planned %d tests but ran %d\n", tap_planned, tap_run);
	fflush(stdout);
	return tap_failed || (tap_planned >= 0 && tap_run != tap_planned);
}

#endif /* HVD_TAP_H */
