/*
 * env.c - environment knobs: a malformed value is logged as a warning and the
 * default is used, never a failure.
 */
#include "config.h"

#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int hvd_parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v, mult = 1;

	if (!s || !*s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		mult = 1ULL << 10;
		end++;
		break;
	case 'M':
		mult = 1ULL << 20;
		end++;
		break;
	case 'G':
		mult = 1ULL << 30;
		end++;
		break;
	case 'T':
		mult = 1ULL << 40;
		end++;
		break;
	default:
		return -1;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || (v && mult > ~0ULL / v))
		return -1;
	*out = (size_t)(v * mult);
	return 0;
}

long hvd_env_long(const char *name, long def)
{
	const char *v = getenv(name);
	char *end;
	long r;

	if (!v || !*v)
		return def;
	errno = 0;
	r = strtol(v, &end, 10);
	if (errno || *end != '\0') {
		hvd_log(HVD_LOG_WARNING,
			"%s=%s is not an integer; using the default %ld", name,
			v, def);
		return def;
	}
	return r;
}

double hvd_env_double(const char *name, double def)
{
	const char *v = getenv(name);
	char *end;
	double r;

	if (!v || !*v)
		return def;
	errno = 0;
	r = strtod(v, &end);
	if (errno || *end != '\0') {
		hvd_log(HVD_LOG_WARNING,
			"%s=%s is not a number; using the default %g", name, v,
			def);
		return def;
	}
	return r;
}

int hvd_env_bool(const char *name, int def)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return def;
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
	    !strcasecmp(v, "on"))
		return 1;
	if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
	    !strcasecmp(v, "off"))
		return 0;
	hvd_log(HVD_LOG_WARNING, "%s=%s is not a boolean (1/0); using %d", name,
		v, def);
	return def;
}

size_t hvd_env_size(const char *name, size_t def)
{
	const char *v = getenv(name);
	size_t r;

	if (!v || !*v)
		return def;
	if (hvd_parse_size(v, &r) < 0) {
		hvd_log(HVD_LOG_WARNING,
			"%s=%s is not a size (e.g. 65536, 64K, 1M); using %zu",
			name, v, def);
		return def;
	}
	return r;
}
