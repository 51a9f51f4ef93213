/*
 * pset_spec.c - process-set rank lists, pure: HOROVOD_PROCESS_SETS
 * ("0,1;2,3", ranges "0-3") parsed into sorted lists of distinct world
 * ranks, a rank list checked (hvd_pset_add's too), and the hash every rank
 * compares at init so that a spec that differs between ranks fails there
 * instead of deadlocking later.  Messages name the spec and what is wrong
 * in it.
 */
#include "config.h"

#include "engine/core/pset_spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

hvd_status_t pset_check_ranks(int *ranks, int n, int world_size, char *err,
			      size_t errlen)
{
	if (n <= 0) {
		snprintf(err, errlen, "a process set needs at least one rank");
		return HVD_ERR_INVALID_ARG;
	}
	for (int i = 0; i < n; i++)
		if (ranks[i] < 0 || ranks[i] >= world_size) {
			snprintf(err, errlen,
				 "rank %d is outside the job (ranks 0-%d)",
				 ranks[i], world_size - 1);
			return HVD_ERR_INVALID_ARG;
		}
	qsort(ranks, (size_t)n, sizeof(*ranks), cmp_int);
	for (int i = 1; i < n; i++)
		if (ranks[i] == ranks[i - 1]) {
			snprintf(err, errlen, "duplicate rank %d", ranks[i]);
			return HVD_ERR_INVALID_ARG;
		}
	return HVD_OK;
}

static int push_rank(int **v, int *n, int *cap, int r)
{
	if (*n == *cap) {
		int c = *cap ? *cap * 2 : 8;
		int *nv = realloc(*v, (size_t)c * sizeof(*nv));

		if (!nv)
			return -1;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = r;
	return 0;
}

static int parse_int(const char **s, long *v)
{
	char *end;

	while (isspace((unsigned char)**s))
		(*s)++;
	if (!isdigit((unsigned char)**s))
		return -1;
	errno = 0;
	*v = strtol(*s, &end, 10);
	if (errno || *v > 1L << 30)
		return -1;
	*s = end;
	while (isspace((unsigned char)**s))
		(*s)++;
	return 0;
}

hvd_status_t pset_parse(const char *spec, int world_size, int ***sets,
			int **sizes, int *nsets, char *err, size_t errlen)
{
	int **sv = NULL, *nv = NULL, ns = 0;
	int *cur = NULL, ncur = 0, capcur = 0;
	const char *s = spec;
	hvd_status_t st = HVD_ERR_INVALID_ARG;

	*sets = NULL;
	*sizes = NULL;
	*nsets = 0;
	if (!spec)
		return HVD_OK;
	while (isspace((unsigned char)*s))
		s++;
	if (!*s)
		return HVD_OK;
	for (;;) {
		long a, b;

		if (parse_int(&s, &a) < 0) {
			snprintf(err, errlen,
				 "HOROVOD_PROCESS_SETS=%s: expected a rank at "
				 "'%s' (format: \"0,1;2,3\", ranges \"0-3\")",
				 spec, s);
			goto err_free;
		}
		b = a;
		if (*s == '-') {
			s++;
			if (parse_int(&s, &b) < 0 || b < a) {
				snprintf(err, errlen,
					 "HOROVOD_PROCESS_SETS=%s: bad range "
					 "starting at rank %ld",
					 spec, a);
				goto err_free;
			}
		}
		for (long r = a; r <= b; r++)
			if (push_rank(&cur, &ncur, &capcur, (int)r) < 0)
				goto err_oom;
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s != ';' && *s != '\0') {
			snprintf(err, errlen,
				 "HOROVOD_PROCESS_SETS=%s: unexpected '%c' "
				 "(separate ranks with ',' and sets with ';')",
				 spec, *s);
			goto err_free;
		}
		{
			char why[128];
			int **nsv = realloc(sv, (size_t)(ns + 1) * sizeof(*sv));
			int *nnv;

			if (!nsv)
				goto err_oom;
			sv = nsv;
			nnv = realloc(nv, (size_t)(ns + 1) * sizeof(*nv));
			if (!nnv)
				goto err_oom;
			nv = nnv;
			if (pset_check_ranks(cur, ncur, world_size, why,
					     sizeof(why)) != HVD_OK) {
				snprintf(err, errlen,
					 "HOROVOD_PROCESS_SETS=%s: set %d: %s",
					 spec, ns + 1, why);
				goto err_free;
			}
			sv[ns] = cur;
			nv[ns] = ncur;
			ns++;
			cur = NULL;
			ncur = capcur = 0;
		}
		if (*s == '\0')
			break;
		s++;
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			break;
	}
	*sets = sv;
	*sizes = nv;
	*nsets = ns;
	return HVD_OK;
err_oom:
	snprintf(err, errlen, "out of memory");
	st = HVD_ERR_NO_MEMORY;
err_free:
	free(cur);
	for (int i = 0; i < ns; i++)
		free(sv[i]);
	free(sv);
	free(nv);
	return st;
}

uint64_t pset_hash(const int *ranks, int n)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;

	for (int i = 0; i < n; i++) {
		h ^= (uint64_t)(uint32_t)ranks[i];
		h *= 1099511628211ULL;
		h ^= h >> 29;
	}
	return h;
}
