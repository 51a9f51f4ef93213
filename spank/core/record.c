/* record.c - see record.h. */
#include "record.h"
#include "cfg.h"
#include "vars.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void record_printf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

void record_put(struct record *c, const char *name, const char *value,
		const char *fmt, ...)
{
	struct hints *out = c->out;
	struct hint *h;
	const char *user = c->slurms ? NULL : vars_getenv(c->env, name);
	char why[HINTS_WHY_LEN];
	va_list ap;

	if (out->n >= HINTS_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	h = &out->h[out->n++];
	snprintf(h->name, sizeof(h->name), "%s", name);
	if (user && !cfg_forced(c->cfg, name)) {
		h->action = HINT_KEPT;
		snprintf(h->value, sizeof(h->value), "%s", user);
		record_printf(
		    h->why, sizeof(h->why),
		    "set by the user, kept (the plugin would set %.64s: "
		    "%s)",
		    value, why);
		return;
	}
	h->action = user ? HINT_FORCED : HINT_SET;
	snprintf(h->value, sizeof(h->value), "%s", value);
	if (user)
		record_printf(h->why, sizeof(h->why),
			      "forced by the admin over the user's %.64s: %s",
			      user, why);
	else
		snprintf(h->why, sizeof(h->why), "%s", why);
}

void record_note(struct record *c, const char *fmt, ...)
{
	va_list ap;

	if (c->out->nnotes >= HINTS_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(c->out->notes[c->out->nnotes++], HINTS_WHY_LEN, fmt, ap);
	va_end(ap);
}

void record_put_uint(struct record *c, const char *name, unsigned long v,
		     const char *fmt, ...)
{
	char val[24], why[HINTS_WHY_LEN];
	va_list ap;

	snprintf(val, sizeof(val), "%lu", v);
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	record_put(c, name, val, "%s", why);
}
