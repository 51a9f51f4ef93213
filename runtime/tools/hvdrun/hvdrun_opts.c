/*
 * hvdrun_opts.c - the command line of hvdrun.
 *
 * Hand-written rather than getopt because users type mpirun's spelling
 * (`-np 4`, a long option with one dash) and because the first word that is
 * not an option starts the program: everything after it belongs to the
 * program, even words that look like our options.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/hvdrun/hvdrun.h"

void hvdrun_usage(FILE *f)
{
	fputs("usage: hvdrun -np N [--tag-output] [--timeout SECONDS] "
	      "[--grace SECONDS] [--elastic] [-v] [--] PROGRAM [ARGS...]\n"
	      "Run N ranks of PROGRAM on this machine and serve them PMIx.\n"
	      "  -np N, -n N         number of ranks (1.."
	      "4096)\n"
	      "  --tag-output        prefix every output line with [rank]\n"
	      "  --timeout SECONDS   stop all ranks after SECONDS, exit 124\n"
	      "  --grace SECONDS     wait between SIGTERM and SIGKILL when "
	      "stopping ranks\n"
	      "                      (default 5)\n"
	      "  --bind-to core|none bind each rank to a CPU of its own when "
	      "there are\n"
	      "                      enough (default core), or not at all\n"
	      "  --elastic           elastic training: a rank that dies does "
	      "not stop the\n"
	      "                      others (ranks get HOROVOD_ELASTIC=1; "
	      "also on when\n"
	      "                      HOROVOD_ELASTIC=1 is set)\n"
	      "  -v, --verbose       report PMIx connections, fences, exits\n"
	      "  -h, --help          this text\n"
	      "  --version           print the version\n",
	      f);
}

static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* A non-negative decimal integer within [lo, hi]; -1 if it is not. */
static long parse_int(const char *s, long lo, long hi)
{
	char *end;
	long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	return v;
}

/*
 * Match `arg` against an option with a value: "NAME VALUE" (value taken from
 * the next word) or "NAME=VALUE".  Returns the value, or NULL if `arg` is not
 * this option; *missing is set when the option has no value.
 */
static const char *opt_value(const char *arg, const char *name, int argc,
			     char **argv, int *i, int *missing)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n))
		return NULL;
	if (arg[n] == '=')
		return arg + n + 1;
	if (arg[n])
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return arg;
	}
	return argv[++*i];
}

enum hvdrun_parse hvdrun_parse_args(int argc, char **argv,
				    struct hvdrun_opts *o, char *err,
				    size_t errlen)
{
	static const char *const np_names[] = {"-np", "--np", "-n"};
	int i;

	memset(o, 0, sizeof(*o));
	o->np = -1;
	o->grace = 5;
	o->bind = 1;
	err[0] = '\0';

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int missing = 0;
		size_t k;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || !a[1])
			break;
		for (k = 0; k < sizeof(np_names) / sizeof(*np_names); k++) {
			v = opt_value(a, np_names[k], argc, argv, &i, &missing);
			if (v)
				break;
		}
		if (v) {
			if (missing) {
				say(err, errlen, "%s needs a number of ranks",
				    a);
				return HVDRUN_PARSE_ERROR;
			}
			o->np = (int)parse_int(v, 1, HVDRUN_MAX_NP);
			if (o->np < 0) {
				say(err, errlen,
				    "-np %s: expected a number of ranks from "
				    "1 to %d",
				    v, HVDRUN_MAX_NP);
				return HVDRUN_PARSE_ERROR;
			}
			continue;
		}
		if ((v = opt_value(a, "--timeout", argc, argv, &i, &missing))) {
			long t = missing ? -1 : parse_int(v, 0, INT_MAX);

			if (t < 0) {
				say(err, errlen,
				    "--timeout %s: expected a whole number "
				    "of seconds (0 = none)",
				    missing ? "" : v);
				return HVDRUN_PARSE_ERROR;
			}
			o->timeout = (int)t;
			continue;
		}
		if ((v = opt_value(a, "--grace", argc, argv, &i, &missing))) {
			long t = missing ? -1 : parse_int(v, 0, 3600);

			if (t < 0) {
				say(err, errlen,
				    "--grace %s: expected a whole number of "
				    "seconds from 0 to 3600",
				    missing ? "" : v);
				return HVDRUN_PARSE_ERROR;
			}
			o->grace = (int)t;
			continue;
		}
		if ((v = opt_value(a, "--bind-to", argc, argv, &i, &missing))) {
			if (!missing && !strcmp(v, "core")) {
				o->bind = 1;
			} else if (!missing && !strcmp(v, "none")) {
				o->bind = 0;
			} else {
				say(err, errlen,
				    "--bind-to %s: expected core or none",
				    missing ? "" : v);
				return HVDRUN_PARSE_ERROR;
			}
			continue;
		}
		if (!strcmp(a, "--tag-output")) {
			o->tag_output = 1;
		} else if (!strcmp(a, "--elastic")) {
			o->elastic = 1;
		} else if (!strcmp(a, "--verbose")) {
			o->verbose++;
		} else if (a[1] == 'v' && strspn(a + 1, "v") == strlen(a + 1)) {
			o->verbose += (int)strlen(a + 1); /* -v, -vv */
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			return HVDRUN_PARSE_HELP;
		} else if (!strcmp(a, "--version")) {
			return HVDRUN_PARSE_VERSION;
		} else {
			say(err, errlen,
			    "unknown option %s (see hvdrun --help; put -- "
			    "before a program whose name starts with -)",
			    a);
			return HVDRUN_PARSE_ERROR;
		}
	}
	if (o->np < 0) {
		say(err, errlen,
		    "the number of ranks is missing: "
		    "hvdrun -np N PROGRAM [ARGS]");
		return HVDRUN_PARSE_ERROR;
	}
	if (i >= argc) {
		say(err, errlen,
		    "the program to run is missing: "
		    "hvdrun -np %d PROGRAM [ARGS]",
		    o->np);
		return HVDRUN_PARSE_ERROR;
	}
	o->argv = argv + i;
	return HVDRUN_PARSE_OK;
}
