/*
 * forge_attacker.c - a process outside the job (tests/runtime/forge.sh
 * runs it as nobody, over UCX's TCP transport) that has learned a rank's
 * UCX worker address and connects to it, as anyone on the node can
 * connect to the worker's TCP port:
 *
 *	forge_attacker DIR notice   forged failure notices, every form:
 *	                            libhvd's old {dead, reporter} on the old
 *	                            tags, the new 24-byte form with a made-up
 *	                            MAC on the plain tag, and with DIR/tagkey
 *	                            (the tag key, as if read off the wire)
 *	                            on the keyed tag
 *	forge_attacker DIR data     64-byte messages on the tags of the first
 *	                            4096 collectives of contexts 1 and 2 from
 *	                            sources 0-2 (what the victim's allreduces
 *	                            of 16 int32 receive), before they run
 *
 * It creates DIR/go once its first messages are out (the victim starts its
 * allreduces then), sends notices for 2 s, and creates DIR/done.  No
 * libhvd: the address record is decoded with bootstrap_blob.c.
 */
#include "config.h"

#include "net/bootstrap.h"

#include <ucp/api/ucp.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

struct notice24 {
	uint32_t magic;
	int32_t dead, reporter;
	uint32_t seq;
	uint64_t mac;
};

static void notices(uint64_t tagkey, int have_key)
{
	static int32_t old[4][4][2];
	static struct notice24 n24[64];
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
		struct notice24 *m = &n24[k++ % 64];

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
	int have_key = 0, data;
	double t0;

	if (argc < 3) {
		fprintf(stderr, "usage: forge_attacker DIR notice|data\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	data = !strcmp(argv[2], "data");
	rec = slurp("addr", &len);
	if (!rec || bootstrap_blob_decode(rec, len, &peer) != HVD_OK) {
		fprintf(stderr, "forge_attacker: no address record in %s\n",
			dir);
		return 1;
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
