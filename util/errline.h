/* errline.h — the one-line "path: message" errors that readers and parsers return to callers. */
#ifndef DNN_ERRLINE_H
#define DNN_ERRLINE_H
#include <stdarg.h>
#include <stddef.h>

/* Writes "<path>: <printf message>" into err (NULL path prints "(null)"), truncating to errlen,
 * and folds any newline into a space so the error always stays one line. */
void dnn_set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The same from a va_list; prefix NULL writes the message alone. The one formatter of error
 * lines: graph's "file:line: ..." (dnn_op_fail) and the image-folder reader use it too. */
void dnn_vset_err(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap);
#endif
