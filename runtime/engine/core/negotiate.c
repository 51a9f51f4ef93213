/*
 * negotiate.c - the coordinator's table (rank 0 of the engine's world).
 *
 * Requests that missed the response cache arrive here, one list per rank
 * and cycle.  An entry becomes ready when every member of its process set
 * has submitted it or has joined; it is then validated field by field
 * (kind, type, count, reduction, root, scale factors, device, compression,
 * process set) and turned into one response, or into an error naming the
 * field and the value of every rank.  Ready entries leave in the order
 * they were first seen (rank 0's requests are added before rank 1's, and
 * so on), so the order is the same whatever the thread interleaving on
 * each rank.  Members of a group leave together, once all are ready.
 *
 * One coordinator serves every process set: it sees a name submitted to
 * two different sets and reports the mismatch, and a single response list
 * gives one total order in which every rank runs its member-only
 * collectives (a total order cannot deadlock).
 */
#include "config.h"

#include "engine/core/negotiate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hvd_status_t coord_init(struct coord *c, int size)
{
	memset(c, 0, sizeof(*c));
	c->size = size;
	c->last_joined = -1;
	hvd_list_init(&c->entries);
	namemap_init(&c->table);
	c->joined = calloc((size_t)size, sizeof(*c->joined));
	if (!c->joined)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	return HVD_OK;
}

static void entry_free(struct coord *c, struct coord_entry *e)
{
	for (int r = 0; r < c->size; r++)
		if (e->reqs[r]) {
			eng_req_free(e->reqs[r]);
			free(e->reqs[r]);
		}
	free(e->reqs);
	free(e->name);
	free(e);
}

static void entry_unlink(struct coord *c, struct coord_entry *e)
{
	hvd_list_remove(&e->order);
	namemap_del(&c->table, e->name);
	c->nentries--;
}

void coord_free(struct coord *c)
{
	struct hvd_list *it, *tmp;

	if (c->entries.next) /* initialised */
		hvd_list_for_each_safe(it, tmp, &c->entries)
		{
			struct coord_entry *e = coord_entry_of(it);

			entry_unlink(c, e);
			entry_free(c, e);
		}
	namemap_free(&c->table);
	free(c->joined);
	memset(c, 0, sizeof(*c));
}

hvd_status_t coord_add(struct coord *c, int rank, struct eng_req *req,
		       double now)
{
	struct coord_entry *e;

	if (rank < 0 || rank >= c->size)
		return hvd_error(HVD_ERR_INTERNAL, "hvd: request from rank %d",
				 rank);
	if (req->p.kind == EK_JOIN) {
		if (!c->joined[rank]) {
			c->joined[rank] = 1;
			c->njoined++;
		}
		c->last_joined = rank;
		eng_req_free(req);
		free(req);
		return HVD_OK;
	}
	e = namemap_get(&c->table, req->name);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->reqs = calloc((size_t)c->size, sizeof(*e->reqs));
		if (e && e->reqs)
			e->name = strdup(req->name);
		if (!e || !e->reqs || !e->name ||
		    namemap_put(&c->table, e->name, e) != HVD_OK) {
			if (e) {
				free(e->reqs);
				free(e->name);
			}
			free(e);
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		}
		e->first_seen = now - (req->age > 0 ? req->age : 0);
		hvd_list_push_back(&c->entries, &e->order);
		c->nentries++;
		if (c->on_first)
			c->on_first(c->tl_arg, e->name, req->p.kind, now);
	}
	if (e->reqs[rank]) {
		/* The name is unique per rank while in flight (checked at
		 * enqueue), so this is a stale duplicate: keep the first. */
		eng_req_free(req);
		free(req);
		return HVD_OK;
	}
	if (now - req->age < e->first_seen)
		e->first_seen = now - req->age;
	e->reqs[rank] = req;
	e->count++;
	if (c->on_rank)
		c->on_rank(c->tl_arg, e->name, rank, now);
	return HVD_OK;
}

static const struct eng_req *first_req(const struct coord *c,
				       const struct coord_entry *e)
{
	for (int r = 0; r < c->size; r++)
		if (e->reqs[r])
			return e->reqs[r];
	return NULL;
}

/* Members of the entry's set that are neither submitted nor joined. */
static int missing(const struct coord *c, const struct coord_entry *e,
		   int32_t pset)
{
	int n = 0;

	if (!c->njoined && c->set_size)
		return c->set_size(c->member_arg, pset) - e->count;
	for (int r = 0; r < c->size; r++)
		if (!e->reqs[r] && !c->joined[r] &&
		    (!c->is_member || c->is_member(c->member_arg, pset, r)))
			n++;
	return n;
}

static int is_ready(const struct coord *c, const struct coord_entry *e)
{
	const struct eng_req *q = first_req(c, e);

	if (!q)
		return 0;
	if (q->p.kind == EK_PSET_ADD || q->p.kind == EK_PSET_REMOVE)
		return e->count == c->size;
	return missing(c, e, q->p.pset) <= 0;
}

/* "0,2-3" */
static void format_ranks(char *buf, size_t len, const int *ranks, int n)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off + 16 < len; i++) {
		int j = i;

		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j > i)
			off +=
			    (size_t)snprintf(buf + off, len - off, "%s%d-%d",
					     i ? "," : "", ranks[i], ranks[j]);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%d",
						i ? "," : "", ranks[i]);
		i = j;
	}
}

enum field {
	F_KIND,
	F_PSET,
	F_DTYPE,
	F_SHAPE, /* before the count it implies: the clearer message */
	F_COUNT,
	F_OP,
	F_ROOT,
	F_SCALE,
	F_DEVICE,
	F_COMPRESS,
	F_RANKS,
	F_NFIELDS
};

static const char *const field_names[F_NFIELDS] = {
    "operation",	"process set",	     "data type",     "shape",
    "count",		"reduction",	     "root rank",     "scale factors",
    "device",		"fp16 compression",  "process set ranks",
};

static void format_field(char *buf, size_t len, const struct eng_req *q,
			 enum field f)
{
	switch (f) {
	case F_KIND:
		snprintf(buf, len, "%s", eng_kind_name(q->p.kind));
		break;
	case F_PSET:
		snprintf(buf, len, "%d", q->p.pset);
		break;
	case F_DTYPE:
		snprintf(buf, len, "%s",
			 hvd_dtype_name((hvd_dtype_t)q->p.dtype)
			     ? hvd_dtype_name((hvd_dtype_t)q->p.dtype)
			     : "?");
		break;
	case F_COUNT:
		snprintf(buf, len, "%" PRIu64, q->p.count);
		break;
	case F_SHAPE: {
		/* the first dimension of an allgather or alltoall is each
		 * rank's own: shown as "*" */
		int own = q->p.kind == EK_ALLGATHER || q->p.kind == EK_ALLTOALL;
		size_t off = 0;

		if (!q->ndims) {
			snprintf(buf, len, "none given");
			break;
		}
		buf[0] = '\0';
		for (uint32_t i = 0; i < q->ndims && off + 24 < len; i++) {
			if (i == 0 && own)
				off += (size_t)snprintf(buf + off, len - off,
							"[*");
			else
				off += (size_t)snprintf(
				    buf + off, len - off, "%s%" PRId64,
				    i ? ", " : "[", q->dims[i]);
		}
		snprintf(buf + off, len - off, "]");
		break;
	}
	case F_OP:
		snprintf(buf, len, "%s",
			 hvd_op_name((hvd_op_t)q->p.op)
			     ? hvd_op_name((hvd_op_t)q->p.op)
			     : "?");
		break;
	case F_ROOT:
		snprintf(buf, len, "%d", q->p.root);
		break;
	case F_SCALE:
		snprintf(buf, len, "(%g, %g)", q->p.prescale, q->p.postscale);
		break;
	case F_DEVICE:
		snprintf(buf, len, "%s",
			 q->p.flags & EF_DEVICE ? "GPU" : "CPU");
		break;
	case F_COMPRESS:
		snprintf(buf, len, "%s",
			 q->p.flags & EF_COMPRESS ? "on" : "off");
		break;
	case F_RANKS: {
		size_t off = 0;

		buf[0] = '\0';
		for (uint32_t i = 0; i < q->nranks && off + 16 < len; i++)
			off += (size_t)snprintf(buf + off, len - off, "%s%d",
						i ? "," : "[", q->ranks[i]);
		snprintf(buf + off, len - off, "%s", q->nranks ? "]" : "[]");
		break;
	}
	default:
		buf[0] = '\0';
	}
}

static int field_applies(int kind, enum field f)
{
	switch (f) {
	case F_COUNT:
		return kind != EK_ALLGATHER && kind != EK_PSET_ADD;
	case F_SHAPE:
		return kind <= EK_REDUCESCATTER;
	case F_OP:
		return kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER;
	case F_ROOT:
		return kind == EK_BROADCAST;
	case F_SCALE:
	case F_COMPRESS:
		return kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER;
	case F_RANKS:
		return kind == EK_PSET_ADD;
	case F_DTYPE:
	case F_DEVICE:
		return kind <= EK_REDUCESCATTER;
	default:
		return 1;
	}
}

/* Writes "hvd: mismatched X for KIND 'name': v1 on ranks a,b; v2 on rank
 * c" when the entry's requests disagree on a field; returns that field,
 * or -1 when they all agree. */
static int validate(const struct coord *c, const struct coord_entry *e,
		    char *msg, size_t len)
{
	const struct eng_req *ref = first_req(c, e);
	char a[256], b[256];

	for (int f = 0; f < F_NFIELDS; f++) {
		int differs = 0;

		if (f != F_KIND && !field_applies(ref->p.kind, (enum field)f))
			continue;
		format_field(a, sizeof(a), ref, (enum field)f);
		for (int r = 0; r < c->size && !differs; r++) {
			if (!e->reqs[r])
				continue;
			format_field(b, sizeof(b), e->reqs[r], (enum field)f);
			differs = strcmp(a, b) != 0;
		}
		if (!differs)
			continue;
		{
			/* Group ranks by value (at most 8 distinct). */
			char vals[8][256];
			int *rk[8], nrk[8] = {0}, nvals = 0, more = 0;
			size_t off;

			for (int i = 0; i < 8; i++)
				rk[i] = calloc((size_t)c->size, sizeof(int));
			for (int r = 0; r < c->size; r++) {
				int v;

				if (!e->reqs[r])
					continue;
				format_field(b, sizeof(b), e->reqs[r],
					     (enum field)f);
				for (v = 0; v < nvals && strcmp(vals[v], b);
				     v++)
					;
				if (v == nvals) {
					if (nvals == 8) {
						more = 1;
						continue;
					}
					snprintf(vals[nvals++], sizeof(vals[0]),
						 "%s", b);
				}
				if (rk[v])
					rk[v][nrk[v]++] = r;
			}
			if (ref->p.kind == EK_PSET_ADD ||
			    ref->p.kind == EK_PSET_REMOVE)
				off = (size_t)snprintf(
				    msg, len,
				    "hvd: %s: the %s differ between ranks "
				    "(every rank must make the same calls "
				    "in the same order):",
				    ref->p.kind == EK_PSET_ADD
					? "hvd_pset_add"
					: "hvd_pset_remove",
				    f == F_RANKS ? "rank lists"
						 : field_names[f]);
			else
				off = (size_t)snprintf(
				    msg, len, "hvd: mismatched %s for %s '%s':",
				    field_names[f], eng_kind_name(ref->p.kind),
				    e->name);
			for (int v = 0; v < nvals && off < len; v++) {
				char rl[256];

				format_ranks(rl, sizeof(rl), rk[v], nrk[v]);
				off += (size_t)snprintf(
				    msg + off, len - off, "%s %s on rank%s %s",
				    v ? ";" : "", vals[v],
				    nrk[v] > 1 ? "s" : "", rl);
			}
			if (off < len)
				snprintf(msg + off, len - off, "%s%s",
					 more ? "; ..." : "",
					 ref->p.kind >= EK_PSET_ADD
					     ? ""
					     : " (every rank must submit "
					       "a name with the same "
					       "parameters)");
			for (int i = 0; i < 8; i++)
				free(rk[i]);
		}
		return f;
	}
	return -1;
}

static hvd_status_t build(struct coord *c, struct coord_entry *e,
			  struct eng_resp *out)
{
	const struct eng_req *ref = first_req(c, e);
	char msg[1024];
	int joined = 0;
	int kind = ref->p.kind;

	memset(out, 0, sizeof(*out));
	out->p = ref->p;
	out->group_size = ref->group_size;
	out->last_joined = -1;
	out->name = strdup(e->name);
	if (ref->group)
		out->group = strdup(ref->group);
	if (!out->name || (ref->group && !out->group))
		goto err_oom;
	if (validate(c, e, msg, sizeof(msg)) >= 0) {
		out->p.kind = EK_ERROR;
		out->status = kind == EK_PSET_ADD || kind == EK_PSET_REMOVE
				  ? HVD_ERR_PROCESS_SET
				  : HVD_ERR_MISMATCH;
		out->message = strdup(msg);
		return out->message ? HVD_OK : HVD_ERR_NO_MEMORY;
	}
	for (int r = 0; r < c->size; r++)
		if (c->joined[r] && !e->reqs[r] &&
		    (!c->is_member ||
		     c->is_member(c->member_arg, ref->p.pset, r)))
			joined++;
	out->joined = joined;
	if (joined && kind != EK_ALLREDUCE && kind <= EK_REDUCESCATTER) {
		snprintf(msg, sizeof(msg),
			 "hvd: %s '%s' is not supported while ranks have "
			 "joined (hvd_join): only allreduce takes zeros from "
			 "joined ranks",
			 eng_kind_name(kind), e->name);
		out->p.kind = EK_ERROR;
		out->status = HVD_ERR_INVALID_ARG;
		out->message = strdup(msg);
		return out->message ? HVD_OK : HVD_ERR_NO_MEMORY;
	}
	if (kind == EK_ALLGATHER) {
		uint32_t n = 0;

		out->counts = calloc((size_t)c->size, sizeof(*out->counts));
		if (!out->counts)
			goto err_oom;
		for (int r = 0; r < c->size; r++)
			if (!c->is_member ||
			    c->is_member(c->member_arg, ref->p.pset, r))
				out->counts[n++] =
				    e->reqs[r] ? e->reqs[r]->p.count : 0;
		out->ncounts = n;
	}
	if (kind == EK_PSET_ADD && ref->nranks) {
		out->ranks = malloc(ref->nranks * sizeof(*out->ranks));
		if (!out->ranks)
			goto err_oom;
		memcpy(out->ranks, ref->ranks,
		       ref->nranks * sizeof(*out->ranks));
		out->nranks = ref->nranks;
	}
	return HVD_OK;
err_oom:
	eng_resp_free(out);
	return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
}

hvd_status_t coord_collect(struct coord *c, struct resp_list *out)
{
	struct namemap groups;
	struct hvd_list *it, *tmp;
	hvd_status_t st = HVD_OK;

	/* Count ready members per group, so that a group leaves whole. */
	namemap_init(&groups);
	hvd_list_for_each_safe(it, tmp, &c->entries)
	{
		const struct coord_entry *e = coord_entry_of(it);
		const struct eng_req *q = first_req(c, e);

		if (q && q->group && q->group_size > 1 && is_ready(c, e))
			namemap_put(
			    &groups, q->group,
			    (void *)((intptr_t)namemap_get(&groups, q->group) +
				     1));
	}
	hvd_list_for_each_safe(it, tmp, &c->entries)
	{
		struct coord_entry *e = coord_entry_of(it);
		const struct eng_req *q = first_req(c, e);
		struct eng_resp *r;

		if (!is_ready(c, e))
			continue;
		if (q->group && q->group_size > 1 &&
		    (intptr_t)namemap_get(&groups, q->group) <
			(intptr_t)q->group_size)
			continue;
		r = resp_list_push(out);
		if (!r) {
			st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
			break;
		}
		st = build(c, e, r);
		if (st != HVD_OK) {
			out->n--;
			break;
		}
		if (c->on_ready)
			c->on_ready(c->tl_arg, e->name, 0);
		entry_unlink(c, e);
		entry_free(c, e);
	}
	namemap_free(&groups);
	if (st == HVD_OK && c->njoined == c->size) {
		struct eng_resp *r = resp_list_push(out);

		if (!r)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		r->p.kind = EK_JOIN;
		r->p.prescale = r->p.postscale = 1.0;
		r->last_joined = c->last_joined;
		r->name = strdup("__hvd_join");
		if (!r->name) {
			out->n--;
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		}
		memset(c->joined, 0, (size_t)c->size * sizeof(*c->joined));
		c->njoined = 0;
		c->last_joined = -1;
	}
	return st;
}
