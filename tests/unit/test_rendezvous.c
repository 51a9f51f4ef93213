/*
 * test_rendezvous.c - the elastic join file (runtime/api/rendezvous.c):
 * its text round-trips and anything else is refused; it is written 0600 in
 * a directory made 0700; a symbolic link (to the directory or the file), a
 * directory or file others may read or write, or a file of another job is
 * refused, never followed or trusted.
 */
#include "api/rendezvous.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void sample(struct rdv_info *r, uint8_t *addr, size_t n)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->job, sizeof(r->job), "4242");
	r->restart = 1;
	snprintf(r->step, sizeof(r->step), "slurm.pmix.4242.0");
	r->epoch = 3;
	for (int i = 0; i < RDV_TOKEN_BYTES; i++)
		r->token[i] = (uint8_t)(0xf0 ^ i);
	for (int i = 0; i < RDV_KEY_BYTES; i++)
		r->key[i] = (uint8_t)(0x5a + i);
	snprintf(r->node, sizeof(r->node), "vm#node2");
	r->pid = 31337;
	r->pidns = 4026532176u;
	for (size_t i = 0; i < n; i++)
		addr[i] = (uint8_t)(i * 13);
	r->addr = addr;
	r->addr_len = n;
}

static int parses(const char *text)
{
	struct rdv_info r;

	if (rdv_parse(text, strlen(text), &r) != HVD_OK)
		return 0;
	rdv_info_free(&r);
	return 1;
}

int main(void)
{
	char buf[4096], tmpl[] = "/var/tmp/hvd-rdv-XXXXXX", dir[4200],
	     path[4300], link_dir[4200];
	uint8_t addr[200];
	struct rdv_info in, out;
	size_t n;
	struct stat sb;
	int missing;

	plan(32);
	sample(&in, addr, sizeof(addr));
	ok(rdv_format(&in, buf, sizeof(buf), &n) == HVD_OK,
	   "the file's text is made");
	ok(rdv_parse(buf, n, &out) == HVD_OK && !strcmp(out.job, "4242") &&
		   out.restart == 1 && !strcmp(out.step, in.step) &&
		   out.epoch == 3 && !memcmp(out.token, in.token, 16) &&
		   !memcmp(out.key, in.key, 16) &&
		   !strcmp(out.node, "vm#node2") && out.pid == 31337 &&
		   out.pidns == 4026532176u &&
		   out.addr_len == sizeof(addr) &&
		   !memcmp(out.addr, addr, sizeof(addr)),
	   "... and read back field for field");
	rdv_info_free(&out);
	{
		int bad = 0;

		for (size_t k = 0; k < n; k++) {
			struct rdv_info r;

			if (rdv_parse(buf, k, &r) == HVD_OK) {
				bad++;
				rdv_info_free(&r);
			}
		}
		ok(!bad, "every truncation of it is refused (%d accepted)",
		   bad);
	}
	ok(!parses("hvd-elastic-rendezvous 1\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\naddr 00\n"),
	   "another version (1, without the key) is refused");
	ok(!parses("hvd-elastic-rendezvous 2\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 00000000000000000000000000000000\naddr 00\n"),
	   "another version (2, without rank 0's node and pid) is refused");
	ok(!parses("hvd-elastic-rendezvous 3\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 00000000000000000000000000000000\nnode -\npid 0\n"
		   "addr 00\n"),
	   "another version (3, without rank 0's pid namespace) is refused");
	{
		const char *v3 = "hvd-elastic-rendezvous 3\njob 1\n",
			   *vx = "hvd-elastic-rendezvous x\n";
		struct rdv_info r;

		ok(rdv_parse(v3, strlen(v3), &r) == HVD_ERR_CORRUPT &&
			   strstr(hvd_last_error(),
				  "is of version 3, and this libhvd reads "
				  "version 4: every step of a job must run "
				  "the same libhvd"),
		   "... saying which version it is and which one it reads");
		ok(rdv_parse(vx, strlen(vx), &r) == HVD_ERR_CORRUPT &&
			   strstr(hvd_last_error(),
				  "malformed at the first line"),
		   "a first line that names no version is malformed");
	}
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 00000000000000000000000000000000\nnode -\npid 0\n"
		   "pidns x\naddr 00\n"),
	   "a pid namespace that is not a number is refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 00000000000000000000000000000000\nnode -\npid -5\n"
		   "pidns 0\naddr 00\n"),
	   "a negative pid is refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 00000000000000000000000000000000\nnode a b\npid 1\n"
		   "pidns 0\naddr 00\n"),
	   "a node with a space is refused");
	{
		struct rdv_info r;

		sample(&r, addr, 1);
		r.node[0] = '\0';
		r.pid = 0;
		ok(rdv_format(&r, buf, sizeof(buf), &n) == HVD_OK &&
			   strstr(buf, "\nnode -\npid 0\npidns 4026532176\n") &&
			   rdv_parse(buf, n, &out) == HVD_OK &&
			   out.node[0] == '\0' && out.pid == 0,
		   "no node is written as '-' and read back as none");
		rdv_info_free(&out);
		snprintf(r.node, sizeof(r.node), "x\ty");
		ok(rdv_format(&r, buf, sizeof(buf), &n) == HVD_OK &&
			   strstr(buf, "\nnode -\n"),
		   "a node that is not plain text is written as none");
	}
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 0000000000000000000000000000000g\nkey 00000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"),
	   "a token that is not hex is refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\n"
		   "key 000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"),
	   "a key of 15 bytes is refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart -1\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\nkey 00000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"),
	   "a negative restart count is refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\nkey 00000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"
		   "extra 1\n"),
	   "trailing lines are refused");
	ok(!parses("hvd-elastic-rendezvous 4\njob a b\nrestart 0\nstep s\n"
		   "epoch 0\ntoken 00000000000000000000000000000000\nkey 00000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"),
	   "a job id with a space is refused");
	ok(parses("hvd-elastic-rendezvous 4\njob 1\nrestart 0\nstep s\n"
		  "epoch 0\ntoken 00000000000000000000000000000000\nkey 00000000000000000000000000000000\nnode -\npid 0\npidns 0\naddr 00\n"),
	   "the smallest valid file parses");
	rdv_job_name("12/../x", buf, sizeof(buf));
	is_str(buf, "12____x", "a job id becomes a safe file name part");

	if (!mkdtemp(tmpl)) {
		skip(12, "no temporary directory under /var/tmp");
		return done_testing();
	}
	snprintf(dir, sizeof(dir), "%s/rdv", tmpl);
	ok(rdv_write(dir, &in) == HVD_OK, "written into a new directory");
	ok(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700,
	   "... made 0700 (%o)", (unsigned)(sb.st_mode & 0777));
	snprintf(path, sizeof(path), "%s/join-4242", dir);
	ok(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600,
	   "... the file 0600 (%o)", (unsigned)(sb.st_mode & 0777));
	ok(rdv_read(dir, "4242", &out, &missing) == HVD_OK && out.epoch == 3,
	   "... and read back");
	rdv_info_free(&out);
	ok(rdv_read(dir, "4343", &out, &missing) != HVD_OK && missing,
	   "another job has no file there");
	chmod(path, 0644);
	ok(rdv_read(dir, "4242", &out, &missing) != HVD_OK && !missing &&
		   strstr(hvd_last_error(), "not private"),
	   "a file others can read is refused: %s", hvd_last_error());
	chmod(path, 0600);
	chmod(dir, 0755);
	ok(rdv_read(dir, "4242", &out, &missing) != HVD_OK &&
		   strstr(hvd_last_error(), "not private"),
	   "a directory others can enter is refused");
	chmod(dir, 0700);
	snprintf(link_dir, sizeof(link_dir), "%s/link", tmpl);
	ok(symlink(dir, link_dir) == 0 &&
		   rdv_read(link_dir, "4242", &out, &missing) != HVD_OK &&
		   strstr(hvd_last_error(), "symbolic link"),
	   "a directory reached through a symbolic link is refused");
	unlink(link_dir);
	{
		char real[4300];

		snprintf(real, sizeof(real), "%s/elsewhere", dir);
		rename(path, real);
		ok(symlink("elsewhere", path) == 0 &&
			   rdv_read(dir, "4242", &out, &missing) != HVD_OK,
		   "a file that is a symbolic link is refused (%s)",
		   hvd_last_error());
		unlink(path);
		rename(real, path);
	}
	rdv_remove(dir, "4242", "another-step");
	ok(access(path, F_OK) == 0,
	   "another step's end does not remove the file");
	rdv_remove(dir, "4242", in.step);
	ok(access(path, F_OK) != 0 && errno == ENOENT,
	   "the writer's end removes it");
	ok(rdv_read(dir, "4242", &out, &missing) != HVD_OK && missing,
	   "... and then there is none to read");
	rmdir(dir);
	rmdir(tmpl);
	return done_testing();
}
