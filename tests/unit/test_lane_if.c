/*
 * test_lane_if.c - which addresses the TCP lane offers, in which order,
 * and in which order a rank dials a peer's (runtime/net/lane_if.c):
 * interfaces down, without a carrier, loopback, docker* and virbr* are
 * not offered; HVD_TCP_LANE_IF, else UCX_NET_DEVICES, names the ones
 * that are; the fastest come first, then the default route's, then the
 * kernel's order; a peer's addresses on a subnet of ours are dialled
 * first, and our own addresses never for a peer elsewhere; whether
 * UCX_TLS and UCX_NET_DEVICES leave UCX the node's RDMA devices (else the
 * lane runs where it has them too).  Then this
 * machine's own interfaces, read for real: every offered one is up and
 * running, and loopback is not among them.
 */
#include "config.h"

#include "net/lane_if.h"
#include "tap.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#define RUN (IFF_UP | IFF_RUNNING)

static struct lane_if mk(const char *name, const char *ip, int prefix,
			 unsigned flags, uint32_t mbps, int dflt, int order)
{
	struct lane_if f;

	memset(&f, 0, sizeof(f));
	snprintf(f.name, sizeof(f.name), "%s", name);
	inet_pton(AF_INET, ip, &f.ip);
	f.mask = prefix ? htonl(~0u << (32 - prefix)) : 0;
	f.flags = flags;
	f.mbps = mbps;
	f.dflt = dflt;
	f.order = order;
	return f;
}

/* The names of v[0..n), space-separated. */
static const char *names(const struct lane_if *v, int n)
{
	static char out[256];
	size_t off = 0;

	out[0] = '\0';
	for (int i = 0; i < n && off < sizeof(out); i++)
		off += (size_t)snprintf(out + off, sizeof(out) - off, "%s%s",
					i ? " " : "", v[i].name);
	return out;
}

static uint32_t ip4(const char *s)
{
	uint32_t a = 0;

	inet_pton(AF_INET, s, &a);
	return a;
}

/* A node with a 1 GbE management port carrying the default route, a
 * 25 GbE data port, docker0 (up, with containers), a port without a
 * cable, a bridge, loopback and a port that is down. */
static int node(struct lane_if *v)
{
	int n = 0;

	v[n] = mk("lo", "127.0.0.1", 8, RUN | IFF_LOOPBACK, 0, 0, n), n++;
	v[n] = mk("eno1", "10.0.0.5", 24, RUN, 1000, 1, n), n++;
	v[n] = mk("docker0", "172.17.0.1", 16, RUN, 10000, 0, n), n++;
	v[n] = mk("ens2", "10.1.0.5", 16, IFF_UP, 100000, 0, n), n++;
	v[n] = mk("ens1", "10.2.0.5", 16, RUN, 25000, 0, n), n++;
	v[n] = mk("br0", "10.3.0.5", 24, RUN, 0, 0, n), n++;
	v[n] = mk("virbr0", "192.168.122.1", 24, RUN, 0, 0, n), n++;
	v[n] = mk("ens3", "10.4.0.5", 24, 0, 25000, 0, n), n++;
	return n;
}

int main(void)
{
	struct lane_if v[LANE_IF_MAX];
	int n, k, order[8];
	uint32_t peer[4];

	plan(20);

	n = node(v);
	k = lane_if_rank(v, n, NULL, NULL);
	is_str(names(v, k), "ens1 eno1 br0",
	       "offered: running, not lo/docker*/virbr*, fastest first, "
	       "a speed the driver does not give last");
	is_int(n, 8, "the interfaces not offered stay, after the offered ones");
	is_str(names(v + k, n - k), "lo docker0 ens2 virbr0 ens3",
	       "the rest in the kernel's order");

	n = node(v);
	v[4].mbps = 1000; /* ens1 as slow as eno1: the default route wins */
	k = lane_if_rank(v, n, NULL, NULL);
	is_str(names(v, k), "eno1 ens1 br0",
	       "equal speeds: the default route's interface first");

	n = node(v);
	v[1].dflt = 0;
	v[4].mbps = 1000;
	k = lane_if_rank(v, n, "", "all");
	is_str(names(v, k), "eno1 ens1 br0",
	       "equal speeds, no default route: the kernel's order; "
	       "HVD_TCP_LANE_IF empty and UCX_NET_DEVICES=all filter nothing");

	n = node(v);
	k = lane_if_rank(v, n, NULL, "eno1");
	is_str(names(v, k), "eno1", "UCX_NET_DEVICES=eno1: eno1 alone");

	n = node(v);
	k = lane_if_rank(v, n, NULL, "mlx5_0:1,eno1,br0");
	is_str(names(v, k), "eno1 br0",
	       "UCX_NET_DEVICES=mlx5_0:1,eno1,br0: its interfaces, ranked");

	n = node(v);
	k = lane_if_rank(v, n, "docker0,ens2,ens3", "eno1");
	is_str(names(v, k), "docker0",
	       "HVD_TCP_LANE_IF over UCX_NET_DEVICES; docker0 when named; "
	       "never one without carrier or down");

	n = node(v);
	k = lane_if_rank(v, n, "ens", NULL);
	is_int(k, 0, "HVD_TCP_LANE_IF=ens: names are whole, not prefixes");
	ok(!lane_if_allowed("eno10", "eno1", NULL) &&
		   lane_if_allowed("eno1", "eth0,eno1", NULL) &&
		   !lane_if_allowed("docker1", NULL, NULL) &&
		   lane_if_allowed("docker1", NULL, "docker1"),
	   "lane_if_allowed: whole names in a comma list");

	/* Dialling: this node offers ens1 (10.2/16), eno1 (10.0.0/24), br0
	 * (10.3.0/24).  A peer that offers 10.9.0.7 (no subnet of ours),
	 * 10.0.0.7 (eno1's), 172.17.0.1 (ours: docker0) and 10.2.3.7
	 * (ens1's). */
	n = node(v);
	k = lane_if_rank(v, n, NULL, NULL);
	peer[0] = ip4("10.9.0.7");
	peer[1] = ip4("10.0.0.7");
	peer[2] = ip4("172.17.0.1");
	peer[3] = ip4("10.2.3.7");
	is_int(lane_if_dial_order(peer, 4, v, k, n, order), 3,
	       "a peer elsewhere: our own address is not dialled");
	ok(order[0] == 1 && order[1] == 3 && order[2] == 0,
	   "our subnets first, in the peer's order, then the rest (%d %d %d)",
	   order[0], order[1], order[2]);

	/* A peer on this node (HVD_TCP_LANE_LOCAL): all its addresses are
	 * ours, and all are dialled. */
	peer[0] = ip4("10.2.0.5");
	peer[1] = ip4("10.0.0.5");
	is_int(lane_if_dial_order(peer, 2, v, k, n, order), 2,
	       "a peer on this node: its addresses, ours too, are dialled");
	ok(order[0] == 0 && order[1] == 1, "in its order (%d %d)", order[0],
	   order[1]);
	/* Loopback alone (HVD_TCP_LANE_LOCAL, no other address). */
	peer[0] = ip4("127.0.0.1");
	is_int(lane_if_dial_order(peer, 1, v, k, n, order), 1,
	       "loopback from a peer of this node is dialled");

	/* RDMA devices, and what UCX may do with them. */
	ok(lane_if_rdma_allowed(NULL, NULL) && lane_if_rdma_allowed("", "") &&
		   lane_if_rdma_allowed("all", "all") &&
		   lane_if_rdma_allowed("rc,sm,self", "mlx5_0:1") &&
		   lane_if_rdma_allowed("ud_x,tcp", NULL) &&
		   lane_if_rdma_allowed("dc_mlx5", "eth0,mlx5_1:1") &&
		   lane_if_rdma_allowed("^tcp", NULL) &&
		   lane_if_rdma_allowed("^rc,ud", NULL),
	   "RDMA in UCX's hands: by default, rc/ud/dc named, a device:port "
	   "named, or not all of rc, ud and dc excluded");
	ok(!lane_if_rdma_allowed("tcp,sm,self", "eth0") &&
		   !lane_if_rdma_allowed("tcp,sm,self", NULL) &&
		   !lane_if_rdma_allowed(NULL, "eth0") &&
		   !lane_if_rdma_allowed("^ib", NULL) &&
		   !lane_if_rdma_allowed("^rc,ud,dc", NULL) &&
		   !lane_if_rdma_allowed("sm,self", NULL),
	   "not (the lane is worth having): the plugin's net=tcp "
	   "(UCX_TLS=tcp,sm,self, UCX_NET_DEVICES=eth0), netdevs alone, "
	   "ib or rc, ud and dc excluded");

	{
		unsigned lo, hi;
		int good = lane_if_port_range("20000-20999", &lo, &hi) == 0 &&
			   lo == 20000 && hi == 20999 &&
			   lane_if_port_range("7", &lo, &hi) != 0 &&
			   lane_if_port_range("1-65535", &lo, &hi) == 0 &&
			   lane_if_port_range("0", &lo, &hi) == 0 && lo == 0 &&
			   lane_if_port_range(NULL, &lo, &hi) == 0 && hi == 0;
		const char *bad[] = {"0-10",  "10-9",   "1-65536", "-5",
				     "a-b",   "5-",     "5-6x",    " 5-6",
				     "5--6", "1-2,3-4"};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (lane_if_port_range(bad[i], &lo, &hi) != -1)
				good = 0;
		ok(good, "port ranges: MIN-MAX within 1-65535, 0 or unset "
			 "for any; a single port, reversed, out of range or "
			 "trailing text is not one");
	}

	/* This machine's interfaces, read for real. */
	n = lane_if_scan(v, LANE_IF_MAX);
	k = lane_if_rank(v, n, NULL, NULL);
	{
		int bad = 0, lo = 0;

		for (int i = 0; i < k; i++)
			if ((v[i].flags & RUN) != RUN ||
			    (v[i].flags & IFF_LOOPBACK))
				bad++;
		for (int i = 0; i < n; i++)
			if ((v[i].flags & IFF_LOOPBACK) &&
			    v[i].ip == ip4("127.0.0.1"))
				lo++;
		ok(bad == 0, "this machine: %d offered (%s), none down, "
			     "without carrier or loopback",
		   k, names(v, k));
		ok(lo == 1, "this machine: the scan sees loopback (%d of %d)",
		   lo, n);
	}
	return done_testing();
}
