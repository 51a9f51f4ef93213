/*
 * sysfs.c - what hwloc does not say about HCA ports and network
 * interfaces, read from sysfs (the root is a parameter, so tests build a
 * synthetic tree under their build directory).
 *
 *   class/infiniband/<dev>/ports/<p>/state           "4: ACTIVE"
 *   class/infiniband/<dev>/ports/<p>/link_layer      "InfiniBand"|"Ethernet"
 *   class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>  "RoCE v2"
 *   class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<i>  "ens1f0"
 *   class/infiniband/<dev>/ports/<p>/gids/<i>        IPv4-mapped for IPv4
 *   class/net/<if>/operstate, class/net/<if>/type (772 = loopback)
 *
 * The kernel returns EINVAL when reading an unused GID slot: an unreadable
 * file is simply "not this one".
 */
#include "sysfs.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf for paths: -1 when the path does not fit (then it is skipped). */
static int mkpath(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int mkpath(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0'; /* so that no truncated path is opened */
		return -1;
	}
	return 0;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* Only plain names: sysfs entries are kernel names, but the root may be a
 * user-writable test tree; never follow ".." or hidden entries. */
static int plain(const char *name)
{
	return name[0] != '.' && strlen(name) < TOPO_NAME && !strchr(name, '/');
}

/* IPv4-mapped IPv6 GID: ::ffff:a.b.c.d, written by the kernel as
 * "0000:0000:0000:0000:0000:ffff:hhhh:hhhh", not 0.0.0.0.  Anything cut
 * short or not hexadecimal is not one (the fuzz target found a GID of
 * just the prefix taken for an address). */
static int gid_is_ipv4(const char *gid)
{
	const char *a = gid + 30;

	if (strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) != 0 ||
	    strlen(a) != 9 || a[4] != ':' || strcmp(a, "0000:0000") == 0)
		return 0;
	for (int i = 0; i < 9; i++)
		if (i != 4 && !strchr("0123456789abcdefABCDEF", a[i]))
			return 0;
	return 1;
}

static void read_gid(struct topo_port *pt, const char *pdir)
{
	for (int i = 0; i < 256; i++) {
		char path[1024], type[64], gid[64];

		mkpath(path, sizeof(path), "%s/gid_attrs/types/%d", pdir, i);
		if (read_line(path, type, sizeof(type))) {
			/* Past the table, or an unused slot: the table ends
			 * when the gids file itself is gone. */
			mkpath(path, sizeof(path), "%s/gids/%d", pdir, i);
			if (read_line(path, gid, sizeof(gid)))
				break;
			continue;
		}
		if (strcmp(type, "RoCE v2") != 0)
			continue;
		mkpath(path, sizeof(path), "%s/gids/%d", pdir, i);
		if (read_line(path, gid, sizeof(gid)) || !gid_is_ipv4(gid))
			continue;
		pt->gid_index = i;
		if (!pt->netdev[0]) {
			mkpath(path, sizeof(path), "%s/gid_attrs/ndevs/%d",
				 pdir, i);
			if (read_line(path, gid, sizeof(gid)) == 0 &&
			    plain(gid))
				snprintf(pt->netdev, sizeof(pt->netdev), "%s",
					 gid);
		}
		return;
	}
}

static struct topo_port *find_port(struct topo *t, const char *dev, int port)
{
	for (int i = 0; i < t->nports; i++)
		if (t->ports[i].port == port && strcmp(t->ports[i].dev, dev) == 0)
			return &t->ports[i];
	if (t->nports >= TOPO_MAX_PORTS)
		return NULL;
	t->ports[t->nports] = (struct topo_port){
	    .port = port, .gid_index = -1, .node = -1, .locality = -1};
	snprintf(t->ports[t->nports].dev, TOPO_NAME, "%s", dev);
	return &t->ports[t->nports++];
}

static void read_ib(struct topo *t, const char *root)
{
	char dir[1024];
	DIR *d;
	struct dirent *e;

	mkpath(dir, sizeof(dir), "%s/class/infiniband", root);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char pdir[1024], buf[64];
		DIR *pd;
		struct dirent *pe;

		if (!plain(e->d_name))
			continue;
		mkpath(pdir, sizeof(pdir), "%s/%s/ports", dir, e->d_name);
		pd = opendir(pdir);
		if (!pd)
			continue;
		while ((pe = readdir(pd)) != NULL) {
			char path[1024];
			struct topo_port *pt;
			int p = atoi(pe->d_name);

			if (!plain(pe->d_name) || p <= 0)
				continue;
			pt = find_port(t, e->d_name, p);
			if (!pt)
				break;
			mkpath(path, sizeof(path), "%s/%d/state", pdir, p);
			if (read_line(path, buf, sizeof(buf)) == 0)
				pt->state = atoi(buf);
			mkpath(path, sizeof(path), "%s/%d/link_layer", pdir,
				 p);
			if (read_line(path, buf, sizeof(buf)) == 0)
				pt->link = strcmp(buf, "Ethernet") == 0
					       ? TOPO_LINK_ETH
					       : TOPO_LINK_IB;
			mkpath(path, sizeof(path), "%s/%d", pdir, p);
			if (pt->link == TOPO_LINK_ETH)
				read_gid(pt, path);
		}
		closedir(pd);
	}
	closedir(d);
}

/* The interface of the default route, from /proc/net/route. */
static void default_route_if(char *out, size_t len)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256];

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char ifn[64];
		unsigned long dest;

		if (sscanf(line, "%63s %lx", ifn, &dest) == 2 && dest == 0) {
			snprintf(out, len, "%s", ifn);
			break;
		}
	}
	fclose(f);
}

static int netif_cmp(const void *a, const void *b)
{
	return strcmp(((const struct topo_netif *)a)->name,
		      ((const struct topo_netif *)b)->name);
}

static void read_net(struct topo *t, const char *root, int live)
{
	char dir[1024], defif[64] = "";
	DIR *d;
	struct dirent *e;

	mkpath(dir, sizeof(dir), "%s/class/net", root);
	d = opendir(dir);
	if (!d)
		return;
	if (live)
		default_route_if(defif, sizeof(defif));
	while ((e = readdir(d)) != NULL && t->nnetifs < TOPO_MAX_NETIFS) {
		char path[1024], buf[64];
		struct topo_netif *n;

		if (!plain(e->d_name))
			continue;
		n = &t->netifs[t->nnetifs++];
		memset(n, 0, sizeof(*n));
		snprintf(n->name, sizeof(n->name), "%s", e->d_name);
		mkpath(path, sizeof(path), "%s/%s/operstate", dir, e->d_name);
		if (read_line(path, buf, sizeof(buf)) == 0)
			/* Virtual interfaces (veth, tun) say "unknown". */
			n->up = strcmp(buf, "up") == 0 ||
				strcmp(buf, "unknown") == 0;
		mkpath(path, sizeof(path), "%s/%s/type", dir, e->d_name);
		if (read_line(path, buf, sizeof(buf)) == 0)
			n->loopback = atoi(buf) == 772;
		n->primary = defif[0] && strcmp(defif, n->name) == 0;
	}
	closedir(d);
	qsort(t->netifs, (size_t)t->nnetifs, sizeof(t->netifs[0]), netif_cmp);
}

void sysfs_read(struct topo *t, const char *root, int live)
{
	read_ib(t, root);
	read_net(t, root, live);
}
