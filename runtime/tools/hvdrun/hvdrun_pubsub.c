/*
 * hvdrun_pubsub.c - PMIx_Publish / PMIx_Lookup / PMIx_Unpublish for the
 * ranks of one hvdrun job (what MPI_Publish_name and MPI_Lookup_name use).
 *
 * A list of (key, value, publisher) in memory.  The upcalls all run on the
 * PMIx progress thread, so the list needs no lock.  Directives in the info
 * arrays (keys in the "pmix." namespace: range, persistence, the user and
 * group ids the library adds) are not data and are ignored: the range is
 * always this job, data lives until unpublished or hvdrun exits.  A lookup
 * that asks to wait (PMIX_WAIT) for a key not yet published is answered
 * at once with what exists; ranks needing order should fence first.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <pmix.h>
#include <pmix_server.h>

#include "tools/hvdrun/hvdrun.h"

struct entry {
	struct entry *next;
	pmix_proc_t owner;
	pmix_key_t key;
	pmix_value_t value;
};

static struct entry *entries;

static int is_directive(const char *key) { return !strncmp(key, "pmix.", 5); }

static struct entry *find(const char *key)
{
	struct entry *e;

	for (e = entries; e; e = e->next)
		if (PMIX_CHECK_KEY(e, key))
			return e;
	return NULL;
}

static pmix_status_t publish(const pmix_proc_t *proc, const pmix_info_t info[],
			     size_t ninfo, pmix_op_cbfunc_t cbfunc,
			     void *cbdata)
{
	pmix_status_t st = PMIX_SUCCESS;
	size_t i;

	/* All or nothing: a key already published fails the call. */
	for (i = 0; i < ninfo; i++)
		if (!is_directive(info[i].key) && find(info[i].key))
			st = PMIX_ERR_DUPLICATE_KEY;
	for (i = 0; i < ninfo && st == PMIX_SUCCESS; i++) {
		struct entry *e;

		if (is_directive(info[i].key))
			continue;
		e = calloc(1, sizeof(*e));
		if (!e) {
			st = PMIX_ERR_NOMEM;
			break;
		}
		e->owner = *proc;
		PMIX_LOAD_KEY(e->key, info[i].key);
		st = PMIx_Value_xfer(&e->value, &info[i].value);
		if (st != PMIX_SUCCESS) {
			free(e);
			break;
		}
		e->next = entries;
		entries = e;
	}
	if (cbfunc)
		cbfunc(st, cbdata);
	return PMIX_SUCCESS;
}

static pmix_status_t lookup(const pmix_proc_t *proc, char **keys,
			    const pmix_info_t info[], size_t ninfo,
			    pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	pmix_pdata_t *pd = NULL;
	size_t n = 0, k = 0, i;

	while (keys && keys[n])
		n++;
	if (n)
		PMIX_PDATA_CREATE(pd, n);
	for (i = 0; i < n && pd; i++) {
		struct entry *e = find(keys[i]);

		if (!e)
			continue;
		pd[k].proc = e->owner;
		PMIX_LOAD_KEY(pd[k].key, e->key);
		if (PMIx_Value_xfer(&pd[k].value, &e->value) == PMIX_SUCCESS)
			k++;
	}
	/* The library copies the results before the callback returns. */
	if (cbfunc)
		cbfunc(k ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND, k ? pd : NULL, k,
		       cbdata);
	if (pd)
		PMIX_PDATA_FREE(pd, n);
	return PMIX_SUCCESS;
}

static pmix_status_t unpublish(const pmix_proc_t *proc, char **keys,
			       const pmix_info_t info[], size_t ninfo,
			       pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct entry **pe = &entries, *e;

	while ((e = *pe)) {
		int match = PMIX_CHECK_PROCID(&e->owner, proc);

		if (match && keys) {
			size_t i;

			match = 0;
			for (i = 0; keys[i]; i++)
				if (PMIX_CHECK_KEY(e, keys[i]))
					match = 1;
		}
		if (match) {
			*pe = e->next;
			PMIx_Value_destruct(&e->value);
			free(e);
		} else {
			pe = &e->next;
		}
	}
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, cbdata);
	return PMIX_SUCCESS;
}

void hvdrun_pubsub_install(pmix_server_module_t *m)
{
	m->publish = publish;
	m->lookup = lookup;
	m->unpublish = unpublish;
}
