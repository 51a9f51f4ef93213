/*
 * stall.c - the stall inspector's report, run on the coordinator.
 *
 * A tensor that some ranks submitted and others did not is the classic
 * Horovod hang (a rank-dependent code path, a checkpoint restored on one
 * rank only).  Every HOROVOD_STALL_CHECK_TIME_SECONDS the coordinator lists
 * the tensors waiting longer than that, with the ranks that have not
 * submitted them; past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS the engine shuts
 * down and every pending op fails with HVD_ERR_STALLED instead of hanging.
 * Cached tensors reach this table too: a rank whose cache hit waits longer
 * than the warning time sends it to the coordinator (cycle.c).
 */
#include "config.h"

#include "engine/core/stall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends the ranks of e's set that have not submitted it. */
static size_t missing_ranks(const struct coord *c, const struct coord_entry *e,
			    char *buf, size_t len, int *nmissing)
{
	const struct eng_req *q = NULL;
	size_t off = 0;
	int n = 0;

	for (int r = 0; r < c->size && !q; r++)
		q = e->reqs[r];
	buf[0] = '\0';
	for (int r = 0; r < c->size && q; r++) {
		if (e->reqs[r] || c->joined[r])
			continue;
		if (q->p.kind <= EK_REDUCESCATTER && c->is_member &&
		    !c->is_member(c->member_arg, q->p.pset, r))
			continue;
		if (off + 16 < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%d",
						n ? "," : "", r);
		else if (off + 4 < len && buf[off - 1] != '.')
			off += (size_t)snprintf(buf + off, len - off, "...");
		n++;
	}
	*nmissing = n;
	return off;
}

int stall_check(const struct coord *c, double now, double warn, double shutdown,
		char *msg, size_t msglen)
{
	const struct hvd_list *it;
	int nstalled = 0, nshut = 0, shown = 0;
	char *report = NULL;
	size_t off = 0, cap = 0;

	if (msglen)
		msg[0] = '\0';
	for (it = c->entries.next; it != &c->entries; it = it->next) {
		const struct coord_entry *e = coord_entry_of(it);
		double age = now - e->first_seen;
		char ranks[256];
		int nmiss;
		const struct eng_req *q = NULL;

		if (age < warn)
			continue;
		for (int r = 0; r < c->size && !q; r++)
			q = e->reqs[r];
		missing_ranks(c, e, ranks, sizeof(ranks), &nmiss);
		nstalled++;
		if (shutdown > 0 && age >= shutdown) {
			/* The error every pending op gets: all stalled
			 * tensors (as many as fit), with their missing
			 * ranks. */
			size_t mo = msglen ? strlen(msg) : 0;

			if (!nshut && msglen)
				mo = (size_t)snprintf(
				    msg, msglen,
				    "hvd: stalled longer than HOROVOD_STALL_"
				    "SHUTDOWN_TIME_SECONDS=%g, the engine "
				    "shut down (check for rank-dependent "
				    "code paths):",
				    shutdown);
			if (mo + 1 < msglen)
				snprintf(
				    msg + mo, msglen - mo,
				    "%s %s '%s' waited %.0f s for rank%s %s",
				    nshut ? ";" : "",
				    q ? eng_kind_name(q->p.kind) : "op",
				    e->name, age, nmiss > 1 ? "s" : "", ranks);
			nshut++;
		}
		if (shown < 32) {
			char line[512];
			int n = snprintf(line, sizeof(line),
					 "\n  %s '%s' (process set %d) waited "
					 "%.0f s; missing rank%s: %s",
					 q ? eng_kind_name(q->p.kind) : "op",
					 e->name, q ? q->p.pset : 0, age,
					 nmiss > 1 ? "s" : "", ranks);

			if (n > 0 && off + (size_t)n + 1 > cap) {
				size_t ncap = cap ? cap * 2 : 4096;
				char *nr;

				while (ncap < off + (size_t)n + 1)
					ncap *= 2;
				nr = realloc(report, ncap);
				if (!nr)
					break;
				report = nr;
				cap = ncap;
			}
			if (n > 0) {
				memcpy(report + off, line, (size_t)n + 1);
				off += (size_t)n;
			}
			shown++;
		}
	}
	if (nstalled)
		hvd_log(nshut ? HVD_LOG_ERROR : HVD_LOG_WARNING,
			"%d tensor%s submitted by some ranks waited more than "
			"%g s for the others (HOROVOD_STALL_CHECK_TIME_SECONDS)"
			". Different ranks may be submitting different "
			"tensors, or only some ranks submit them, which "
			"deadlocks:%s%s%s",
			nstalled, nstalled > 1 ? "s" : "", warn,
			report ? report : "", nstalled > shown ? "\n  ..." : "",
			nshut ? "\n  Shutting down the engine "
				"(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)."
			      : "");
	free(report);
	return nshut;
}
