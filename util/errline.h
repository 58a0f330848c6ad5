/* errline.h — the one-line "path: message" errors that readers and parsers return to callers. */
#ifndef DNN_ERRLINE_H
#define DNN_ERRLINE_H
#include <stddef.h>

/* Writes "<path>: <printf message>" into err (NULL path prints "(null)"), truncating to errlen,
 * and folds any newline into a space so the error always stays one line. */
void dnn_set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#endif
