/*
 * Fuzz target for the sysfs reader (spank/core/sysfs.c): the InfiniBand
 * port files and network interfaces slurmstepd reads, and the hints built
 * on them.  The input describes a tree, one entry per line:
 *
 *   class/infiniband/mlx5_0/ports/1/state<TAB>4: ACTIVE
 *   class/net/eth0/                          (a directory)
 *
 * Path components are cut to [A-Za-z0-9_.:-] (".", ".." and empty ones are
 * dropped, at most 12 deep); the content is the rest of the line.  The tree
 * is written under a scratch directory, read with sysfs_read, and the
 * result checked: counts within bounds, every name NUL-terminated and
 * plain, GID indices in the table, interfaces sorted; then hints computed
 * on it must succeed and name only ACTIVE ports.
 *
 * libFuzzer:  make -C tests fuzz-spank (clang -fsanitize=fuzzer,...)
 * replay:     built with -DHVD_FUZZ_MAIN and replay.c (replay.h), one TAP
 *             result per file named on the command line (the corpus
 *             replay of make check).
 */
#include "config.h"

#include "core/cfg.h"
#include "core/hints.h"
#include "core/layout.h"
#include "core/opt.h"
#include "core/sysfs.h"
#include "core/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[4096];
/* What the last input gave, for the replay's TAP lines. */
static char summary[2048];

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	if (ftw->level > 0)
		remove(path);
	return 0;
}

static void cleanup(void)
{
	if (root[0]) {
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		rmdir(root);
	}
}

/* The scratch root: made once, emptied before each input, removed at exit
 * (libFuzzer ends with exit() too). */
static int scratch(void)
{
	if (!root[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(root, sizeof(root), "%s/fuzz-sysfs.XXXXXX",
			 tmp && *tmp ? tmp : ".");
		if (!mkdtemp(root)) {
			root[0] = '\0';
			return -1;
		}
		atexit(cleanup);
	}
	return nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write one entry: a file (with content) or, for a trailing '/', a dir. */
static void entry(const char *line, size_t len)
{
	const char *tab = memchr(line, '\t', len);
	size_t plen = tab ? (size_t)(tab - line) : len;
	char path[4096];
	size_t o = strlen(root);
	int depth = 0, isdir = plen > 0 && line[plen - 1] == '/';

	memcpy(path, root, o);
	for (size_t i = 0; i < plen && depth < 12;) {
		char comp[80];
		size_t c = 0;

		while (i < plen && line[i] != '/') {
			char ch = line[i++];

			if (c < sizeof(comp) - 1 &&
			    ((ch >= 'a' && ch <= 'z') ||
			     (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9') || strchr("_.:-", ch)))
				comp[c++] = ch;
		}
		i++;
		comp[c] = '\0';
		if (!c || !strcmp(comp, ".") || !strcmp(comp, ".."))
			continue;
		if (o + c + 2 >= sizeof(path))
			return;
		path[o++] = '/';
		memcpy(path + o, comp, c);
		o += c;
		path[o] = '\0';
		depth++;
		/* Every component but a file's last is a directory. */
		if (i < plen || isdir)
			mkdir(path, 0755);
	}
	if (!depth || isdir)
		return;
	path[o] = '\0';
	{
		int fd =
		    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
		const char *v = tab ? tab + 1 : "";
		size_t vl = tab ? len - plen - 1 : 0;

		if (fd < 0)
			return;
		if (vl && write(fd, v, vl) < 0)
			abort();
		close(fd);
	}
}

/* A GID index the reader chose names a RoCE v2 entry whose GID is an
 * IPv4-mapped address, as the kernel writes it. */
static void check_gid(const struct topo_port *pt)
{
	char path[4200], gid[128] = "";
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%d/gids/%d",
		 root, pt->dev, pt->port, pt->gid_index);
	f = fopen(path, "r");
	if (!f || !fgets(gid, sizeof(gid), f))
		abort();
	fclose(f);
	n = strcspn(gid, "\n ");
	gid[n] = '\0';
	if (n != 39 || strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) ||
	    strspn(gid + 30, "0123456789abcdefABCDEF:") != 9 ||
	    !strcmp(gid + 30, "0000:0000"))
		abort();
}

static void check_name(const char *s, size_t cap, int may_be_empty)
{
	size_t n = strnlen(s, cap);

	if (n == cap || (!may_be_empty && n == 0) || strchr(s, '/') ||
	    (n && s[0] == '.'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct topo t;
	static struct hints h;
	const char *p = (const char *)data, *end = p + size;
	struct layout l;
	struct opt o;
	struct cfg cfg;
	char err[512];

	if (scratch())
		return 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		entry(p, len);
		p += len + 1;
	}
	/* A port hwloc already knows, so that sysfs fills it in too. */
	memset(&t, 0, sizeof(t));
	t.nports = 1;
	snprintf(t.ports[0].dev, sizeof(t.ports[0].dev), "mlx5_0");
	t.ports[0].port = 1;
	t.ports[0].gid_index = -1;
	t.ports[0].node = t.ports[0].locality = -1;
	cpuset_parse("0-3", &t.all_cpus);
	sysfs_read(&t, root, 0);

	if (t.nports < 1 || t.nports > TOPO_MAX_PORTS || t.nnetifs < 0 ||
	    t.nnetifs > TOPO_MAX_NETIFS)
		abort();
	for (int i = 0; i < t.nports; i++) {
		const struct topo_port *pt = &t.ports[i];

		check_name(pt->dev, sizeof(pt->dev), 0);
		check_name(pt->netdev, sizeof(pt->netdev), 1);
		if (pt->port < 1 || pt->gid_index < -1 || pt->gid_index > 255 ||
		    (pt->link != TOPO_LINK_UNKNOWN &&
		     pt->link != TOPO_LINK_IB && pt->link != TOPO_LINK_ETH))
			abort();
		if (pt->gid_index >= 0)
			check_gid(pt);
		for (int j = 0; j < i; j++)
			if (t.ports[j].port == pt->port &&
			    !strcmp(t.ports[j].dev, pt->dev))
				abort(); /* one entry per port */
	}
	for (int i = 0; i < t.nnetifs; i++) {
		const struct topo_netif *n = &t.netifs[i];

		check_name(n->name, sizeof(n->name), 0);
		if ((n->up | n->loopback | n->primary) & ~1 || n->primary ||
		    (i && strcmp(t.netifs[i - 1].name, n->name) > 0))
			abort();
	}

	/* The hints over what was read. */
	memset(&l, 0, sizeof(l));
	l.size = l.local_size = l.cross_size = l.nnodes = 1;
	strcpy(l.hostname, "n1");
	strcpy(l.user, "u");
	layout_master(&l, "n1", NULL, NULL);
	cfg_init(&cfg);
	opt_init(&o);
	if (hints_compute(&t, &l, &o, NULL, &cfg, &h, err, sizeof(err)))
		abort();
	for (int i = 0; i < h.n; i++) {
		if (strnlen(h.h[i].value, sizeof(h.h[i].value)) ==
			sizeof(h.h[i].value) ||
		    strnlen(h.h[i].why, sizeof(h.h[i].why)) ==
			sizeof(h.h[i].why))
			abort();
	}
	if (h.port >= 0 && (h.port >= t.nports || t.ports[h.port].state != 4))
		abort();
	snprintf(summary, sizeof(summary),
		 "%d port(s), %d interface(s); NCCL_IB_HCA=%.64s "
		 "NCCL_IB_GID_INDEX=%.8s NCCL_SOCKET_IFNAME=%.64s",
		 t.nports, t.nnetifs,
		 hints_find(&h, "NCCL_IB_HCA")
		     ? hints_find(&h, "NCCL_IB_HCA")->value
		     : "-",
		 hints_find(&h, "NCCL_IB_GID_INDEX")
		     ? hints_find(&h, "NCCL_IB_GID_INDEX")->value
		     : "-",
		 hints_find(&h, "NCCL_SOCKET_IFNAME")
		     ? hints_find(&h, "NCCL_SOCKET_IFNAME")->value
		     : "-");
	return 0;
}

#ifdef HVD_FUZZ_MAIN
#include "replay.h"

static const char *replay_summary(void)
{
	return summary;
}

const struct fuzz_replay fuzz_replay = {
    .name_inputs = 1,
    .summary = replay_summary,
};
#endif
