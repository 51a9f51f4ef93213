/*
 * forge_attacker.c - a process outside the job (tests/runtime/forge.sh
 * runs it as nobody, over UCX's TCP transport) that has learned a rank's
 * UCX worker address and connects to it, as anyone on the node can
 * connect to the worker's TCP port:
 *
 *	forge_attacker DIR notice   forged failure notices, every form:
 *	                            libhvd's old {dead, reporter} on the old
 *	                            tags, the new 32-byte form with a made-up
 *	                            MAC on the plain tag, and with DIR/tagkey
 *	                            (the tag key, as if read off the wire)
 *	                            on the keyed tag
 *	forge_attacker DIR data     64-byte messages on the tags of the first
 *	                            4096 collectives of contexts 1 and 2 from
 *	                            sources 0-2 (what the victim's allreduces
 *	                            of 16 int32 receive), before they run
 *
 *	forge_attacker DIR memb     forged messages of the elastic agreement
 *	                            (tests/runtime/forge_elastic.sh) to the
 *	                            worker at DIR/maddr (a running world's
 *	                            rank 0) for the epoch in DIR/epoch: a
 *	                            decision that leaves every rank but 0
 *	                            (pid DIR/pid0) out, a removal, a proposal
 *	                            from rank 2 that reports rank 1 gone, the
 *	                            same of the epoch before and a stale
 *	                            decision, and a join request with a wrong
 *	                            token; on the plain tags and, with
 *	                            DIR/tagkey, on the keyed ones; each with
 *	                            a made-up MAC
 *	forge_attacker DIR leak RDVDIR JOB [tagkey]
 *	                            not an attack: the test, as the job's
 *	                            user, reads the rendezvous file and
 *	                            leaves rank 0's worker address and the
 *	                            epoch (and the tag key, as if read off
 *	                            the wire; never the job's key) in DIR
 *
 * It creates DIR/go once its first messages are out (the victim starts its
 * allreduces then), sends notices for 2 s, and creates DIR/done.  No
 * libhvd: the address record is decoded with bootstrap_blob.c, the
 * agreement's messages encoded with memb_core.c.
 */
#include "config.h"

#include "api/rendezvous.h"
#include "net/bootstrap.h"
#include "net/memb_core.h"
#include "net/siphash.h"
#include "runtime/forge_files.h"

#include <ucp/api/ucp.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static ucp_worker_h worker;
static ucp_ep_h ep;
static long sent, failed;
static char dir[2048];

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *slurp(const char *name, size_t *len)
{
	char p[4096];
	unsigned char *b = malloc(1 << 16);
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "rb");
	if (!f || !b) {
		free(b);
		if (f)
			fclose(f);
		return NULL;
	}
	*len = fread(b, 1, 1 << 16, f);
	fclose(f);
	return b;
}

static void touch(const char *name)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

static void on_error(void *arg, ucp_ep_h e, ucs_status_t s)
{
	(void)arg;
	(void)e;
	fprintf(stderr, "forge_attacker: connection error: %s\n",
		ucs_status_string(s));
}

static void *reqs[4096];
static int nreq;

/* Progress until at most keep sends are in flight. */
static void drain(int keep)
{
	double t0 = now();

	while (nreq > keep && now() - t0 < 10) {
		int left = 0;

		ucp_worker_progress(worker);
		for (int i = 0; i < nreq; i++) {
			if (ucp_request_check_status(reqs[i]) ==
			    UCS_INPROGRESS) {
				reqs[left++] = reqs[i];
				continue;
			}
			ucp_request_free(reqs[i]);
		}
		nreq = left;
	}
}

/* Fire one message; at most 4096 in flight. */
static void fire(uint64_t tag, const void *buf, size_t len)
{
	ucp_request_param_t prm;
	void *r;

	if (nreq == 4096)
		drain(2048);
	if (nreq == 4096) {
		failed++;
		return;
	}
	memset(&prm, 0, sizeof(prm));
	r = ucp_tag_send_nbx(ep, buf, len, tag, &prm);
	if (UCS_PTR_IS_ERR(r)) {
		failed++;
		return;
	}
	sent++;
	if (r)
		reqs[nreq++] = r;
}

static void flush(void)
{
	ucp_request_param_t prm;
	void *r;
	double t0 = now();

	drain(0);
	memset(&prm, 0, sizeof(prm));
	r = ucp_ep_flush_nbx(ep, &prm);
	while (r && !UCS_PTR_IS_ERR(r) &&
	       ucp_request_check_status(r) == UCS_INPROGRESS && now() - t0 < 10)
		ucp_worker_progress(worker);
	if (r && !UCS_PTR_IS_ERR(r))
		ucp_request_free(r);
}

/* libhvd's notice (net/auth.h's struct auth_notice) */
struct notice32 {
	uint32_t magic;
	int32_t dead, reporter;
	uint32_t seq, how, zero;
	uint64_t mac;
};

static void notices(uint64_t tagkey, int have_key)
{
	static int32_t old[4][4][2];
	static struct notice32 n32[64];
	int k = 0;

	/* libhvd's old notices: {dead, reporter} on ctx 0xffff | source */
	for (int d = 0; d < 3; d++)
		for (int r = 0; r < 3; r++) {
			if (d == r || r == 1)
				continue;
			old[d][r][0] = d;
			old[d][r][1] = r;
			fire((uint64_t)0xffff << 48 | (uint64_t)r, old[d][r], 8);
		}
	/* the new form with a made-up MAC, on the plain notice tag and,
	 * when the tag key is known, on the keyed one */
	for (int d = 0; d < 3; d++) {
		struct notice32 *m = &n32[k++ % 64];

		m->magic = 0x4e445648u;
		m->dead = d;
		m->reporter = d == 2 ? 0 : 2;
		m->seq = 1000 + (uint32_t)k;
		m->mac = 0x0123456789abcdefull * (uint64_t)k;
		fire((uint64_t)0xffff << 48, m, sizeof(*m));
		if (have_key)
			fire(((uint64_t)0xffff << 48) ^ tagkey, m, sizeof(*m));
	}
	flush();
}

/* forge_attacker DIR leak RDVDIR JOB [tagkey] */
static int leak_rdv(const char *rdvdir, const char *job, int give_tagkey)
{
	static const char what[] = "hvd tag key v1";
	struct rdv_info r;
	char txt[64];
	int missing;

	if (rdv_read(rdvdir, job, &r, &missing) != HVD_OK) {
		fprintf(stderr, "forge_attacker: %s\n", hvd_last_error());
		return 1;
	}
	if (forge_write_file(dir, "maddr", r.addr, r.addr_len))
		return 1;
	snprintf(txt, sizeof(txt), "%u\n", r.epoch);
	if (forge_write_file(dir, "epoch", txt, strlen(txt)))
		return 1;
	if (give_tagkey) {
		snprintf(txt, sizeof(txt), "%016llx",
			 (unsigned long long)siphash24(r.key, what,
						       sizeof(what) - 1));
		if (forge_write_file(dir, "tagkey", txt, 16))
			return 1;
	}
	rdv_info_free(&r);
	return 0;
}

/* memb_wire.c's tag: context, epoch and type, source */
static uint64_t mtag(uint32_t ctx, uint32_t epoch, int type, int src)
{
	uint32_t seq = ((epoch & 0xfffffu) << 4) | (uint32_t)type;

	return ((uint64_t)ctx << 48) | ((uint64_t)(seq & 0xffffffu) << 24) |
	       (uint64_t)((uint32_t)src & 0xffffffu);
}

#define MCTX 0xfffeu /* net/membership.h: MEMB_CTX */
#define JCTX 0xfffdu /* JOIN_CTX */

/* One forged message with a made-up MAC, on the plain tag and, when the
 * tag key is known, on the keyed one (the copies live until exit). */
static void fire_memb(uint64_t tag, const struct memb_buf *b, uint64_t tagkey,
		      int have_key)
{
	uint8_t *m = malloc(b->len + 8);
	uint64_t mac = 0x0badc0de5eedull ^ tag;

	if (!m)
		return;
	memcpy(m, b->p, b->len);
	memcpy(m + b->len, &mac, 8);
	fire(tag, m, b->len + 8);
	if (have_key)
		fire(tag ^ tagkey, m, b->len + 8);
}

/* A peer record as the forged messages claim it: rank and pid as given,
 * rank 0's worker address (the only one the attacker knows). */
static void forged_peer(struct memb_peer *p, int rank, int pid, void *addr,
			uint32_t addr_len)
{
	p->old_rank = rank;
	p->pid = pid;
	p->pmix_local_rank = rank;
	p->pmix_rank = rank;
	snprintf(p->node_key, sizeof(p->node_key), "forged");
	snprintf(p->nspace, sizeof(p->nspace), "forged");
	p->addr = addr;
	p->addr_len = addr_len;
}

static void memb_attack(uint64_t tagkey, int have_key, void *addr,
			uint32_t addr_len)
{
	size_t n;
	char *t = slurp("epoch", &n);
	char *p = slurp("pid0", &n);
	uint32_t e = t ? (uint32_t)strtoul(t, NULL, 10) : 0;
	int32_t pid0 = p ? (int32_t)strtol(p, NULL, 10) : 0;
	uint32_t old = e ? e - 1 : 0xfffffu;
	struct memb_buf b = {0};
	struct memb_peer self = {0}, r0 = {0};
	uint8_t gone[4] = {0}, none[4] = {0};

	free(t);
	free(p);
	forged_peer(&r0, 0, pid0, addr, addr_len);
	/* a decision of the next world: rank 0 alone (the others dropped) */
	for (int k = 0; k < 3; k++) {
		struct memb_decide d = {0};
		uint32_t tag_epoch = k == 2 ? old : e;

		/* k 0: the next world; 1: a stale one (this epoch's own, as
		 * a replay of the decision that made it); 2: on the tag of
		 * the epoch before */
		d.epoch = k == 0 ? e + 1 : e;
		d.sender = 1;
		d.status = 0;
		d.min_size = 1;
		snprintf(d.world, sizeof(d.world), "forged@%u", d.epoch);
		d.n = 1;
		d.peers = &r0;
		if (memb_encode_decide(&b, &d) == HVD_OK)
			fire_memb(mtag(MCTX, tag_epoch, MEMB_DECIDE, 1), &b,
				  tagkey, have_key);
	}
	/* this rank is out */
	if (memb_encode_removed(&b, e, 1, "forged: you are out") == HVD_OK)
		fire_memb(mtag(MCTX, e, MEMB_REMOVED, 1), &b, tagkey,
			  have_key);
	/* rank 2 says rank 1 is gone, now and in the epoch before */
	forged_peer(&self, 2, 1, addr, addr_len);
	gone[0] = 1u << 1;
	for (int k = 0; k < 2; k++) {
		struct memb_propose pr = {0};

		pr.epoch = k ? old : e;
		pr.sender = 2;
		pr.nranks = 3;
		pr.failed = gone;
		pr.quiet = none;
		pr.doubt = none;
		pr.self = self;
		if (memb_encode_propose(&b, &pr) == HVD_OK)
			fire_memb(mtag(MCTX, pr.epoch, MEMB_PROPOSE, 2), &b,
				  tagkey, have_key);
	}
	/* a newcomer with a made-up token */
	{
		struct memb_join j = {0};
		const char *job = getenv("SLURM_JOB_ID");

		memset(j.token, 0x42, sizeof(j.token));
		snprintf(j.jobid, sizeof(j.jobid), "%s",
			 job && *job ? job : "local");
		j.step_size = 1;
		j.step_rank = 0;
		j.reply_addr = addr;
		j.reply_addr_len = addr_len;
		j.self = self;
		j.self.old_rank = -1;
		snprintf(j.self.nspace, sizeof(j.self.nspace), "forged-step");
		if (memb_encode_join(&b, 0, &j) == HVD_OK)
			fire_memb(mtag(JCTX, 0, MEMB_JOIN, 0), &b, tagkey,
				  have_key);
	}
	memb_buf_free(&b);
	flush();
}

int main(int argc, char **argv)
{
	ucp_params_t params;
	ucp_worker_params_t wp;
	ucp_ep_params_t ep_params;
	ucp_config_t *config;
	ucp_context_h ctx;
	struct bootstrap_peer peer;
	unsigned char *rec;
	char *hex;
	size_t len, hlen;
	uint64_t tagkey = 0;
	int have_key = 0, data, memb;
	double t0;

	if (argc < 3) {
		fprintf(stderr, "usage: forge_attacker DIR notice|data|memb, "
				"forge_attacker DIR leak RDVDIR JOB [tagkey]\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	if (!strcmp(argv[2], "leak"))
		return argc < 5 ? 2 : leak_rdv(argv[3], argv[4], argc > 5);
	data = !strcmp(argv[2], "data");
	memb = !strcmp(argv[2], "memb");
	if (memb) {
		/* a bare UCX address, not a bootstrap record */
		memset(&peer, 0, sizeof(peer));
		rec = slurp("maddr", &len);
		if (!rec || !len) {
			fprintf(stderr, "forge_attacker: no address in %s\n",
				dir);
			return 1;
		}
		peer.addr = malloc(len);
		if (!peer.addr)
			return 1;
		memcpy(peer.addr, rec, len);
		peer.addr_len = len;
	} else {
		rec = slurp("addr", &len);
		if (!rec || bootstrap_blob_decode(rec, len, &peer) != HVD_OK) {
			fprintf(stderr,
				"forge_attacker: no address record in %s\n",
				dir);
			return 1;
		}
	}
	hex = slurp("tagkey", &hlen);
	if (hex && hlen >= 16) {
		hex[16] = '\0';
		tagkey = strtoull(hex, NULL, 16);
		have_key = 1;
	}
	if (ucp_config_read(NULL, NULL, &config) != UCS_OK)
		return 1;
	memset(&params, 0, sizeof(params));
	params.field_mask = UCP_PARAM_FIELD_FEATURES;
	params.features = UCP_FEATURE_TAG;
	if (ucp_init(&params, config, &ctx) != UCS_OK)
		return 1;
	ucp_config_release(config);
	memset(&wp, 0, sizeof(wp));
	if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK)
		return 1;
	memset(&ep_params, 0, sizeof(ep_params));
	ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
			       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			       UCP_EP_PARAM_FIELD_ERR_HANDLER;
	ep_params.address = peer.addr;
	ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
	ep_params.err_handler.cb = on_error;
	if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) {
		fprintf(stderr, "forge_attacker: cannot connect\n");
		return 1;
	}
	if (memb) {
		memb_attack(tagkey, have_key, peer.addr, (uint32_t)peer.addr_len);
		printf("forge_attacker: %ld messages sent (%ld refused)%s\n",
		       sent, failed, have_key ? ", with the tag key" : "");
		fflush(stdout);
		touch("done");
		goto out;
	}
	if (data) {
		static unsigned char junk[64];

		memset(junk, 0x5a, sizeof(junk));
		for (uint64_t c = 1; c <= 2; c++)
			for (uint64_t seq = 0; seq < 4096; seq++)
				for (uint64_t src = 0; src < 3; src++)
					fire(c << 48 | seq << 24 | src, junk,
					     sizeof(junk));
		flush();
	}
	touch("go");
	t0 = now();
	do {
		if (!data)
			notices(tagkey, have_key);
		usleep(100000);
		ucp_worker_progress(worker);
	} while (now() - t0 < 2);
	flush();
	printf("forge_attacker: %ld messages sent (%ld refused)%s\n", sent,
	       failed, have_key ? ", with the tag key" : "");
	fflush(stdout);
	touch("done");
out:
	{
		ucp_request_param_t prm;
		void *r;

		memset(&prm, 0, sizeof(prm));
		prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
		prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
		r = ucp_ep_close_nbx(ep, &prm);
		while (r && !UCS_PTR_IS_ERR(r) &&
		       ucp_request_check_status(r) == UCS_INPROGRESS)
			ucp_worker_progress(worker);
		if (r && !UCS_PTR_IS_ERR(r))
			ucp_request_free(r);
	}
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	free(peer.addr);
	free(rec);
	free(hex);
	return 0;
}
