/*
 * pset.c - process sets: parsing HOROVOD_PROCESS_SETS, checking rank lists
 * and the table of sets with their member-only communicators.
 *
 * Set 0 is the world (the engine's own communicator).  Static sets get ids
 * 1..n in the order of the spec; dynamic sets get the next free id when
 * their add is executed, which happens in the same cycle on every rank, so
 * ids agree without being sent.  Every rank takes part in making a set's
 * communicator (comm_split is collective over the engine's: a GPU job's
 * NCCL communicator is split from the engine's); only members get one,
 * non-members keep the membership list so that the coordinator can tell
 * when an op is ready.
 */
#include "config.h"

#include "engine/engine.h"

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

struct pset *pset_get(const struct pset_table *t, int32_t id)
{
	return id >= 0 && id < t->cap ? t->sets[id] : NULL;
}

int pset_is_member(const struct pset_table *t, int32_t id, int world_rank)
{
	const struct pset *p = pset_get(t, id);
	int lo = 0, hi;

	if (!p)
		return 0;
	hi = p->n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if (p->ranks[mid] == world_rank)
			return 1;
		if (p->ranks[mid] < world_rank)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return 0;
}

hvd_status_t pset_table_add(struct pset_table *t, int32_t id, const int *ranks,
			    int n, int world_rank, hvd_comm_t *engine_comm)
{
	struct pset *p;
	hvd_status_t st;

	if (id >= t->cap) {
		int cap = t->cap ? t->cap : 8;
		struct pset **v;

		while (cap <= id)
			cap *= 2;
		v = realloc(t->sets, (size_t)cap * sizeof(*v));
		if (!v)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		memset(v + t->cap, 0, (size_t)(cap - t->cap) * sizeof(*v));
		t->sets = v;
		t->cap = cap;
	}
	if (t->sets[id])
		return hvd_error(HVD_ERR_INTERNAL,
				 "hvd: process set %d exists already", id);
	p = calloc(1, sizeof(*p));
	if (!p)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	p->ranks = malloc((size_t)n * sizeof(*p->ranks));
	if (!p->ranks) {
		free(p);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	memcpy(p->ranks, ranks, (size_t)n * sizeof(*ranks));
	p->id = id;
	p->n = n;
	p->my_rank = -1;
	for (int i = 0; i < n; i++)
		if (ranks[i] == world_rank)
			p->my_rank = i;
	if (id == HVD_PSET_GLOBAL) {
		p->comm = engine_comm;
	} else if (engine_comm) {
		/* Collective over all ranks, which holds here since every
		 * rank adds every set, in one order. */
		st = comm_split(engine_comm, ranks, n, &p->comm);
		if (st != HVD_OK) {
			free(p->ranks);
			free(p);
			return hvd_error_prefix(st, "hvd: process set %d", id);
		}
	}
	t->sets[id] = p;
	if (id >= t->next_id)
		t->next_id = id + 1;
	return HVD_OK;
}

void pset_table_remove(struct pset_table *t, int32_t id)
{
	struct pset *p = pset_get(t, id);

	if (!p)
		return;
	if (p->comm && id != HVD_PSET_GLOBAL)
		comm_destroy(p->comm);
	free(p->ranks);
	free(p);
	t->sets[id] = NULL;
}

void pset_table_free(struct pset_table *t)
{
	for (int i = 0; i < t->cap; i++)
		pset_table_remove(t, i);
	free(t->sets);
	memset(t, 0, sizeof(*t));
}
