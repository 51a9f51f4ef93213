/*
 * test_lane_if.c - which addresses the TCP lane offers, in which order,
 * and in which order a rank dials a peer's (runtime/net/lane_if.c):
 * interfaces down, without a carrier, loopback, docker* and virbr* are
 * not offered; HVD_TCP_LANE_IF, else UCX_NET_DEVICES, names the ones
 * that are; the fastest come first, then the default route's, then the
 * kernel's order; a peer's addresses on a subnet of ours are dialled
 * first, and our own addresses never for a peer elsewhere; whether
 * UCX_TLS and UCX_NET_DEVICES leave UCX the node's RDMA devices (else the
 * lane runs where it has them too).  IPv6: an interface's IPv4 address
 * before its IPv6 one, a faster IPv6-only interface before both, IPv6
 * subnets dialled first like IPv4's, and never an IPv4 subnet taking in
 * an IPv6 address.  Networks where an earlier dial got no answer are
 * dialled last.  IPv6 addresses not settled (tentative, failed
 * duplicates, deprecated, temporary) are not offered.  Then this
 * machine's own interfaces, read for real:
 * every offered one is up and running, loopback and link-local IPv6
 * addresses are not among them.
 */
#include "config.h"

#include "net/lane_if.h"
#include "tap.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#define RUN (IFF_UP | IFF_RUNNING)

/* An entry for ip (IPv4 or IPv6 text) with a prefix of that length. */
static struct lane_if mk(const char *name, const char *ip, int prefix,
			 unsigned flags, uint32_t mbps, int dflt, int order)
{
	struct lane_if f;
	uint32_t v4;

	memset(&f, 0, sizeof(f));
	snprintf(f.name, sizeof(f.name), "%s", name);
	if (inet_pton(AF_INET, ip, &v4) == 1) {
		lane_ip4(f.ip, v4);
		prefix += 96;
	} else {
		inet_pton(AF_INET6, ip, f.ip);
	}
	for (int b = 0; b < prefix; b++)
		f.mask[b / 8] |= (uint8_t)(0x80 >> (b % 8));
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

/* ip as the lane holds it, from IPv4 or IPv6 text. */
static void ip_of(uint8_t ip[16], const char *s)
{
	uint32_t a = 0;

	memset(ip, 0, 16);
	if (inet_pton(AF_INET, s, &a) == 1)
		lane_ip4(ip, a);
	else
		inet_pton(AF_INET6, s, ip);
}

/* A peer's four addresses. */
static void peer4(uint8_t p[4][16], const char *a, const char *b,
		  const char *c, const char *d)
{
	ip_of(p[0], a);
	ip_of(p[1], b);
	ip_of(p[2], c);
	ip_of(p[3], d);
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
	uint8_t peer[4][16];

	plan(33);

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
	peer4(peer, "10.9.0.7", "10.0.0.7", "172.17.0.1", "10.2.3.7");
	is_int(lane_if_dial_order(peer, 4, v, k, n, NULL, order), 3,
	       "a peer elsewhere: our own address is not dialled");
	ok(order[0] == 1 && order[1] == 3 && order[2] == 0,
	   "our subnets first, in the peer's order, then the rest (%d %d %d)",
	   order[0], order[1], order[2]);

	/* A peer on this node (HVD_TCP_LANE_LOCAL): all its addresses are
	 * ours, and all are dialled. */
	ip_of(peer[0], "10.2.0.5");
	ip_of(peer[1], "10.0.0.5");
	is_int(lane_if_dial_order(peer, 2, v, k, n, NULL, order), 2,
	       "a peer on this node: its addresses, ours too, are dialled");
	ok(order[0] == 0 && order[1] == 1, "in its order (%d %d)", order[0],
	   order[1]);
	/* Loopback alone (HVD_TCP_LANE_LOCAL, no other address). */
	ip_of(peer[0], "127.0.0.1");
	is_int(lane_if_dial_order(peer, 1, v, k, n, NULL, order), 1,
	       "loopback from a peer of this node is dialled");

	/* IPv6: eno1 (1 GbE, default route) has 10.0.0.5/24 and
	 * fd00:0:0:1::5/64, ens1 (25 GbE) fd00:0:0:2::5/64 alone, br0
	 * 10.3.0.5 with a /0 mask, and eno1's link has a second IPv6
	 * address. */
	n = 0;
	v[n] = mk("eno1", "fd00:0:0:1::5", 64, RUN, 1000, 1, n), n++;
	v[n] = mk("eno1", "10.0.0.5", 24, RUN, 1000, 1, n), n++;
	v[n] = mk("ens1", "fd00:0:0:2::5", 64, RUN, 25000, 0, n), n++;
	v[n] = mk("eno1", "2001:db8::5", 64, RUN, 1000, 1, n), n++;
	k = lane_if_rank(v, n, NULL, NULL);
	{
		char a[LANE_IP_STRLEN], b[LANE_IP_STRLEN], c[LANE_IP_STRLEN],
		    d[LANE_IP_STRLEN], all[4 * LANE_IP_STRLEN];

		snprintf(all, sizeof(all), "%s %s %s %s",
			 lane_ip_str(v[0].ip, a), lane_ip_str(v[1].ip, b),
			 lane_ip_str(v[2].ip, c), lane_ip_str(v[3].ip, d));
		is_str(all, "fd00:0:0:2::5 10.0.0.5 fd00:0:0:1::5 2001:db8::5",
		       "IPv6: the fastest interface first, IPv6 alone; then "
		       "an interface's IPv4 before its IPv6, IPv6 in the "
		       "kernel's order");
	}
	ok(lane_ip_is4(v[1].ip) && !lane_ip_is4(v[0].ip),
	   "lane_ip_is4: IPv4 mapped, IPv6 not");
	peer4(peer, "10.9.0.7", "fd00:0:0:2::7", "2001:db8:1::7",
	      "fd00:0:0:1::7");
	is_int(lane_if_dial_order(peer, 4, v, k, n, NULL, order), 4,
	       "IPv6: a peer elsewhere, every address dialled");
	ok(order[0] == 1 && order[1] == 3 && order[2] == 0 && order[3] == 2,
	   "IPv6 subnets of ours first, in the peer's order (%d %d %d %d)",
	   order[0], order[1], order[2], order[3]);
	/* An earlier dial found ens1's network silent (its IPv6 not routed
	 * between the nodes, say), and routed IPv6 too. */
	{
		unsigned char slow[LANE_NETS] = {0};
		int ens1 = lane_if_net(peer[1], v, k);

		ok(ens1 == 0 && lane_if_net(peer[3], v, k) == 2 &&
			   lane_if_net(peer[0], v, k) == LANE_NET_ROUTED4 &&
			   lane_if_net(peer[2], v, k) == LANE_NET_ROUTED6,
		   "lane_if_net: the offered interface whose subnet it is, "
		   "else routed IPv4 or IPv6 (%d)", ens1);
		slow[ens1] = 1;
		slow[LANE_NET_ROUTED6] = 1;
		is_int(lane_if_dial_order(peer, 4, v, k, n, slow, order), 4,
		       "slow networks: still every address dialled");
		ok(order[0] == 3 && order[1] == 0 && order[2] == 1 &&
			   order[3] == 2,
		   "slow networks last: our other subnets, the rest, then "
		   "the slow ones in the same order (%d %d %d %d)",
		   order[0], order[1], order[2], order[3]);
	}
	n = 0;
	v[n] = mk("br0", "10.3.0.5", 0, RUN, 0, 0, n), n++;
	k = lane_if_rank(v, n, NULL, NULL);
	ip_of(peer[0], "fd00::7");
	ip_of(peer[1], "192.168.9.9");
	is_int(lane_if_dial_order(peer, 2, v, k, n, NULL, order), 2,
	       "an IPv4 subnet of /0 and two peer addresses");
	ok(order[0] == 1 && order[1] == 0,
	   "an IPv4 /0 takes in every IPv4 address, no IPv6 one (%d %d)",
	   order[0], order[1]);
	/* our own IPv6 address is not dialled either */
	n = 0;
	v[n] = mk("ens1", "fd00::5", 64, RUN, 0, 0, n), n++;
	k = lane_if_rank(v, n, NULL, NULL);
	ip_of(peer[0], "fd00::5");
	ip_of(peer[1], "fd00::7");
	ok(lane_if_dial_order(peer, 2, v, k, n, NULL, order) == 1 && order[0] == 1,
	   "IPv6: our own address is not dialled for a peer elsewhere, "
	   "the one next to it is");

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

	/* Lines of /proc/net/if_inet6 as the kernel writes them (flags:
	 * 0x80 permanent, 0x40 tentative, 0x20 deprecated, 0x08 DAD failed,
	 * 0x04 optimistic, 0x01 temporary). */
	{
		static const struct {
			const char *line;
			int want;
		} l6[] = {
		    {"fd770000000000000000000000000002 04d3 40 00 80 fast0\n",
		     0},
		    {"fd770000000000000000000000000006 4d3 40 00 c0 tvb\n", 1},
		    {"fd770000000000000000000000000005 4d3 40 00 a0 tvb\n", 1},
		    {"fd770000000000000000000000000001 4d3 40 00 c8 tvb\n", 1},
		    {"20010db8000000000000000000000007 2 40 00 01 eno1\n", 1},
		    {"20010db8000000000000000000000008 2 40 00 44 eno1\n", 0},
		    {"20010db800000000000000000000000 2 40 00 80 eno1\n", -1},
		    {"20010db800000000000000000000000g 2 40 00 80 eno1\n", -1},
		    {"garbage\n", -1},
		};
		uint8_t got[16], want[16];
		int good = 1;

		for (size_t i = 0; i < sizeof(l6) / sizeof(l6[0]); i++)
			if (lane_if_v6_unfit(l6[i].line, got) != l6[i].want) {
				diag("%s: %d", l6[i].line,
				     lane_if_v6_unfit(l6[i].line, got));
				good = 0;
			}
		ok(good, "/proc/net/if_inet6: permanent and optimistic "
			 "offered; tentative, deprecated, failed DAD, "
			 "temporary not; a short address, a bad digit, "
			 "garbage: no line");
		ip_of(want, "fd77::2");
		lane_if_v6_unfit(l6[0].line, got);
		ok(memcmp(got, want, 16) == 0,
		   "/proc/net/if_inet6: the address read");
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
		uint8_t lo4[16];
		int ll = 0;

		ip_of(lo4, "127.0.0.1");
		for (int i = 0; i < n; i++) {
			if ((v[i].flags & IFF_LOOPBACK) &&
			    memcmp(v[i].ip, lo4, 16) == 0)
				lo++;
			if (v[i].ip[0] == 0xfe && (v[i].ip[1] & 0xc0) == 0x80)
				ll++;
			if (!lane_ip_is4(v[i].ip) &&
			    memcmp(v[i].ip, &in6addr_loopback, 16) == 0)
				ll++;
		}
		ok(bad == 0, "this machine: %d offered (%s), none down, "
			     "without carrier or loopback",
		   k, names(v, k));
		ok(ll == 0, "this machine: no link-local or loopback IPv6 "
			    "address scanned (%d)",
		   ll);
		ok(lo == 1, "this machine: the scan sees loopback (%d of %d)",
		   lo, n);
	}
	return done_testing();
}
