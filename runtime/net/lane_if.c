/*
 * net/lane_if.c - the TCP lane's interfaces (net/lane_if.h).
 */
#include "config.h"

#include "net/lane_if.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/if_addr.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Is name one of the comma-separated entries of list? */
static int in_list(const char *name, const char *list)
{
	size_t len = strlen(name);

	for (const char *p = list; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && strncmp(p, name, n) == 0)
			return 1;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* A UCX list that restricts: set, not empty, not "all". */
static int restricts(const char *v)
{
	return v && *v && strcmp(v, "all") != 0;
}

const char *lane_if_list(const char *lane_ifs, const char *ucx_devices,
			 const char **var)
{
	if (lane_ifs && *lane_ifs) {
		*var = "HVD_TCP_LANE_IF";
		return lane_ifs;
	}
	if (restricts(ucx_devices)) {
		*var = "UCX_NET_DEVICES";
		return ucx_devices;
	}
	*var = NULL;
	return NULL;
}

int lane_if_allowed(const char *name, const char *lane_ifs,
		    const char *ucx_devices)
{
	const char *var, *list = lane_if_list(lane_ifs, ucx_devices, &var);

	if (list)
		return in_list(name, list);
	return strncmp(name, "docker", 6) != 0 &&
	       strncmp(name, "virbr", 5) != 0;
}

static int usable(const struct lane_if *f, const char *lane_ifs,
		  const char *ucx_devices)
{
	return (f->flags & IFF_UP) && (f->flags & IFF_RUNNING) &&
	       !(f->flags & IFF_LOOPBACK) &&
	       lane_if_allowed(f->name, lane_ifs, ucx_devices);
}

/* Insertion sort on (usable, speed, default route, IPv4 first, kernel
 * order), the unusable in the kernel's order: a handful of entries. */
static int better(const struct lane_if *a, int ua, const struct lane_if *b,
		  int ub)
{
	if (ua != ub)
		return ua > ub;
	if (!ua)
		return a->order < b->order;
	if (a->mbps != b->mbps)
		return a->mbps > b->mbps;
	if (a->dflt != b->dflt)
		return a->dflt > b->dflt;
	if (lane_ip_is4(a->ip) != lane_ip_is4(b->ip))
		return lane_ip_is4(a->ip);
	return a->order < b->order;
}

int lane_if_rank(struct lane_if *v, int n, const char *lane_ifs,
		 const char *ucx_devices)
{
	int offer = 0;

	for (int i = 1; i < n; i++) {
		struct lane_if t = v[i];
		int ut = usable(&t, lane_ifs, ucx_devices), j = i;

		while (j > 0 && better(&t, ut, &v[j - 1],
				       usable(&v[j - 1], lane_ifs,
					      ucx_devices))) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = t;
	}
	while (offer < n && usable(&v[offer], lane_ifs, ucx_devices))
		offer++;
	return offer;
}

void lane_ip4(uint8_t ip[16], uint32_t v4)
{
	memset(ip, 0, 10);
	ip[10] = ip[11] = 0xff;
	memcpy(ip + 12, &v4, 4);
}

int lane_ip_is4(const uint8_t ip[16])
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(ip, pre, sizeof(pre)) == 0;
}

char *lane_ip_str(const uint8_t ip[16], char *out)
{
	if (!inet_ntop(lane_ip_is4(ip) ? AF_INET : AF_INET6,
		       lane_ip_is4(ip) ? ip + 12 : ip, out, LANE_IP_STRLEN))
		snprintf(out, LANE_IP_STRLEN, "?");
	return out;
}

/* Is a within f's subnet? */
static int on_subnet(const uint8_t a[16], const struct lane_if *f)
{
	for (int b = 0; b < 16; b++)
		if ((a[b] ^ f->ip[b]) & f->mask[b])
			return 0;
	return 1;
}

int lane_if_net(const uint8_t ip[16], const struct lane_if *v, int noffer)
{
	for (int j = 0; j < noffer && j < LANE_IF_MAX; j++)
		if (on_subnet(ip, &v[j]))
			return j;
	return lane_ip_is4(ip) ? LANE_NET_ROUTED4 : LANE_NET_ROUTED6;
}

int lane_if_dial_order(const uint8_t (*ip)[16], int nip,
		       const struct lane_if *v, int noffer, int n,
		       const unsigned char *slow, int order[])
{
	int k = 0, all_mine = 1;
	char own[LANE_IF_MAX * 2], pass_of[LANE_IF_MAX * 2];

	if (nip > (int)sizeof(own))
		nip = (int)sizeof(own);
	/* each address's pass: near and answering, far and answering, near
	 * and slow, far and slow */
	for (int i = 0; i < nip; i++) {
		int net = lane_if_net(ip[i], v, noffer);

		own[i] = 0;
		for (int j = 0; j < n; j++)
			if (memcmp(v[j].ip, ip[i], 16) == 0)
				own[i] = 1;
		if (!own[i])
			all_mine = 0;
		pass_of[i] =
		    (char)((net >= LANE_IF_MAX) + (slow && slow[net] ? 2 : 0));
	}
	for (int pass = 0; pass < 4; pass++)
		for (int i = 0; i < nip; i++)
			if (pass_of[i] == pass && !(own[i] && !all_mine))
				order[k++] = i;
	return k;
}

/* Does the comma list name an InfiniBand transport of UCX's? */
static int names_ib(const char *list, int *rc, int *ud, int *dc)
{
	*rc = *ud = *dc = 0;
	for (const char *p = list; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == 2 && strncmp(p, "ib", 2) == 0)
			*rc = *ud = *dc = 1;
		else if (n >= 2 && strncmp(p, "rc", 2) == 0)
			*rc = 1;
		else if (n >= 2 && strncmp(p, "ud", 2) == 0)
			*ud = 1;
		else if (n >= 2 && strncmp(p, "dc", 2) == 0)
			*dc = 1;
		if (!end)
			break;
		p = end + 1;
	}
	return *rc || *ud || *dc;
}

int lane_if_rdma_allowed(const char *tls, const char *devices)
{
	int rc, ud, dc;

	if (restricts(devices) && !strchr(devices, ':'))
		return 0;
	if (!restricts(tls))
		return 1;
	if (tls[0] == '^') {
		names_ib(tls + 1, &rc, &ud, &dc);
		return !(rc && ud && dc);
	}
	return names_ib(tls, &rc, &ud, &dc) || in_list("all", tls);
}

int lane_if_port_range(const char *s, unsigned *lo, unsigned *hi)
{
	unsigned long a, b;
	char *end;

	*lo = *hi = 0;
	if (!s || !*s || strcmp(s, "0") == 0)
		return 0;
	if (*s < '0' || *s > '9')
		return -1;
	a = strtoul(s, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return -1;
	b = strtoul(end + 1, &end, 10);
	if (*end || a < 1 || b > 65535 || a > b)
		return -1;
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

/* The link speed the driver reports (Mb/s), 0 when it does not. */
static uint32_t link_mbps(int sock, const char *name)
{
	struct ethtool_cmd cmd;
	struct ifreq ifr;
	uint32_t s;

	memset(&ifr, 0, sizeof(ifr));
	memset(&cmd, 0, sizeof(cmd));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	cmd.cmd = ETHTOOL_GSET;
	ifr.ifr_data = (void *)&cmd;
	if (sock < 0 || ioctl(sock, SIOCETHTOOL, &ifr) != 0)
		return 0;
	/* not ethtool_cmd_speed(): its shift overflows an int for
	 * SPEED_UNKNOWN (UBSan) */
	s = (uint32_t)cmd.speed_hi << 16 | cmd.speed;
	/* SPEED_UNKNOWN is (u32)-1; nothing real is above 10 Tb/s */
	return s > 10000000u ? 0 : s;
}

/* A default route leaves by ifn: mark each of its addresses. */
static void mark(struct lane_if *v, int n, const char *ifn)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v[i].name, ifn) == 0)
			v[i].dflt = 1;
}

/* Mark the interfaces a default route leaves by, IPv4's (0.0.0.0/0) and
 * IPv6's (::/0), from this network namespace's /proc/net/route and
 * /proc/net/ipv6_route. */
static void mark_default(struct lane_if *v, int n)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256];

	while (f && fgets(line, sizeof(line), f)) {
		char ifn[IF_NAMESIZE + 1];
		unsigned long dest, gw, flags, mask;
		int refcnt, use, metric;

		if (sscanf(line, "%16s %lx %lx %lx %d %d %d %lx", ifn, &dest, &gw,
			   &flags, &refcnt, &use, &metric, &mask) == 8 &&
		    dest == 0 && mask == 0 && (flags & 1 /* RTF_UP */))
			mark(v, n, ifn);
	}
	if (f)
		fclose(f);
	/* dest plen src plen gateway metric refcnt use flags name; the
	 * unreachable default on lo is a reject route */
	f = fopen("/proc/net/ipv6_route", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char dest[33], ifn[IF_NAMESIZE + 1];
		unsigned plen, flags;

		if (sscanf(line, "%32s %x %*s %*x %*s %*x %*x %*x %x %16s",
			   dest, &plen, &flags, ifn) == 4 &&
		    strspn(dest, "0") == 32 && plen == 0 &&
		    (flags & 1 /* RTF_UP */) && !(flags & 0x200 /* RTF_REJECT */))
			mark(v, n, ifn);
	}
	if (f)
		fclose(f);
}

/* An IPv6 address the lane can offer: not link-local (its meaning
 * depends on the interface), loopback, multicast or IPv4-mapped. */
static int v6_usable(const struct in6_addr *a)
{
	return !IN6_IS_ADDR_LINKLOCAL(a) && !IN6_IS_ADDR_LOOPBACK(a) &&
	       !IN6_IS_ADDR_MULTICAST(a) && !IN6_IS_ADDR_V4MAPPED(a) &&
	       !IN6_IS_ADDR_UNSPECIFIED(a);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int lane_if_v6_unfit(const char *line, uint8_t ip[16])
{
	char hex[33], name[IF_NAMESIZE + 1];
	unsigned flags;

	/* address, interface index, prefix, scope, flags, name */
	if (sscanf(line, "%32s %*x %*x %*x %x %16s", hex, &flags, name) != 3 ||
	    strlen(hex) != 32)
		return -1;
	for (int b = 0; b < 16; b++) {
		int hi = hexval(hex[2 * b]), lo = hexval(hex[2 * b + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		ip[b] = (uint8_t)(hi << 4 | lo);
	}
	/* an optimistic address (RFC 4429) answers while it is tentative */
	if ((flags & IFA_F_TENTATIVE) && !(flags & IFA_F_OPTIMISTIC))
		return 1;
	return (flags & (IFA_F_DADFAILED | IFA_F_DEPRECATED |
			 IFA_F_TEMPORARY)) != 0;
}

/* The IPv6 addresses of this network namespace the lane must not offer
 * (lane_if_v6_unfit), at most max of them into bad; how many. */
static int v6_unfit(uint8_t (*bad)[16], int max)
{
	FILE *f = fopen("/proc/net/if_inet6", "re");
	char line[256];
	int n = 0;

	while (f && n < max && fgets(line, sizeof(line), f))
		if (lane_if_v6_unfit(line, bad[n]) == 1)
			n++;
	if (f)
		fclose(f);
	return n;
}

static int listed(const uint8_t ip[16], const uint8_t (*v)[16], int n)
{
	for (int k = 0; k < n; k++)
		if (memcmp(ip, v[k], 16) == 0)
			return 1;
	return 0;
}

int lane_if_scan(struct lane_if *v, int max)
{
	struct ifaddrs *ifa, *i;
	uint8_t bad[LANE_IF_MAX * 2][16];
	int n = 0, sock, nbad;

	if (getifaddrs(&ifa) != 0)
		return 0;
	nbad = v6_unfit(bad, LANE_IF_MAX * 2);
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	for (i = ifa; i && n < max; i = i->ifa_next) {
		struct lane_if *f = &v[n];
		int fam = i->ifa_addr ? i->ifa_addr->sa_family : AF_UNSPEC;

		if ((fam != AF_INET && fam != AF_INET6) || !i->ifa_name ||
		    strlen(i->ifa_name) >= sizeof(f->name))
			continue;
		memset(f, 0, sizeof(*f));
		if (fam == AF_INET) {
			const struct sockaddr_in *m =
			    (const struct sockaddr_in *)i->ifa_netmask;

			lane_ip4(f->ip, ((struct sockaddr_in *)i->ifa_addr)
					    ->sin_addr.s_addr);
			lane_ip4(f->mask, m ? m->sin_addr.s_addr : 0xffffffffu);
			memset(f->mask, 0xff, 12);
		} else {
			const struct sockaddr_in6 *a =
			    (const struct sockaddr_in6 *)i->ifa_addr;
			const struct sockaddr_in6 *m =
			    (const struct sockaddr_in6 *)i->ifa_netmask;

			if (!v6_usable(&a->sin6_addr) ||
			    listed(a->sin6_addr.s6_addr,
				   (const uint8_t(*)[16])bad, nbad))
				continue;
			memcpy(f->ip, &a->sin6_addr, 16);
			if (m)
				memcpy(f->mask, &m->sin6_addr, 16);
			else
				memset(f->mask, 0xff, 16);
		}
		memcpy(f->name, i->ifa_name, strlen(i->ifa_name) + 1);
		f->flags = i->ifa_flags;
		f->order = n;
		if (!(f->flags & IFF_LOOPBACK))
			f->mbps = link_mbps(sock, f->name);
		n++;
	}
	if (sock >= 0)
		close(sock);
	freeifaddrs(ifa);
	mark_default(v, n);
	return n;
}
