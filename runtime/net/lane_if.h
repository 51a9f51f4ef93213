/*
 * net/lane_if.h - which of a node's addresses the TCP lane offers
 * (net/lane.h), best first, and in which order a rank tries a peer's.
 *
 * A node often has several interfaces: a management network with the
 * default route, a faster data network, docker0 or virbr0 with the same
 * address on every node, a port with no cable.  The lane offers the
 * addresses of the interfaces that are up and running (carrier), never
 * loopback, docker* or virbr* unless named, and of only those named by
 * HVD_TCP_LANE_IF (a comma list) or, unset, by UCX_NET_DEVICES (what the
 * SPANK plugin sets, so that the lane goes where UCX goes); the fastest
 * first (the driver's link speed; one that does not say comes last),
 * then the interface of a default route, then IPv4 before IPv6 (UCX's
 * order of address families), then the kernel's order.  IPv6 addresses
 * count where they are global or unique-local (a link-local one means
 * nothing without its interface, which differs from node to node) and
 * settled: not tentative (duplicate address detection under way: nobody
 * reaches it yet), not a failed duplicate, not deprecated (the kernel
 * starts no new connection from it) and not temporary (a privacy address
 * that changes with time, beside the interface's stable one).  A
 * rank dials a peer's addresses that share a subnet with one of its own
 * offered ones first, and never an address of its own where the peer is
 * on another node (docker0's 172.17.0.1 would reach this node itself).
 *
 * The ranking and the dialling order are pure functions (tested in
 * tests/unit/test_lane_if.c); lane_if_scan reads the interfaces.
 */
#ifndef HVD_NET_LANE_IF_H
#define HVD_NET_LANE_IF_H

#include <net/if.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define LANE_IF_MAX 32
/* An address as text, IPv6's longest */
#define LANE_IP_STRLEN 46

/* Addresses are IPv6, IPv4 mapped (::ffff:a.b.c.d) into it; a mask
 * likewise, so that an IPv4 subnet never takes in an IPv6 address. */
struct lane_if {
	char name[IF_NAMESIZE];
	uint8_t ip[16], mask[16];
	unsigned flags;    /* IFF_UP, IFF_RUNNING, IFF_LOOPBACK, ...  */
	uint32_t mbps;     /* link speed; 0: the device does not say */
	int dflt;          /* a default route leaves by it             */
	int order;         /* its place in the kernel's list            */
};

/* The list that names the lane's interfaces: lane_ifs (a comma list)
 * when it is set and not empty, else ucx_devices unless that is unset,
 * empty or "all" (entries such as mlx5_0:1 name no interface); *var says
 * which ("HVD_TCP_LANE_IF", "UCX_NET_DEVICES").  NULL when neither names
 * any: every interface but docker* and virbr* may serve. */
const char *lane_if_list(const char *lane_ifs, const char *ucx_devices,
			 const char **var);
/* 1 when the interface may carry the lane: named in lane_if_list's list,
 * or, without one, neither docker* nor virbr*. */
int lane_if_allowed(const char *name, const char *lane_ifs,
		    const char *ucx_devices);
/* Reorder v[0..n): first the interfaces that can carry the lane (up,
 * running, not loopback, allowed), best first and in the kernel's order
 * among equals, then the others (still this rank's addresses) in the
 * kernel's order; the number that can. */
int lane_if_rank(struct lane_if *v, int n, const char *lane_ifs,
		 const char *ucx_devices);
/* The network an address of a peer's is on, as this rank sees it: the
 * index of the first of its noffer offered interfaces whose subnet takes
 * it in, else LANE_NET_ROUTED4 or LANE_NET_ROUTED6 (reached by a route).
 * Below LANE_NETS. */
#define LANE_NET_ROUTED4 LANE_IF_MAX
#define LANE_NET_ROUTED6 (LANE_IF_MAX + 1)
#define LANE_NETS (LANE_IF_MAX + 2)
int lane_if_net(const uint8_t ip[16], const struct lane_if *v, int noffer);
/* The order in which to try a peer's nip addresses (indexes into ip,
 * order[] has room for nip), given this rank's interfaces as
 * lane_if_rank left them, noffer of them offered: a peer address on the
 * subnet of an offered one first, then the rest, each in the peer's
 * order; after them all, in that order too, those on a network (as
 * lane_if_net says) that slow[] marks (NULL: none), where an earlier
 * dial got no answer while another address did.  An address of this
 * rank's own (any of the n) is left out unless every address of the
 * peer is one (the peer is on this node).  The number to try. */
int lane_if_dial_order(const uint8_t (*ip)[16], int nip,
		       const struct lane_if *v, int noffer, int n,
		       const unsigned char *slow, int order[]);
/* ip as IPv4 (network byte order) mapped into IPv6. */
void lane_ip4(uint8_t ip[16], uint32_t v4);
/* 1 when ip is an IPv4 address (mapped). */
int lane_ip_is4(const uint8_t ip[16]);
/* ip as text (dotted for IPv4) into out (LANE_IP_STRLEN bytes); out. */
char *lane_ip_str(const uint8_t ip[16], char *out);
/* Where the node has RDMA devices: 1 when UCX may carry data over them,
 * going by UCX_TLS (unset, empty or "all"; a list naming an InfiniBand
 * transport, rc*, ud*, dc* or ib; or an exclusion "^..." that leaves one)
 * and UCX_NET_DEVICES (unset, empty or "all", or naming a device:port
 * such as mlx5_0:1).  The SPANK plugin's net=tcp (UCX_TLS=tcp,sm,self,
 * UCX_NET_DEVICES=eth0) gives 0: UCX then copies through TCP as anywhere
 * else, and the lane is worth having. */
int lane_if_rdma_allowed(const char *tls, const char *devices);
/* The lane's ports: "MIN-MAX" (1..65535) or "0", unset or empty for
 * any (*lo = *hi = 0).  0, or -1 for anything else. */
int lane_if_port_range(const char *s, unsigned *lo, unsigned *hi);
/* One line of /proc/net/if_inet6 ("ADDR IFINDEX PREFIX SCOPE FLAGS
 * NAME", hex): 1 when it names an IPv6 address the lane must not offer
 * (tentative but not optimistic, a failed duplicate, deprecated or
 * temporary), 0 when it may, each with the address in ip; -1 for a line
 * that is not one. */
int lane_if_v6_unfit(const char *line, uint8_t ip[16]);
/* This rank's addresses (IPv4, and IPv6 but link-local and those
 * lane_if_v6_unfit refuses), an entry each, in the kernel's order, with
 * their interface's speed and whether a default route (IPv4 or IPv6)
 * leaves by it; at most max, the number read (0 where they cannot be
 * read). */
int lane_if_scan(struct lane_if *v, int max);

#pragma GCC visibility pop

#endif
