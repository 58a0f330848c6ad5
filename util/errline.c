/* errline.c — see errline.h. Free of StarPU so the fuzz harnesses can compile it alone. */
#include "errline.h"

#include <stdarg.h>
#include <stdio.h>

void dnn_set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	int k = snprintf(err, errlen, "%s: ", path ? path : "(null)");
	if (k < 0 || (size_t)k >= errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
	va_end(ap);
	// One line, whatever the path or a zlib message contained.
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}
