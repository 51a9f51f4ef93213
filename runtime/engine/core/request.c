/*
 * request.c - the request and response types' upkeep: freeing, deep
 * copies (the response cache keeps its own copy of each response), the
 * kind names that messages and the timeline use, and the growing list of
 * a cycle's responses.
 */
#include "config.h"

#include "engine/core/request.h"

#include <stdlib.h>
#include <string.h>

void eng_req_free(struct eng_req *r)
{
	if (!r)
		return;
	free(r->ranks);
	free(r->dims);
	free(r->name);
	free(r->group);
	memset(r, 0, sizeof(*r));
}

void eng_resp_free(struct eng_resp *r)
{
	if (!r)
		return;
	free(r->counts);
	free(r->ranks);
	free(r->name);
	free(r->group);
	free(r->message);
	memset(r, 0, sizeof(*r));
}

static int dup_mem(void **dst, const void *src, size_t n)
{
	*dst = NULL;
	if (!src || !n)
		return 0;
	*dst = malloc(n);
	if (!*dst)
		return -1;
	memcpy(*dst, src, n);
	return 0;
}

static int dup_str(char **dst, const char *src)
{
	return dup_mem((void **)dst, src, src ? strlen(src) + 1 : 0);
}

hvd_status_t eng_resp_copy(struct eng_resp *dst, const struct eng_resp *src)
{
	*dst = *src;
	dst->counts = NULL;
	dst->ranks = NULL;
	dst->name = dst->group = dst->message = NULL;
	if (dup_mem((void **)&dst->counts, src->counts,
		    src->ncounts * sizeof(*src->counts)) ||
	    dup_mem((void **)&dst->ranks, src->ranks,
		    src->nranks * sizeof(*src->ranks)) ||
	    dup_str(&dst->name, src->name) ||
	    dup_str(&dst->group, src->group) ||
	    dup_str(&dst->message, src->message)) {
		eng_resp_free(dst);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	return HVD_OK;
}

const char *eng_kind_name(int kind)
{
	static const char *const names[EK_COUNT] = {
	    [EK_ALLREDUCE] = "ALLREDUCE",
	    [EK_ALLGATHER] = "ALLGATHER",
	    [EK_BROADCAST] = "BROADCAST",
	    [EK_ALLTOALL] = "ALLTOALL",
	    [EK_REDUCESCATTER] = "REDUCESCATTER",
	    [EK_JOIN] = "JOIN",
	    [EK_PSET_ADD] = "PROCESS_SET_ADD",
	    [EK_PSET_REMOVE] = "PROCESS_SET_REMOVE",
	    [EK_ERROR] = "ERROR",
	    [EK_SHUTDOWN] = "SHUTDOWN",
	};

	return kind >= 0 && kind < EK_COUNT ? names[kind] : "UNKNOWN";
}

void resp_list_free(struct resp_list *l)
{
	for (int i = 0; i < l->n; i++)
		eng_resp_free(&l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

struct eng_resp *resp_list_push(struct resp_list *l)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		struct eng_resp *v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	memset(&l->v[l->n], 0, sizeof(l->v[0]));
	return &l->v[l->n++];
}
