/* errline.c — see errline.h. Free of StarPU so the fuzz harnesses can compile it alone. */
#include "errline.h"

#include <stdarg.h>
#include <stdio.h>

void dnn_vset_err(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
{
	if (!err || errlen == 0)
		return;
	int k = prefix ? snprintf(err, errlen, "%s: ", prefix) : 0;
	if (k < 0 || (size_t)k >= errlen)
		return;
	vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
	// One line, whatever the path or a zlib message contained.
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

void dnn_set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dnn_vset_err(err, errlen, path ? path : "(null)", fmt, ap);
	va_end(ap);
}
