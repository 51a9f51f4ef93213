/*
 * path.c - path templates and the admin's roots (see path.h).
 *
 * Paths reach slurmstepd from the user (option strings, the job name), so
 * the rules are lexical and strict: absolute, no "." or ".." component
 * after normalisation, no "//", and a job name can never add a component.
 */
#include "path.h"
#include "err.h"

#include <stdio.h>
#include <string.h>

int path_normalise(char *path, char *err, size_t errlen)
{
	char buf[PATH_LEN];
	size_t o = 0, n = strlen(path);
	const char *p = path, *end = path + n;

	if (n == 0 || path[0] != '/') {
		err_set(err, errlen, "not an absolute path");
		return -1;
	}
	if (n >= sizeof(buf)) {
		err_set(err, errlen, "path longer than %d bytes", PATH_LEN - 1);
		return -1;
	}
	while (p < end) {
		const char *s;
		size_t cl;

		while (p < end && *p == '/')
			p++;
		s = p;
		while (p < end && *p != '/')
			p++;
		cl = (size_t)(p - s);
		if (cl == 0 || (cl == 1 && s[0] == '.'))
			continue;
		if (cl == 2 && s[0] == '.' && s[1] == '.') {
			err_set(err, errlen, "'..' is not allowed in a path");
			return -1;
		}
		buf[o++] = '/';
		memcpy(buf + o, s, cl);
		o += cl;
	}
	if (o == 0) {
		err_set(err, errlen, "'/' itself is not allowed");
		return -1;
	}
	buf[o] = '\0';
	memcpy(path, buf, o + 1);
	return 0;
}

/* Replace user-chosen job name characters that could change a path. */
static size_t put_safe_name(const char *name, char *out, size_t room)
{
	size_t n = 0;

	if (!name || !*name)
		name = "job";
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		name = "_";
	for (; *name && n < room; name++) {
		char c = *name;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			 c == '-';

		out[n++] = ok ? c : '_';
	}
	return n;
}

/* Slurm's special step ids (slurm.h's SLURM_*_SCRIPT/CONT), as its file
 * name patterns print them. */
static const char *step_name(unsigned long stepid)
{
	switch (stepid) {
	case 0xfffffffaUL:
		return "interactive";
	case 0xfffffffbUL:
		return "batch";
	case 0xfffffffcUL:
		return "extern";
	default:
		return NULL;
	}
}

int path_expand(const char *tmpl, const char *user, unsigned long jobid,
		const char *jobname, char *out, size_t outlen, char *err,
		size_t errlen)
{
	return path_expand_step(tmpl, user, jobid, 0, jobname, out, outlen,
				err, errlen);
}

int path_expand_step(const char *tmpl, const char *user, unsigned long jobid,
		     unsigned long stepid, const char *jobname, char *out,
		     size_t outlen, char *err, size_t errlen)
{
	char buf[PATH_LEN * 2];
	size_t o = 0, room = sizeof(buf) - 1;

	for (const char *p = tmpl; *p; p++) {
		char num[24];
		size_t n;

		if (o >= room)
			goto toolong;
		if (*p != '%') {
			buf[o++] = *p;
			continue;
		}
		switch (*++p) {
		case 'u':
			n = put_safe_name(user, buf + o, room - o);
			break;
		case 'j':
			n = (size_t)snprintf(num, sizeof(num), "%lu", jobid);
			if (n > room - o)
				goto toolong;
			memcpy(buf + o, num, n);
			break;
		case 's':
			if (step_name(stepid))
				n = (size_t)snprintf(num, sizeof(num), "%s",
						     step_name(stepid));
			else
				n = (size_t)snprintf(num, sizeof(num), "%lu",
						     stepid);
			if (n > room - o)
				goto toolong;
			memcpy(buf + o, num, n);
			break;
		case 'x':
			n = put_safe_name(jobname, buf + o, room - o);
			break;
		case '%':
			buf[o] = '%';
			n = 1;
			break;
		default:
			err_set(err, errlen, "bad escape in path template '%s'",
				tmpl);
			return -1;
		}
		o += n;
	}
	buf[o] = '\0';
	if (o >= outlen || o >= PATH_LEN)
		goto toolong;
	if (path_normalise(buf, err, errlen))
		return -1;
	strcpy(out, buf);
	return 0;
toolong:
	err_set(err, errlen, "expanded path from '%s' is longer than %zu bytes",
		tmpl, (outlen < PATH_LEN ? outlen : PATH_LEN) - 1);
	return -1;
}

int path_under(const char *path, const char *roots)
{
	const char *r = roots;

	while (r && *r) {
		const char *c = strchr(r, ':');
		size_t rl = c ? (size_t)(c - r) : strlen(r);

		/* Drop trailing slashes of the root ("/scratch/"). */
		while (rl > 1 && r[rl - 1] == '/')
			rl--;
		if (rl == 1 && r[0] == '/')
			return path[0] == '/';
		if (rl > 0 && strncmp(path, r, rl) == 0 &&
		    (path[rl] == '\0' || path[rl] == '/'))
			return 1;
		r = c ? c + 1 : NULL;
	}
	return 0;
}
