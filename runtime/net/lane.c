/*
 * net/lane.c - the bulk TCP lane (net/lane.h).
 *
 * State per peer (world rank): the pair's one connection, its queue of
 * sends, its posted receives, its messages that came before their
 * receive, and the message being read.
 * One epoll set holds the listener, hellos not yet checked, and every
 * connection; progress reads what is readable and writes what was
 * blocked, under one lock that it only tries (the other thread is moving
 * the same bytes meanwhile).
 */
#include "config.h"

#include "net/auth.h"
#include "net/lane.h"
#include "net/lane_if.h"
#include "net/peers.h"
#include "net/ucx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define LANE_MAGIC 0x4c445648u /* "HVDL" */
#define LANE_VERSION 1u
#define LANE_BYE_TAG (~(uint64_t)0)
#define LANE_HELLO_BYTES 32
#define LANE_PENDING 64          /* hellos not yet checked, at most */
#define LANE_SCRATCH (256u << 10) /* where unwanted bytes are dropped */
#define LANE_READ_BUDGET (8u << 20)
#define LANE_LOWAT_S 2e-3         /* longest wait for a raised mark */
#define LANE_PROBE_FROM (64u << 10) /* rests read without a probe: up to */

enum { K_LISTEN = 1, K_HELLO, K_CONN };

struct lane_op {
	struct lane_op *next;
	uint64_t tag;
	int w, recv;
	/* send: the header's progress, the bytes still to go (p, left),
	 * then the tail's progress (lane_send_tail) */
	const char *p;
	size_t left, hdr_off;
	size_t tail_len, tail_off;
	uint8_t tail[LANE_TAIL_MAX];
	char *owned;        /* a cancelled send's copy of its rest */
	int orphan;         /* cancelled: freed by the lane when done */
	/* receive */
	char *buf;
	size_t expect;
	/* result */
	int status;
	size_t length;
	double t0;          /* when posted */
	atomic_int done;
	uint8_t hdr[16];
};

struct unexp {
	struct unexp *next;
	double t;                /* when its header came */
	uint64_t tag;
	size_t len, got;
	char data[];
};

struct peer {
	int fd;                  /* the pair's connection, both ways   */
	int dead;                /* 1 said goodbye, 2 failed           */
	int tx_out;              /* waiting for room to write          */
	int hup;                 /* hung up while stalled: off epoll   */
	uint32_t ev;             /* the connection's events in epoll   */
	struct lane_op *txh, *txt;
	struct lane_op *ph, *pt; /* posted receives                    */
	struct unexp *uh, *ut;   /* arrived before their receive       */
	uint8_t hdr[16];
	size_t hdr_got;
	int stalled;             /* hdr holds a message nobody asked for */
	double stall_t, rx_t;    /* when it stalled; when bytes last came */
	int lowat;               /* SO_RCVLOWAT now (0: the default)     */
	double lowat_t;          /* when it was raised for this read      */
	int in_msg;
	size_t m_len, m_got;
	struct lane_op *m_op;
	struct unexp *m_unexp;
};

struct hello {
	int fd;
	size_t got;
	uint8_t b[LANE_HELLO_BYTES];
};

static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static atomic_int up, everywhere;
static int epfd = -1, lfd = -1;
static int nranks, self;
static struct lane_addr mine, *tab;
static struct peer *peers_tab;
static struct hello hellos[LANE_PENDING];
static char *scratch;
static atomic_int busy;
static size_t lowat_cap;
static atomic_int n_raised; /* peers whose SO_RCVLOWAT is raised */
static int completed;
static unsigned long n_sent, n_recv, n_unexp, n_stall, n_full, n_late;
static unsigned long n_ahead; /* headers read with a message's end */

/*
 * The lane's congestion control (HVD_TCP_LANE_CC; "" keeps the system's).
 * BBR paces a connection's segments at its estimate of the path's
 * bandwidth, from a timer, instead of sending them from the sendmsg that
 * queued them.  A collective's traffic is bursts with idle gaps, and on
 * 2 netns nodes whose system default is bbr the pacing doubled a burst's
 * time: a 512 KiB alltoall (256 KiB each way) took 190-205 us, 71-99 us
 * with reno or cubic, whose windows let the whole burst go at once
 * (OpenMPI, on bbr, 80-100).  So "auto" (the default) takes reno,
 * which every kernel lets any user choose, where the system's choice is
 * bbr, and keeps any other: cubic and reno do not pace, and DCTCP is an
 * admin's choice for a network that marks congestion.
 */
#define LANE_CC_MAX 16 /* TCP_CA_NAME_MAX */
static char cc[LANE_CC_MAX];

/* The congestion control of socket fd now ("?" when unknown). */
static void cc_of(int fd, char out[LANE_CC_MAX])
{
	socklen_t l = LANE_CC_MAX - 1;

	memset(out, 0, LANE_CC_MAX);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out, &l) != 0 ||
	    !out[0])
		strcpy(out, "?");
}

/* The kernel's list of congestion controls of one kind ("?": none). */
static void cc_list(const char *kind, char *out, size_t n)
{
	char path[96];
	FILE *f;

	snprintf(path, sizeof(path),
		 "/proc/sys/net/ipv4/tcp_%s_congestion_control", kind);
	strcpy(out, "?");
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(out, (int)n, f))
		strcpy(out, "?");
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* Pick cc for the listener lfd (accepted connections inherit it). */
static void cc_choose(int fd)
{
	const char *v = getenv("HVD_TCP_LANE_CC");
	char sys[LANE_CC_MAX];

	cc[0] = '\0';
	cc_of(fd, sys);
	if (v && *v && strcmp(v, "auto") != 0) {
		char avail[256], allowed[256];
		int e = ENAMETOOLONG;

		if (!strcmp(v, "system"))
			return;
		if (strlen(v) < LANE_CC_MAX) {
			if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, v,
				       (socklen_t)strlen(v)) == 0) {
				strcpy(cc, v);
				return;
			}
			e = errno;
		}
		cc_list("available", avail, sizeof(avail));
		cc_list("allowed", allowed, sizeof(allowed));
		hvd_log(HVD_LOG_WARNING,
			"HVD_TCP_LANE_CC=%s: the kernel refuses it (%s); the "
			"TCP lane keeps the system's %s.  This kernel has: %s; "
			"without privileges: %s; or say auto or system",
			v, strerror(e), sys, avail, allowed);
		return;
	}
	if (!strncmp(sys, "bbr", 3) &&
	    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4) == 0)
		strcpy(cc, "reno");
}

/*
 * A connection's options: no Nagle (the last short segment of a message
 * would wait for the ACK of the ones before), cc, and room to receive.
 *
 * Room: a socket starts with tcp_rmem's default (128K) and the kernel
 * grows it as the reader keeps up, but with a message each way at a time
 * it sometimes did not: 2 netns nodes x 1, 64 KiB allreduce, the same
 * build, a run took 32-34 us or 64-66 us a call for all its 5000 calls
 * (3 runs of 6 slow; OpenMPI 48 or 82 us alongside), and with the nodes'
 * tcp_rmem default at 4 MiB every run was fast.  Raising SO_RCVLOWAT
 * grows the buffer for a message that large (the kernel takes it to
 * about twice that, within half of tcp_rmem's maximum) and leaves it
 * unlocked, where SO_RCVBUF would fix its size (capped at rmem_max);
 * the mark goes back to 1 at once.  8 runs of 8 fast then.
 */
#define LANE_RCVBUF_FOR (4 << 20)

static void conn_tune(int fd)
{
	int one = 1, room = LANE_RCVBUF_FOR;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &room, sizeof(room));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	if (cc[0])
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc,
				 (socklen_t)strlen(cc));
}

/* Debug: who connected, the congestion control the kernel uses and
 * the receive buffer it gave (conn_tune). */
static void conn_log(int fd, int peer, const char *how)
{
	char now[LANE_CC_MAX];
	int rcvbuf = 0;
	socklen_t len = sizeof(rcvbuf);

	if (!hvd_log_enabled(HVD_LOG_DEBUG))
		return;
	cc_of(fd, now);
	(void)getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
	hvd_log(HVD_LOG_DEBUG,
		"TCP lane: %s rank %d (congestion control %s, receive "
		"buffer %d bytes)",
		how, peer, now, rcvbuf);
}

static void append(struct lane_op **h, struct lane_op **t,
		   struct lane_op *op)
{
	op->next = NULL;
	if (*t)
		(*t)->next = op;
	else
		*h = op;
	*t = op;
}

static uint64_t ev_key(int kind, int idx)
{
	return ((uint64_t)kind << 32) | (uint32_t)idx;
}

static void ep_set(int fd, int kind, int idx, uint32_t events, int op)
{
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = events;
	e.data.u64 = ev_key(kind, idx);
	(void)epoll_ctl(epfd, op, fd, &e);
}

static void fd_close(int *fd)
{
	if (*fd >= 0) {
		(void)epoll_ctl(epfd, EPOLL_CTL_DEL, *fd, NULL);
		close(*fd);
		*fd = -1;
	}
}

/* The pair's connection in epoll, waiting for events ev. */
static void ep_conn(int w, uint32_t ev, int op)
{
	ep_set(peers_tab[w].fd, K_CONN, w, ev, op);
	peers_tab[w].ev = ev;
}

/* What the pair's connection waits for: bytes to read unless a message
 * is stalled, room to write while sends are blocked.  A stall takes the
 * bytes out lazily: only once epoll reports them while it lasts
 * (progress_locked), since its receive is usually posted first. */
static void ep_update(int w)
{
	struct peer *p = &peers_tab[w];
	uint32_t ev = (p->stalled ? 0 : EPOLLIN) | (p->tx_out ? EPOLLOUT : 0);

	if (p->fd >= 0 && !p->hup && ev != p->ev)
		ep_conn(w, ev, EPOLL_CTL_MOD);
}

static void complete(struct lane_op *op, int status)
{
	op->status = status;
	atomic_fetch_sub(&busy, 1);
	completed++;
	if (op->orphan) {
		free(op->owned);
		free(op);
		return;
	}
	atomic_store_explicit(&op->done, 1, memory_order_release);
}

/* ------------------------------------------------------------ setup */

/* This rank's interfaces (net/lane_if.h), those offered first. */
static struct lane_if ifs[LANE_IF_MAX];
static int nifs, noffer;
/* The networks (lane_if_net) on which an address gave no answer while a
 * later one of the same peer did: the next dials try them last, so that
 * a silent network costs the dial's stagger (250 ms) once in a process,
 * not once for each peer it dials (a thousand peers: four minutes).
 * Cleared where an address on it wins. */
static unsigned char slow_net[LANE_NETS];

/* The addresses this rank offers, best first (net/lane_if.h). */
static int my_addrs(uint8_t ip[LANE_ADDRS][16], int local)
{
	const char *want = getenv("HVD_TCP_LANE_IF");
	const char *ucx = getenv("UCX_NET_DEVICES");
	int n = 0;

	nifs = lane_if_scan(ifs, LANE_IF_MAX);
	noffer = lane_if_rank(ifs, nifs, want, ucx);
	for (int i = 0; i < noffer && n < LANE_ADDRS; i++)
		memcpy(ip[n++], ifs[i].ip, 16);
	/* Within a node (HVD_TCP_LANE_LOCAL) loopback will do. */
	if (n == 0 && local)
		lane_ip4(ip[n++], htonl(INADDR_LOOPBACK));
	if (n == 0 && nifs > 0) {
		const char *var, *list = lane_if_list(want, ucx, &var);

		if (list)
			hvd_log(HVD_LOG_INFO,
				"no TCP lane: no interface named by %s=%s is "
				"up with a carrier: large messages go by UCX",
				var, list);
		else
			hvd_log(HVD_LOG_INFO,
				"no TCP lane: no interface but loopback, "
				"docker* and virbr* is up with a carrier: "
				"large messages go by UCX");
	}
	return n;
}

/* "ip:port" of address i of a, "[ip]:port" for IPv6. */
static void addr_of(const struct lane_addr *a, int i, char *out, size_t len)
{
	char ip[LANE_IP_STRLEN];
	int v4 = lane_ip_is4(a->ip[i]);

	snprintf(out, len, "%s%s%s:%u", v4 ? "" : "[", lane_ip_str(a->ip[i], ip),
		 v4 ? "" : "]", (unsigned)ntohs(a->port));
}

/* Debug: the offered addresses, their interfaces and speeds (my_addrs
 * took them from ifs in order; a loopback fallback has no entry). */
static void offer_log(int me, const struct lane_addr *a)
{
	char line[640], ip[LANE_IP_STRLEN];
	size_t off = 0;

	line[0] = '\0';
	for (int i = 0; i < a->nip && off < sizeof(line); i++) {
		const struct lane_if *f = i < noffer ? &ifs[i] : NULL;
		char speed[24] = "";

		if (f && f->mbps)
			snprintf(speed, sizeof(speed), ", %u Mb/s",
				 (unsigned)f->mbps);
		lane_ip_str(a->ip[i], ip);
		off += (size_t)snprintf(line + off, sizeof(line) - off,
					"%s%s (%s%s%s)", i ? ", " : "", ip,
					f ? f->name : "loopback", speed,
					f && f->dflt ? ", default route" : "");
	}
	hvd_log(HVD_LOG_DEBUG, "TCP lane: rank %d offers %s", me, line);
}

/* The socket address of ip (net/lane_if.h's form; NULL: any address
 * of family fam) and port (network byte order), in *ss; its length.  An
 * IPv4 address takes AF_INET whatever fam says. */
static socklen_t sa_make(struct sockaddr_storage *ss, int fam,
			 const uint8_t *ip, uint16_t port)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (ip ? lane_ip_is4(ip) : fam == AF_INET) {
		s4->sin_family = AF_INET;
		if (ip)
			memcpy(&s4->sin_addr, ip + 12, 4);
		s4->sin_port = port;
		return sizeof(*s4);
	}
	s6->sin6_family = AF_INET6;
	if (ip)
		memcpy(&s6->sin6_addr, ip, 16);
	s6->sin6_port = port;
	return sizeof(*s6);
}

/* A listening socket of family fam on port (host order; 0: one the
 * kernel gives), or -1 with errno.  An IPv6 one takes IPv4 connections
 * too (IPV6_V6ONLY off). */
static int listen_at(int fam, unsigned port, int reuse)
{
	struct sockaddr_storage sa;
	socklen_t sl = sa_make(&sa, fam, NULL, htons((uint16_t)port));
	int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0, e;

	if (fd < 0)
		return -1;
	/* A port of the range that an earlier job's connections left in
	 * TIME_WAIT is free to listen on again (two listeners still
	 * cannot share it: listen fails for the second). */
	if (reuse)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one));
	if (fam == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
				 sizeof(zero));
	if (bind(fd, (struct sockaddr *)&sa, sl) == 0 &&
	    listen(fd, 256) == 0) {
		cc_choose(fd);
		return fd;
	}
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* The listener: on a port the kernel gives or, where the nodes'
 * firewalls allow only some, on one of HVD_TCP_LANE_PORTS
 * (UCX_TCP_PORT_RANGE when unset, so that a range set for UCX covers the
 * lane too), tried from a place the pid picks; of family fam.  -1 with
 * errno, after saying why. */
static int listener(int fam)
{
	const char *var = "HVD_TCP_LANE_PORTS", *v = getenv(var);
	unsigned lo, hi, span, start;

	if (!v || !*v) {
		var = "UCX_TCP_PORT_RANGE";
		v = getenv(var);
	}
	if (lane_if_port_range(v, &lo, &hi) != 0) {
		hvd_log(HVD_LOG_WARNING,
			"%s=%s is not a port range (expected MIN-MAX within "
			"1-65535, or 0 for any): no TCP lane, large messages "
			"go by UCX",
			var, v);
		errno = EINVAL;
		return -1;
	}
	if (!lo)
		return listen_at(fam, 0, 0);
	span = hi - lo + 1;
	start = (unsigned)getpid() % span;
	for (unsigned k = 0; k < span; k++) {
		int fd = listen_at(fam, lo + (start + k) % span, 1);

		if (fd >= 0 || errno != EADDRINUSE)
			return fd;
	}
	hvd_log(HVD_LOG_WARNING,
		"every port of %s=%s is taken on this node: no TCP lane, "
		"large messages go by UCX (widen the range: a port for each "
		"rank of the node)",
		var, v);
	errno = EADDRINUSE;
	return -1;
}

/*
 * From which size a message goes by the lane rather than UCX.  The lane
 * reads a message into its place where UCX copies it twice, but spends
 * more calls on each one: a receive for the header, then the bytes, and
 * a second epoll set to poll at every turn of a wait.  Which of the two
 * costs more depends on the message, which way it goes, and whether the
 * CPUs are the limit.  2 netns nodes x 1 (a CPU each), alternated pairs
 * of cross-node runs in the same minutes, OpenMPI's time over ours: in
 * an exchange (the pair's allreduce, an allgather, an alltoall), where
 * both ranks send and receive at once, UCX was ahead up to 16-24 KiB
 * messages: the lane from 8K against 16K, allreduce 8 KiB 0.92-0.97 ->
 * 1.06-1.10; from 16K against 32K, allgather 32 KiB (16 KiB messages)
 * 0.98-1.00 -> 1.11-1.18, 48 KiB 1.00-1.02 -> 1.07-1.12, allreduce
 * 16 KiB 1.87-1.96 -> 2.11.  A broadcast's messages go one way, and
 * there the lane was ahead from 1 KiB: from 1K against 8K, 1-6 KiB
 * 0.97-1.03 against 0.90-0.98.  Where the job is crowded (its ranks
 * outnumber their CPUs: lane_crowded) the copies the lane saves count
 * for more in an exchange and its calls for more one way: 2 x 2
 * allgather 96 KiB 1.22-1.87 from 16K against 1.01-1.35 from 32K, but
 * broadcast 1 KiB 0.83 from 1K against 1.05-1.09 from 16K, and 3 x 1
 * 1.22-1.34 against 1.61-1.71.  doc/design.md, "The TCP lane", has the
 * runs.  On the machines of two later stops, exchanges went the
 * other way: the lane was ahead from 8 KiB messages on both (2 x 1,
 * alternated hvd-bench runs against OpenMPI's ob1); on the second, with
 * the order of each pair reversed as well, allgather, alltoall and
 * reducescatter of 32 KiB (16 KiB messages) read 0.85-1.08 from 32K and
 * 0.99-1.19 from 16K.  So 16K: ahead on two of the three machines, and
 * 10-15% behind at 16 KiB messages on the first.  HVD_TCP_LANE_MIN, set,
 * is every threshold.
 */
#define LANE_MIN_DEFAULT (16u << 10)
#define LANE_ONE_WAY_DEFAULT (1u << 10)
#define LANE_CROWDED_DEFAULT (16u << 10)

/* The KiB of a threshold in bytes: at least 1. */
static uint32_t kib_of(size_t bytes)
{
	bytes >>= 10;
	return bytes == 0 ? 1 : bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

/* Whether HVD_TCP_LANE_MIN sets the thresholds (a size; another value
 * is warned of once, by lane_open, and the defaults stand). */
static int min_given(void)
{
	const char *v = getenv("HVD_TCP_LANE_MIN");
	size_t given;

	return v && *v && hvd_parse_size(v, &given) == 0;
}

static void thresholds(struct lane_addr *out)
{
	out->min_kib = kib_of(hvd_env_size("HVD_TCP_LANE_MIN",
					   LANE_MIN_DEFAULT));
	out->one_way_kib =
	    min_given() ? out->min_kib : kib_of(LANE_ONE_WAY_DEFAULT);
}

hvd_status_t lane_open(struct lane_addr *out, int world_size, int me,
		       int one_node)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	int nip, local, fam = AF_INET;

	memset(out, 0, sizeof(*out));
	lane_close();
	memset(slow_net, 0, sizeof(slow_net));
	local = hvd_env_bool("HVD_TCP_LANE_LOCAL", 0);
	if (world_size < 2 || (one_node && !local) ||
	    !hvd_env_bool("HVD_TCP_LANE", 1) || ucx_uses_rdma())
		return HVD_OK;
	out->local = (uint32_t)local;
	nip = my_addrs(out->ip, local);
	if (nip == 0)
		return HVD_OK;
	/* IPv6 offered: one socket for both families */
	for (int i = 0; i < nip; i++)
		if (!lane_ip_is4(out->ip[i]))
			fam = AF_INET6;
	scratch = malloc(LANE_SCRATCH);
	peers_tab = calloc((size_t)world_size, sizeof(*peers_tab));
	epfd = epoll_create1(EPOLL_CLOEXEC);
	lfd = scratch && peers_tab && epfd >= 0 ? listener(fam) : -1;
	if (!scratch || !peers_tab || epfd < 0 || lfd < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
		hvd_log(HVD_LOG_INFO,
			"no TCP lane (%s): large messages go by UCX",
			strerror(errno));
		lane_close();
		memset(out, 0, sizeof(*out));
		return HVD_OK;
	}
	for (int r = 0; r < world_size; r++) {
		peers_tab[r].fd = -1;
	}
	for (int i = 0; i < LANE_PENDING; i++)
		hellos[i].fd = -1;
	ep_set(lfd, K_LISTEN, 0, EPOLLIN, EPOLL_CTL_ADD);
	lowat_cap = hvd_env_size("HVD_TCP_LANE_WHOLE", 4 << 20);
	out->nip = (uint16_t)nip;
	/* sin_port and sin6_port: the same place, by design */
	out->port = ((struct sockaddr_in *)&sa)->sin_port;
	thresholds(out);
	nranks = world_size;
	self = me;
	mine = *out;
	if (hvd_log_enabled(HVD_LOG_DEBUG)) {
		char a[LANE_IP_STRLEN + 8], now[LANE_CC_MAX];

		addr_of(out, 0, a, sizeof(a));
		cc_of(lfd, now);
		hvd_log(HVD_LOG_DEBUG,
			"TCP lane: rank %d listens on %s (%d address%s), "
			"congestion control %s%s",
			me, a, nip,
			nip > 1 ? "es" : "", now,
			cc[0] ? "" : " (the system's)");
		offer_log(me, out);
	}
	return HVD_OK;
}

void lane_crowded(struct lane_addr *a)
{
	if (!min_given())
		a->min_kib = a->one_way_kib = kib_of(LANE_CROWDED_DEFAULT);
}

hvd_status_t lane_start(const struct lane_addr *all, int n)
{
	if (!peers_tab || n != nranks)
		return HVD_OK;
	pthread_mutex_lock(&lk);
	tab = malloc((size_t)n * sizeof(*tab));
	if (tab) {
		int all_on = 1;

		memcpy(tab, all, (size_t)n * sizeof(*tab));
		mine.min_kib = tab[self].min_kib;
		mine.one_way_kib = tab[self].one_way_kib;
		for (int r = 0; r < n; r++)
			if (!tab[r].nip)
				all_on = 0;
		everywhere = all_on;
		up = 1;
	}
	pthread_mutex_unlock(&lk);
	if (tab && mine.nip)
		hvd_log(HVD_LOG_DEBUG,
			"TCP lane: messages from %u KiB, a broadcast's from "
			"%u KiB (a pair: the larger of its two thresholds)",
			(unsigned)mine.min_kib, (unsigned)mine.one_way_kib);
	return tab ? HVD_OK
		   : hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
}

/*
 * Is a rank's process there?  A killed process's host refuses a
 * connection to the port it listened on at once (its kernel answers with
 * a reset); a live one's lane accepts it (and drops it when no hello
 * comes: hello_read); a host cut off answers nothing.  UCX cannot tell
 * the first from the last (it reports both as "Endpoint timeout"), and
 * the elastic agreement must (net/membership.c).
 */
void lane_probe(const int *ws, int n, double limit, int *out)
{
	int *of = calloc((size_t)n * LANE_ADDRS + 1, sizeof(int)); /* k */
	struct pollfd *p = calloc((size_t)n * LANE_ADDRS + 1, sizeof(*p));
	int *refused = calloc((size_t)n + 1, sizeof(int));
	int np = 0, live = 0;
	double end = hvd_now() + limit;

	for (int k = 0; k < n; k++)
		out[k] = LANE_PROBE_UNKNOWN;
	if (!of || !p || !refused)
		goto done;
	pthread_mutex_lock(&lk);
	for (int k = 0; k < n && up; k++) {
		int w = ws[k];

		if (w < 0 || w >= nranks || w == self)
			continue;
		for (int i = 0; i < tab[w].nip; i++) {
			struct sockaddr_storage to;
			socklen_t tl = sa_make(&to, AF_UNSPEC, tab[w].ip[i],
					       tab[w].port);
			int fd = socket(to.ss_family,
					SOCK_STREAM | SOCK_NONBLOCK |
						SOCK_CLOEXEC,
					0);

			if (fd >= 0 &&
			    (connect(fd, (struct sockaddr *)&to, tl) == 0 ||
			     errno == EINPROGRESS)) {
				of[np] = k;
				p[np].fd = fd;
				p[np].events = POLLOUT;
				np++;
				continue;
			}
			refused[k] += fd >= 0 && errno == ECONNREFUSED;
			if (fd >= 0)
				close(fd);
		}
	}
	pthread_mutex_unlock(&lk);
	live = np;
	while (live > 0) {
		double now = hvd_now();
		int ms = now < end ? (int)((end - now) * 1e3) + 1 : 0;

		if (poll(p, (nfds_t)np, ms) <= 0)
			break;
		for (int i = 0; i < np; i++) {
			int err = 0, k = of[i];
			socklen_t el = sizeof(err);

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			if (getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err,
				       &el) != 0)
				err = errno;
			if (err == 0)
				out[k] = LANE_PROBE_THERE;
			refused[k] += err == ECONNREFUSED;
			close(p[i].fd);
			p[i].fd = -1; /* poll skips it */
			live--;
		}
	}
	for (int i = 0; i < np; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	/* The lane listens on every address of its host (one socket, the
	 * wildcard address): one refusal, and no address that took the
	 * connection within the limit, says nothing listens there. */
	for (int k = 0; k < n; k++)
		if (out[k] == LANE_PROBE_UNKNOWN && refused[k] > 0)
			out[k] = LANE_PROBE_GONE;
done:
	free(of);
	free(p);
	free(refused);
}

int lane_everywhere(void)
{
	return up && everywhere;
}

int lane_wants(int w, size_t len, int one_way)
{
	uint32_t a, b;

	if (!up || w < 0 || w >= nranks || w == self || !tab[w].nip ||
	    (peers_local(w) && !(tab[w].local && mine.local)))
		return 0;
	a = one_way ? tab[w].one_way_kib : tab[w].min_kib;
	b = one_way ? mine.one_way_kib : mine.min_kib;
	return len >= (size_t)(a > b ? a : b) << 10;
}

/* ------------------------------------------------------- connections */

static void put64(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *b)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | b[i];
	return v;
}

static int hello_make(uint8_t b[LANE_HELLO_BYTES], int src, int dst)
{
	uint64_t mac;

	memset(b, 0, LANE_HELLO_BYTES);
	put64(b, (uint64_t)LANE_MAGIC | ((uint64_t)LANE_VERSION << 32));
	put64(b + 8, (uint64_t)(uint32_t)src | ((uint64_t)(uint32_t)dst << 32));
	if (auth_msg_mac(get64(b), b + 8, 8, &mac) != 0)
		return -1;
	put64(b + 16, mac);
	return 0;
}

static void tx_write(int w);
static void fail_peer(int w, const char *why);
static void fail_peer_as(int w, const char *why, enum peer_gone kind);
static int progress_locked(void);
static int unlink_op(struct lane_op **h, struct lane_op **t,
		     struct lane_op *op);

/* Why the last dial failed: "ADDR what" for each address, joined
 * (empty: no address was tried). */
static char dial_why[192];

static void dial_fail(const struct lane_addr *a, int i, const char *what)
{
	char where[LANE_IP_STRLEN + 8];
	size_t off = strlen(dial_why);

	addr_of(a, i, where, sizeof(where));
	snprintf(dial_why + off, sizeof(dial_why) - off, "%s%s %s",
		 off ? "; " : "", where, what);
}

/* A non-blocking connection to address i of a, under way (or made), or
 * -1 after dial_fail. */
static int dial_start(const struct lane_addr *a, int i)
{
	struct sockaddr_storage to;
	socklen_t tl = sa_make(&to, AF_UNSPEC, a->ip[i], a->port);
	int fd;

	/* no IPv6 on this node: a failure, and the next address */
	fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		dial_fail(a, i, strerror(errno));
		return -1;
	}
	conn_tune(fd);
	if (connect(fd, (struct sockaddr *)&to, tl) != 0 &&
	    errno != EINPROGRESS) {
		dial_fail(a, i, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Connect to w's lane as Happy Eyeballs does (RFC 8305): its addresses in
 * lane_if_dial_order's order, each next one started once those before it
 * have failed or given no answer for DIAL_STAGGER_MS, the first
 * connection made wins and the others are closed (the listener drops a
 * connection that ends before its hello).  An attempt gives up after
 * DIAL_WAIT_MS.  A firewall that drops the lane's SYNs costs DIAL_WAIT_MS
 * in all, not for each address, and an address that does not answer
 * (an IPv6 one where only IPv4 is routed) delays the next by
 * DIAL_STAGGER_MS only.
 */
#define DIAL_STAGGER_MS 250
#define DIAL_WAIT_MS 5000

/* One address being dialled */
struct attempt {
	int fd, i;  /* the socket, the address's index in a */
	double t0;  /* when it began */
};

/* After a dial that reached address won of a, begun at t_won: mark the
 * networks of the attempts at[0..live) that began before it and are still
 * waiting (revents 0). */
static void dial_learn(const struct lane_addr *a, int won, double t_won,
		       const struct attempt *at, const struct pollfd *p,
		       int live)
{
	char where[LANE_IP_STRLEN + 8], there[LANE_IP_STRLEN + 8];

	slow_net[lane_if_net(a->ip[won], ifs, noffer)] = 0;
	for (int k = 0; k < live; k++) {
		int net = lane_if_net(a->ip[at[k].i], ifs, noffer);

		if (at[k].t0 >= t_won || p[k].revents || slow_net[net])
			continue;
		slow_net[net] = 1;
		addr_of(a, at[k].i, where, sizeof(where));
		addr_of(a, won, there, sizeof(there));
		hvd_log(HVD_LOG_DEBUG,
			"TCP lane: %s gave no answer in %.0f ms where %s did: "
			"rank %d dials addresses on its network last from now on",
			where, (hvd_now() - at[k].t0) * 1e3, there, self);
	}
}

static int dial(int w)
{
	const struct lane_addr *a = &tab[w];
	uint8_t hello[LANE_HELLO_BYTES];
	int order[LANE_ADDRS], n, next = 0, live = 0, fd = -1, won = -1;
	struct attempt at[LANE_ADDRS];
	struct pollfd p[LANE_ADDRS];
	double t_next = 0, t_won = 0, begun = hvd_now();

	dial_why[0] = '\0';
	if (hello_make(hello, self, w) != 0)
		return -1;
	n = lane_if_dial_order((const uint8_t(*)[16])a->ip,
			       a->nip < LANE_ADDRS ? a->nip : LANE_ADDRS,
			       ifs, noffer, nifs, slow_net, order);
	for (;;) {
		double now = hvd_now(), until = now + DIAL_WAIT_MS * 1e-3;
		int ms;

		if (next < n && (live == 0 || now >= t_next)) {
			int i = order[next++];
			int f = dial_start(a, i);

			if (f >= 0) {
				at[live].fd = f;
				at[live].i = i;
				at[live++].t0 = now;
				t_next = now + DIAL_STAGGER_MS * 1e-3;
			}
			continue;
		}
		if (live <= 0)
			return -1;
		for (int k = 0; k < live; k++) {
			p[k].fd = at[k].fd;
			p[k].events = POLLOUT;
			p[k].revents = 0;
			if (at[k].t0 + DIAL_WAIT_MS * 1e-3 < until)
				until = at[k].t0 + DIAL_WAIT_MS * 1e-3;
		}
		if (next < n && t_next < until)
			until = t_next;
		ms = (int)((until - now) * 1e3) + 1;
		/* a poll that fails leaves every revents 0: the attempts
		 * wait on, and run out of time */
		(void)poll(p, (nfds_t)live, ms < 0 ? 0 : ms);
		now = hvd_now();
		/* settle each attempt: made, failed, out of time or waiting */
		for (int k = 0; k < live;) {
			int err = 0, gone = 0;
			socklen_t el = sizeof(err);

			if (p[k].revents) {
				if (getsockopt(at[k].fd, SOL_SOCKET, SO_ERROR,
					       &err, &el) ||
				    err) {
					dial_fail(a, at[k].i,
						  strerror(err ? err : errno));
					gone = 1;
				} else if (won < 0) {
					won = at[k].i;
					t_won = at[k].t0;
					fd = at[k].fd;
					at[k].fd = -1;
					gone = 1;
				}
			} else if (now - at[k].t0 >= DIAL_WAIT_MS * 1e-3) {
				dial_fail(a, at[k].i, "gave no answer in 5 s");
				gone = 1;
			}
			if (!gone) {
				k++;
				continue;
			}
			if (at[k].fd >= 0)
				close(at[k].fd);
			at[k] = at[--live];
			p[k] = p[live];
		}
		if (won < 0)
			continue;
		/* 32 bytes into an empty socket buffer */
		if (send(fd, hello, sizeof(hello), MSG_NOSIGNAL) ==
		    (ssize_t)sizeof(hello))
			break;
		dial_fail(a, won, "closed at once");
		close(fd);
		fd = won = -1;
	}
	dial_learn(a, won, t_won, at, p, live);
	for (int k = 0; k < live; k++)
		close(at[k].fd);
	if (hvd_log_enabled(HVD_LOG_DEBUG)) {
		char where[LANE_IP_STRLEN + 8];

		addr_of(a, won, where, sizeof(where));
		hvd_log(HVD_LOG_DEBUG,
			"TCP lane: rank %d reached rank %d at %s in %.0f ms",
			self, w, where, (hvd_now() - begun) * 1e3);
	}
	conn_log(fd, w, "connected to");
	return fd;
}

static void hello_read(int slot);

static int free_slot(void)
{
	for (int i = 0; i < LANE_PENDING; i++)
		if (hellos[i].fd < 0)
			return i;
	return -1;
}

/*
 * Anyone who can reach the port can connect, and connections that never
 * say anything must not keep a rank's peers out: when every slot is
 * taken, the hellos that have arrived are checked first (a rank sends
 * its hello right after connecting, so by then it is readable), and only
 * then does the longest-waiting connection go.
 */
static void accept_all(void)
{
	static uint64_t seq, since[LANE_PENDING];

	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int slot;

		if (fd < 0)
			return;
		slot = free_slot();
		if (slot < 0) {
			for (int i = 0; i < LANE_PENDING; i++)
				hello_read(i);
			slot = free_slot();
		}
		if (slot < 0) {
			slot = 0;
			for (int i = 1; i < LANE_PENDING; i++)
				if (since[i] < since[slot])
					slot = i;
			hvd_log(HVD_LOG_DEBUG,
				"TCP lane: let go of a connection that said "
				"nothing (%d were waiting)",
				LANE_PENDING);
			fd_close(&hellos[slot].fd);
		}
		hellos[slot].fd = fd;
		hellos[slot].got = 0;
		since[slot] = ++seq;
		ep_set(fd, K_HELLO, slot, EPOLLIN, EPOLL_CTL_ADD);
	}
}

static void hello_read(int slot)
{
	struct hello *h = &hellos[slot];
	uint8_t want[LANE_HELLO_BYTES];
	ssize_t r;
	int src, ours;

	if (h->fd < 0)
		return;
	r = recv(h->fd, h->b + h->got, sizeof(h->b) - h->got, MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		fd_close(&h->fd);
		return;
	}
	h->got += (size_t)r;
	if (h->got < sizeof(h->b))
		return;
	src = (int)(uint32_t)get64(h->b + 8);
	/* Only a rank of this job, by a MAC keyed with the job's key, and
	 * one connection per peer. */
	ours = src >= 0 && src < self && hello_make(want, src, self) == 0 &&
	       memcmp(want, h->b, sizeof(want)) == 0;
	if (!ours || peers_tab[src].fd >= 0 || peers_tab[src].dead) {
		hvd_log(HVD_LOG_DEBUG, "TCP lane: refused a connection (%s)",
			ours ? "its rank is connected already, or failed"
			     : "not a hello of a rank of this job");
		fd_close(&h->fd);
		return;
	}
	peers_tab[src].fd = h->fd;
	h->fd = -1;
	/* This end sends too. */
	conn_tune(peers_tab[src].fd);
	conn_log(peers_tab[src].fd, src, "accepted");
	ep_conn(src, EPOLLIN, EPOLL_CTL_MOD);
	if (peers_tab[src].txh)
		tx_write(src);
}

static void fail_errno(int w)
{
	/* Timeouts and unreachable routes say the peer went silent, not
	 * that it is gone (a reset or refusal comes from its host). */
	enum peer_gone kind = errno == ETIMEDOUT || errno == EHOSTUNREACH ||
				      errno == ENETUNREACH
				  ? PEER_QUIET
				  : PEER_DEAD;
	char why[96];

	snprintf(why, sizeof(why), "failed (%s)", strerror(errno));
	fail_peer_as(w, why, kind);
}

/* ------------------------------------------------------------ sending */

/* The pair's connection is gone: every operation on it fails, and so
 * does the peer (net/peers.h, as kind) unless why is NULL (it said
 * goodbye). */
static void fail_peer_as(int w, const char *why, enum peer_gone kind)
{
	struct peer *p = &peers_tab[w];
	char msg[320];

	if (p->lowat > 1)
		n_raised--;
	p->lowat = 0;
	fd_close(&p->fd);
	p->dead = why ? 2 : 1;
	p->stalled = p->tx_out = p->hup = 0;
	p->ev = 0;
	while (p->txh) {
		struct lane_op *op = p->txh;

		p->txh = op->next;
		complete(op, 2);
	}
	p->txt = NULL;
	if (p->m_op)
		complete(p->m_op, 2);
	p->m_op = NULL;
	p->m_unexp = NULL;
	p->in_msg = 0;
	while (p->ph) {
		struct lane_op *op = p->ph;

		p->ph = op->next;
		complete(op, 2);
	}
	p->pt = NULL;
	if (!why)
		return;
	snprintf(msg, sizeof(msg), "its TCP lane connection %s", why);
	peers_mark(w, msg, 1, kind);
}

static void fail_peer(int w, const char *why)
{
	fail_peer_as(w, why, PEER_DEAD);
}

static void tx_write(int w)
{
	struct peer *p = &peers_tab[w];

	while (p->txh) {
		struct lane_op *op = p->txh;
		struct iovec iov[3];
		struct msghdr mh;
		int k = 0;
		ssize_t r;
		size_t b;

		if (op->hdr_off < sizeof(op->hdr)) {
			iov[k].iov_base = op->hdr + op->hdr_off;
			iov[k++].iov_len = sizeof(op->hdr) - op->hdr_off;
		}
		if (op->left) {
			iov[k].iov_base = (void *)op->p;
			iov[k++].iov_len = op->left;
		}
		if (op->tail_off < op->tail_len) {
			iov[k].iov_base = op->tail + op->tail_off;
			iov[k++].iov_len = op->tail_len - op->tail_off;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)k;
		r = k ? sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				n_full++;
				if (!p->tx_out) {
					p->tx_out = 1;
					ep_update(w);
				}
				return;
			}
			fail_errno(w);
			return;
		}
		if (op->hdr_off < sizeof(op->hdr)) {
			size_t h = sizeof(op->hdr) - op->hdr_off;

			if ((size_t)r < h) {
				op->hdr_off += (size_t)r;
				continue;
			}
			op->hdr_off = sizeof(op->hdr);
			r -= (ssize_t)h;
		}
		b = (size_t)r < op->left ? (size_t)r : op->left;
		op->p += b;
		op->left -= b;
		op->tail_off += (size_t)r - b;
		if (op->left || op->tail_off < op->tail_len)
			continue;
		p->txh = op->next;
		if (!p->txh)
			p->txt = NULL;
		complete(op, 0);
	}
	if (p->tx_out) {
		p->tx_out = 0;
		ep_update(w);
	}
}

/*
 * The lower rank of a pair makes its connection, on its first operation
 * with the other; the higher one queues its operations until the
 * connection comes (its partner posts the matching ones).  -1: failed
 * (the peer is marked).
 */
static int connect_to(int w)
{
	struct peer *p = &peers_tab[w];
	double t0;

	if (p->fd >= 0 || self > w)
		return 0;
	t0 = hvd_now();
	p->fd = dial(w);
	if (p->fd < 0) {
		char why[300];

		/* The rank is probably alive, and UCX reached it: say what
		 * the lane needs. */
		snprintf(why, sizeof(why),
			 "could not be made in %.1f s (%s; a firewall between "
			 "the nodes? HVD_TCP_LANE_PORTS, or HVD_TCP_LANE=0)",
			 hvd_now() - t0,
			 dial_why[0] ? dial_why : "no address to try");
		fail_peer(w, why);
		return -1;
	}
	ep_conn(w, EPOLLIN, EPOLL_CTL_ADD);
	return 0;
}

static struct lane_op *op_new(int w, uint64_t tag, hvd_status_t *st)
{
	struct lane_op *op = calloc(1, sizeof(*op));

	if (!op) {
		*st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		return NULL;
	}
	op->w = w;
	op->tag = tag;
	op->t0 = hvd_now();
	atomic_init(&op->done, 0);
	atomic_fetch_add(&busy, 1);
	return op;
}

struct lane_op *lane_send(int w, uint64_t tag, const void *buf, size_t len,
			  hvd_status_t *st)
{
	return lane_send_tail(w, tag, buf, len, NULL, 0, st);
}

struct lane_op *lane_send_tail(int w, uint64_t tag, const void *buf,
			       size_t len, const void *tail, size_t tail_len,
			       hvd_status_t *st)
{
	struct lane_op *op = op_new(w, tag, st);
	struct peer *p;

	if (!op)
		return NULL;
	op->p = buf;
	op->left = len;
	if (tail_len)
		memcpy(op->tail, tail, tail_len);
	op->tail_len = tail_len;
	len += tail_len;
	put64(op->hdr, tag);
	put64(op->hdr + 8, len);
	pthread_mutex_lock(&lk);
	n_sent++;
	p = &peers_tab[w];
	if (!up || p->dead || connect_to(w) != 0) {
		complete(op, 2);
	} else {
		append(&p->txh, &p->txt, op);
		if (p->txh == op && p->fd >= 0)
			tx_write(w);
	}
	pthread_mutex_unlock(&lk);
	return op;
}

/* ---------------------------------------------------------- receiving */

/* Bytes [off, off + n) of the message for op (what fits). */
static void deliver(struct lane_op *op, size_t off, const char *b, size_t n)
{
	if (off >= op->expect)
		return;
	if (n > op->expect - off)
		n = op->expect - off;
	memcpy(op->buf + off, b, n);
}

/* Wake for the next bytes only once n of them are in (1: any). */
static void set_lowat(struct peer *p, int n)
{
	if (p->lowat == n || p->fd < 0)
		return;
	(void)setsockopt(p->fd, SOL_SOCKET, SO_RCVLOWAT, &n, sizeof(n));
	n_raised += (n > 1) - (p->lowat > 1);
	p->lowat = n;
}

/*
 * A message of at most HVD_TCP_LANE_WHOLE (4M) is read once it is all in
 * the kernel: SO_RCVLOWAT keeps epoll quiet until then.  Reading while
 * the sender's packets still come in contends for the socket with their
 * delivery; OpenMPI's handshake gets the same effect by its timing.
 * 2 netns nodes, 1 MiB alltoall (512 KiB each way): 351 -> 160 us;
 * allgather 370 -> 157 us.  1 when the rest of p's message is not in yet
 * and the mark is now raised for it; 0 to read what there is: the mark
 * was raised for it and we were woken (the kernel also wakes a reader
 * whose window closed before the mark), or it was raised LANE_LOWAT_S
 * ago.
 */
static int wait_whole(struct peer *p)
{
	size_t t = p->m_len - p->m_got;
	int avail = 0;

	if (!lowat_cap || t > lowat_cap || p->lowat == (int)t)
		return 0;
	if (p->lowat > 1 && hvd_now() - p->lowat_t >= LANE_LOWAT_S)
		return 0;
	if (ioctl(p->fd, SIOCINQ, &avail) != 0 || (size_t)avail >= t)
		return 0;
	set_lowat(p, (int)t);
	p->lowat_t = hvd_now();
	return 1;
}

static void msg_done(struct peer *p)
{
	n_recv++;
	if (p->lowat > 1)
		set_lowat(p, 1);
	if (p->m_op) {
		p->m_op->length = p->m_len;
		complete(p->m_op, p->m_len > p->m_op->expect ? 1 : 0);
	}
	p->m_op = NULL;
	p->m_unexp = NULL;
	p->in_msg = 0;
}

/*
 * A message's header is in: to its receive, or, when none is posted yet,
 * 1 (stall: leave the rest in the kernel, whose flow control holds the
 * sender back, until a receive is posted) or, when receives of other
 * tags are posted (they may wait for bytes behind this message: another
 * thread's collective), into memory of its own.  -1: out of memory.
 */
static int msg_start(int w)
{
	struct peer *p = &peers_tab[w];
	struct lane_op *op;
	uint64_t tag = get64(p->hdr);

	for (op = p->ph; op && op->tag != tag; op = op->next)
		;
	if (!op && !p->ph)
		return 1;
	p->m_len = get64(p->hdr + 8);
	p->m_got = 0;
	p->in_msg = 1;
	if (op) {
		unlink_op(&p->ph, &p->pt, op);
		p->m_op = op;
	} else {
		struct unexp *u;

		n_unexp++;
		if (p->m_len > ((size_t)1 << 40) ||
		    !(u = malloc(sizeof(*u) + p->m_len)))
			return -1;
		u->next = NULL;
		u->t = hvd_now();
		u->tag = tag;
		u->len = p->m_len;
		u->got = 0;
		if (p->ut)
			p->ut->next = u;
		else
			p->uh = u;
		p->ut = u;
		p->m_unexp = u;
	}
	if (p->m_len == 0)
		msg_done(p);
	return 0;
}

static void rx_read(int w)
{
	struct peer *p = &peers_tab[w];
	size_t budget = LANE_READ_BUDGET;
	int short_read = 0;

	/* Past the budget, a header already in is still taken: nothing
	 * else may come to wake us for it. */
	while (p->fd >= 0 && !p->stalled &&
	       (budget || (!p->in_msg && p->hdr_got == sizeof(p->hdr)))) {
		char *dst;
		size_t want;
		ssize_t r = 1;

		if (!p->in_msg) {
			/* The header may be in already: it came with the end
			 * of the message before. */
			if (p->hdr_got < sizeof(p->hdr)) {
				r = recv(p->fd, p->hdr + p->hdr_got,
					 sizeof(p->hdr) - p->hdr_got,
					 MSG_DONTWAIT);
				if (r > 0) {
					p->rx_t = hvd_now();
					p->hdr_got += (size_t)r;
				}
			}
			if (r > 0) {
				if (p->hdr_got < sizeof(p->hdr))
					continue;
				p->hdr_got = 0;
				short_read = 0;
				if (get64(p->hdr) == LANE_BYE_TAG) {
					fail_peer(w, NULL);
					return;
				}
				r = msg_start(w);
				if (r > 0) {
					n_stall++;
					p->stalled = 1;
					p->stall_t = hvd_now();
					return;
				}
				if (r < 0) {
					fail_peer(w, "brought a message too "
						   "large for memory");
					return;
				}
				continue;
			}
		} else {
			struct lane_op *op = p->m_op;
			int tail;

			want = p->m_len - p->m_got;
			if (op && p->m_got < op->expect) {
				dst = op->buf + p->m_got;
				if (want > op->expect - p->m_got)
					want = op->expect - p->m_got;
			} else if (p->m_unexp) {
				dst = p->m_unexp->data + p->m_got;
			} else {
				dst = scratch;
				if (want > LANE_SCRATCH)
					want = LANE_SCRATCH;
			}
			/* A rest of up to LANE_PROBE_FROM is simply read: it
			 * is usually all in, and the probe would be one more
			 * call; only when a read came up short does it wait
			 * for the whole rest. */
			if ((short_read ||
			     p->m_len - p->m_got > LANE_PROBE_FROM) &&
			    wait_whole(p))
				return;
			/* The read that ends a message also takes the next
			 * one's header, when it is there: one call less a
			 * message, and none to learn that nothing follows. */
			tail = dst != scratch && want == p->m_len - p->m_got;
			if (tail) {
				struct iovec iov[2] = {
				    {.iov_base = dst, .iov_len = want},
				    {.iov_base = p->hdr,
				     .iov_len = sizeof(p->hdr)}};
				struct msghdr mh = {.msg_iov = iov,
						    .msg_iovlen = 2};

				r = recvmsg(p->fd, &mh, MSG_DONTWAIT);
			} else {
				r = recv(p->fd, dst, want, MSG_DONTWAIT);
			}
			if (r > 0) {
				size_t got =
				    (size_t)r > want ? want : (size_t)r;

				p->rx_t = hvd_now();
				p->m_got += got;
				if (p->m_unexp)
					p->m_unexp->got = p->m_got;
				budget -= got < budget ? got : budget;
				if (p->m_got == p->m_len)
					msg_done(p);
				else if (got < want)
					short_read = 1;
				if ((size_t)r > want) {
					n_ahead++;
					p->hdr_got = (size_t)r - want;
					continue;
				}
				/* The socket had no more than the message:
				 * epoll says when something comes. */
				if (tail && got == want)
					return;
				continue;
			}
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			fail_peer(w, "closed without a goodbye (the rank "
				     "died)");
		else
			fail_errno(w);
		return;
	}
}

struct lane_op *lane_recv(int w, uint64_t tag, void *buf, size_t len,
			  hvd_status_t *st)
{
	struct lane_op *op = op_new(w, tag, st);
	struct unexp *u, *prev = NULL;
	struct peer *p;

	if (!op)
		return NULL;
	op->recv = 1;
	op->buf = buf;
	op->expect = len;
	pthread_mutex_lock(&lk);
	p = &peers_tab[w];
	for (u = p->uh; u && u->tag != tag; u = u->next)
		prev = u;
	if (u) {
		if (prev)
			prev->next = u->next;
		else
			p->uh = u->next;
		if (p->ut == u)
			p->ut = prev;
		deliver(op, 0, u->data, u->got);
		op->length = u->len;
		if (p->m_unexp == u) /* still arriving: the rest goes to op */
			p->m_op = op, p->m_unexp = NULL;
		else
			complete(op, u->len > len ? 1 : 0);
		free(u);
	} else if (!up || p->dead || connect_to(w) != 0) {
		complete(op, 2);
	} else {
		append(&p->ph, &p->pt, op);
		if (p->stalled && p->fd >= 0) {
			/* Now the stalled message goes to op, or (another
			 * tag) into memory, and reading goes on. */
			p->stalled = 0;
			if (msg_start(w) < 0) {
				fail_peer(w, "brought a message too large for "
					     "memory");
			} else {
				if (p->hup) {
					p->hup = 0;
					ep_conn(w, EPOLLIN, EPOLL_CTL_ADD);
				}
				ep_update(w);
				rx_read(w);
			}
		}
	}
	pthread_mutex_unlock(&lk);
	return op;
}

/* ------------------------------------------------------- completion */

int lane_test(struct lane_op *op, int *status, size_t *length)
{
	if (!atomic_load_explicit(&op->done, memory_order_acquire))
		return 0;
	*status = op->status;
	*length = op->length;
	free(op);
	return 1;
}

static int unlink_op(struct lane_op **h, struct lane_op **t,
		     struct lane_op *op)
{
	struct lane_op *prev = NULL;

	for (struct lane_op *o = *h; o; prev = o, o = o->next) {
		if (o != op)
			continue;
		if (prev)
			prev->next = o->next;
		else
			*h = o->next;
		if (*t == o)
			*t = prev;
		return 1;
	}
	return 0;
}

void lane_cancel(struct lane_op *op)
{
	struct peer *p;

	pthread_mutex_lock(&lk);
	if (atomic_load_explicit(&op->done, memory_order_acquire)) {
		pthread_mutex_unlock(&lk);
		free(op);
		return;
	}
	p = &peers_tab[op->w];
	if (op->recv) {
		if (p->m_op == op) {
			p->m_op = NULL; /* the rest of it is dropped */
		} else {
			unlink_op(&p->ph, &p->pt, op);
		}
		atomic_fetch_sub(&busy, 1);
		free(op);
	} else if (p->txh == op && op->hdr_off) {
		/* Partly written: the stream needs the rest, from a copy
		 * (the tail's rest after the body's). */
		size_t t = op->tail_len - op->tail_off;

		op->owned = op->left + t ? malloc(op->left + t) : NULL;
		op->orphan = 1;
		if (op->left + t && !op->owned) {
			fail_peer(op->w, "failed (out of memory)");
		} else {
			if (op->left)
				memcpy(op->owned, op->p, op->left);
			if (t)
				memcpy(op->owned + op->left,
				       op->tail + op->tail_off, t);
			op->p = op->owned;
			op->left += t;
			op->tail_off = op->tail_len;
		}
	} else {
		unlink_op(&p->txh, &p->txt, op);
		atomic_fetch_sub(&busy, 1);
		free(op);
	}
	pthread_mutex_unlock(&lk);
}

/* ------------------------------------------------ mismatched sizes */

int lane_holds(int w, uint64_t tag, double age)
{
	double before = hvd_now() - age;
	struct peer *p;
	int found = 0;

	if (!up || w < 0 || w >= nranks)
		return 0;
	pthread_mutex_lock(&lk);
	/* Nothing of ours may be on the lane, so nobody reads it: look. */
	progress_locked();
	p = &peers_tab[w];
	if (p->stalled && get64(p->hdr) == tag && p->stall_t <= before)
		found = 1;
	for (struct unexp *u = p->uh; u && !found; u = u->next)
		found = u->tag == tag && u->t <= before;
	pthread_mutex_unlock(&lk);
	return found;
}

int lane_quiet(struct lane_op *op, double age)
{
	double before = hvd_now() - age;
	struct peer *p;
	int quiet = 0;

	pthread_mutex_lock(&lk);
	if (up && op->recv && !atomic_load(&op->done)) {
		p = &peers_tab[op->w];
		quiet = p->m_op != op && !p->in_msg && !p->stalled &&
			p->rx_t <= before && op->t0 <= before;
	}
	pthread_mutex_unlock(&lk);
	return quiet;
}

/* ---------------------------------------------------------- progress */

int lane_busy(void)
{
	return atomic_load_explicit(&busy, memory_order_relaxed) > 0;
}

int lane_poll_fd(void)
{
	return up ? epfd : -1;
}

int lane_block_ms(int ms)
{
	return n_raised && ms > 1 ? 1 : ms;
}

static int progress_locked(void)
{
	struct epoll_event ev[16];
	int n;

	completed = 0;
	/* A raised mark that did not wake us within LANE_LOWAT_S: read
	 * what there is (a kernel that does not wake a reader whose window
	 * closed first would otherwise leave both ends waiting). */
	for (int w = 0; n_raised && w < nranks; w++)
		if (peers_tab[w].lowat > 1 &&
		    hvd_now() - peers_tab[w].lowat_t >= LANE_LOWAT_S) {
			n_late++;
			rx_read(w);
		}
	n = epoll_wait(epfd, ev, 16, 0);
	for (int i = 0; i < n; i++) {
		int kind = (int)(ev[i].data.u64 >> 32);
		int idx = (int)(uint32_t)ev[i].data.u64;

		switch (kind) {
		case K_LISTEN:
			accept_all();
			break;
		case K_HELLO:
			hello_read(idx);
			break;
		case K_CONN: {
			struct peer *p = &peers_tab[idx];

			if ((ev[i].events & EPOLLOUT) && p->txh)
				tx_write(idx);
			if (p->fd < 0)
				break;
			if (!p->stalled) {
				rx_read(idx);
			} else if (ev[i].events & (EPOLLHUP | EPOLLERR)) {
				/* Read on when the stalled message's receive
				 * comes; until then not woken again. */
				p->hup = 1;
				p->ev = 0;
				(void)epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd,
						NULL);
			} else {
				ep_update(idx); /* stalled: bytes out */
			}
			break;
		}
		}
	}
	return completed;
}

int lane_progress(void)
{
	int done;

	if (!up || pthread_mutex_trylock(&lk) != 0)
		return 0;
	done = progress_locked();
	pthread_mutex_unlock(&lk);
	return done;
}

/* Listening sockets of worlds this process has left (lane_park). */
#define LANE_PARKED 64
static int parked[LANE_PARKED], nparked;

void lane_park(void)
{
	pthread_mutex_lock(&lk);
	if (lfd >= 0) {
		if (nparked == LANE_PARKED) {
			close(parked[0]);
			memmove(parked, parked + 1,
				(LANE_PARKED - 1) * sizeof(*parked));
			nparked--;
		}
		parked[nparked++] = lfd;
		lfd = -1;
	}
	pthread_mutex_unlock(&lk);
}

void lane_close(void)
{
	pthread_mutex_lock(&lk);
	if (peers_tab)
		hvd_log(HVD_LOG_DEBUG,
			"TCP lane: %lu messages sent, %lu received, %lu before "
			"their receive (%lu held in the kernel until it came), "
			"%lu sends waited for room, %lu reads not woken by their "
			"low-water mark, %lu headers read with the end of the "
			"message before",
			n_sent, n_recv, n_unexp, n_stall, n_full, n_late,
			n_ahead);
	n_sent = n_recv = n_unexp = n_stall = n_full = n_late = n_ahead = 0;
	up = 0;
	everywhere = 0;
	for (int w = 0; peers_tab && w < nranks; w++) {
		struct peer *p = &peers_tab[w];
		uint8_t bye[16];

		/* Only between whole messages: else the peer sees the
		 * stream end mid-message, as from a dead rank. */
		if (p->fd >= 0 && !p->txh) {
			put64(bye, LANE_BYE_TAG);
			put64(bye + 8, 0);
			(void)send(p->fd, bye, sizeof(bye),
				   MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		fail_peer(w, NULL);
		while (p->uh) {
			struct unexp *u = p->uh;

			p->uh = u->next;
			free(u);
		}
	}
	for (int i = 0; i < LANE_PENDING; i++)
		if (hellos[i].fd >= 0 && epfd >= 0)
			fd_close(&hellos[i].fd);
	if (lfd >= 0)
		close(lfd);
	if (epfd >= 0)
		close(epfd);
	lfd = epfd = -1;
	free(peers_tab);
	free(tab);
	free(scratch);
	peers_tab = NULL;
	tab = NULL;
	scratch = NULL;
	nranks = 0;
	atomic_store(&n_raised, 0);
	pthread_mutex_unlock(&lk);
}
