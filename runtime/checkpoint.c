/* checkpoint.c — atomic, checksummed model checkpoints (format in checkpoint.h). */
#include "checkpoint.h"
#include "errline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CKPT_VERSION DNN_CKPT_VERSION
#define CKPT_PREFIX 16u                 // magic + version + header_len
#define CKPT_HDR_FIXED 36u              // fingerprint, step, epoch, ntensors, rng, nclasses
#define MAX_NAME 4096u                  // tensor and class names
#define MAX_CLASSES 100000u
#define MAX_CLASS_BYTES ((uint64_t)1 << 20) // class-name section of the header
#define MAX_NET_BYTES (16u << 20)         // net text (as net files: graph.c)
#define MAX_TENSORS (1u << 20)
#define MAX_INFO_HEADER ((uint64_t)64 << 20) // read_info: the largest header it reads
#define STAGE_FLOATS 16384              // floats converted per write/read step

static const unsigned char ckpt_magic[8] = {'A', 'N', 'P', 'C', 'K', 'P', 'T', '\0'};


/* ------------------------------------------------------------------ little-endian bytes */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Growable byte buffer for the header. */
typedef struct {
	unsigned char *p;
	size_t len, cap;
	int oom;
} bytes;

static void b_put(bytes *b, const void *src, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		while (nc < b->len + n)
			nc *= 2;
		unsigned char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}
static void b_u32(bytes *b, uint32_t v)
{
	unsigned char t[4];
	put32(t, v);
	b_put(b, t, 4);
}
static void b_u64(bytes *b, uint64_t v)
{
	unsigned char t[8];
	put64(t, v);
	b_put(b, t, 8);
}

/* ------------------------------------------------------------------ save */

/* fwrite that also feeds the running CRC. */
static int w(FILE *f, uLong *crc, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (fwrite(p, 1, n, f) != n)
		return -1;
	// crc32 takes a uInt length: feed in pieces.
	const unsigned char *c = p;
	while (n) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		*crc = crc32(*crc, c, k);
		c += k;
		n -= k;
	}
	return 0;
}

static int check_args(const char *path, const dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
		      int ntensors, uint64_t *payload, char *err, size_t errlen)
{
	if (!path || !*path) {
		dnn_set_err(err, errlen, path, "empty checkpoint path");
		return -1;
	}
	if (!meta) {
		dnn_set_err(err, errlen, path, "no metadata given");
		return -1;
	}
	if (ntensors < 0 || (ntensors > 0 && !tensors)) {
		dnn_set_err(err, errlen, path, "bad tensor list (%d tensors)", ntensors);
		return -1;
	}
	uint64_t total = 0;
	for (int i = 0; i < ntensors; i++) {
		const dnn_ckpt_tensor *t = &tensors[i];
		if (!t->name || strlen(t->name) > MAX_NAME) {
			dnn_set_err(err, errlen, path, "tensor %d has no name or a name over %u bytes", i,
				MAX_NAME);
			return -1;
		}
		if (t->n > 0 && !t->data) {
			dnn_set_err(err, errlen, path, "tensor \"%s\" has no data", t->name);
			return -1;
		}
		uint64_t b;
		if (__builtin_mul_overflow(t->n, 4, &b) || __builtin_add_overflow(total, b, &total) ||
		    total > (UINT64_MAX >> 2)) {
			dnn_set_err(err, errlen, path, "tensor \"%s\" is absurdly large (%llu values)", t->name,
				(unsigned long long)t->n);
			return -1;
		}
	}
	*payload = total;
	return 0;
}

/* The meta's own checks: class names, version, net text. *version gets the version to write. */
static int check_meta(const char *path, const dnn_ckpt_meta *meta, uint32_t *version, size_t *net_len, char *err,
		      size_t errlen)
{
	if (meta->nclasses > MAX_CLASSES || (meta->nclasses > 0 && !meta->class_names)) {
		dnn_set_err(err, errlen, path, "bad class-name list (%u classes)", meta->nclasses);
		return -1;
	}
	*version = meta->version ? meta->version : CKPT_VERSION;
	*net_len = meta->net_text ? strlen(meta->net_text) : 0;
	if (*version < 1 || *version > CKPT_VERSION) {
		dnn_set_err(err, errlen, path, "cannot write checkpoint version %u (1 to %u)", *version, CKPT_VERSION);
		return -1;
	}
	if (*version == 1 && *net_len > 0) {
		dnn_set_err(err, errlen, path, "a version-1 checkpoint cannot carry the net text");
		return -1;
	}
	if (*net_len > MAX_NET_BYTES) {
		dnn_set_err(err, errlen, path, "net text of %zu bytes (at most %u)", *net_len, MAX_NET_BYTES);
		return -1;
	}
	return 0;
}

/* The header, built in memory into h (h->p: free() it, whatever the result). */
static int build_header(bytes *h, const char *path, const dnn_ckpt_meta *meta, uint32_t version, size_t net_len,
			const dnn_ckpt_tensor *tensors, int ntensors, char *err, size_t errlen)
{
	b_u64(h, meta->net_fingerprint);
	b_u64(h, meta->step);
	b_u32(h, meta->epoch);
	b_u32(h, (uint32_t)ntensors);
	b_u64(h, meta->rng_state);
	b_u32(h, meta->nclasses);
	uint64_t class_bytes = 0;
	for (uint32_t i = 0; i < meta->nclasses; i++) {
		const char *s = meta->class_names[i] ? meta->class_names[i] : "";
		size_t len = strlen(s);
		if (len > MAX_NAME) {
			dnn_set_err(err, errlen, path, "class name %u is over %u bytes", i, MAX_NAME);
			return -1;
		}
		class_bytes += 4 + len;
		b_u32(h, (uint32_t)len);
		b_put(h, s, len);
	}
	if (class_bytes > MAX_CLASS_BYTES) {
		dnn_set_err(err, errlen, path, "class names take %llu bytes (at most %llu)",
			(unsigned long long)class_bytes, (unsigned long long)MAX_CLASS_BYTES);
		return -1;
	}
	if (version >= 2) {
		b_u32(h, (uint32_t)net_len);
		b_put(h, meta->net_text ? meta->net_text : "", net_len);
	}
	for (int i = 0; i < ntensors; i++) {
		size_t len = strlen(tensors[i].name);
		b_u32(h, (uint32_t)len);
		b_put(h, tensors[i].name, len);
		b_u64(h, tensors[i].n);
	}
	if (h->oom) {
		dnn_set_err(err, errlen, path, "out of memory building the header");
		return -1;
	}
	return 0;
}

/* Prefix, header, payload (floats little-endian whatever the host order) and CRC into f.
 * 0; -1 with errno set (0: short write); -2 out of memory. */
static int write_body(FILE *f, uint32_t version, const bytes *h, const dnn_ckpt_tensor *tensors, int ntensors)
{
	unsigned char pre[CKPT_PREFIX], tail[4];
	uLong crc = crc32(0L, Z_NULL, 0);
	errno = 0;
	memcpy(pre, ckpt_magic, 8);
	put32(pre + 8, version);
	put32(pre + 12, (uint32_t)h->len);
	if (w(f, &crc, pre, sizeof(pre)) || w(f, &crc, h->p, h->len))
		return -1;
	unsigned char *st = malloc(STAGE_FLOATS * 4);
	if (!st)
		return -2;
	for (int i = 0; i < ntensors; i++) {
		const float *d = tensors[i].data;
		for (uint64_t o = 0; o < tensors[i].n; o += STAGE_FLOATS) {
			uint64_t k = tensors[i].n - o < STAGE_FLOATS ? tensors[i].n - o : STAGE_FLOATS;
			for (uint64_t j = 0; j < k; j++) {
				uint32_t u;
				memcpy(&u, &d[o + j], 4);
				put32(st + 4 * j, u);
			}
			if (w(f, &crc, st, (size_t)k * 4)) {
				free(st);
				return -1;
			}
		}
	}
	free(st);
	put32(tail, (uint32_t)crc);
	if (fwrite(tail, 1, 4, f) != 4 || fflush(f) != 0)
		return -1;
	return 0;
}

/* The folder of path ("." when it has none), allocated; NULL when out of memory. */
static char *dir_of(const char *path)
{
	char *dir = malloc(strlen(path) + 2);
	if (!dir)
		return NULL;
	strcpy(dir, path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return dir;
}

/* Make a rename into the folder of path durable: fsync the folder. */
static int sync_dir(const char *path, char *err, size_t errlen)
{
	char *dir = dir_of(path);
	if (!dir) {
		dnn_set_err(err, errlen, path, "out of memory");
		return -1;
	}
	int rc = -1, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		dnn_set_err(err, errlen, path, "cannot open directory %s to sync it: %s", dir, strerror(errno));
	else if (fsync(dfd) != 0) {
		dnn_set_err(err, errlen, path, "fsync of directory %s failed: %s", dir, strerror(errno));
		close(dfd);
	} else if (close(dfd) != 0)
		dnn_set_err(err, errlen, path, "closing directory %s failed: %s", dir, strerror(errno));
	else
		rc = 0;
	free(dir);
	return rc;
}

/* Write the file at tmp (created), fsync it and close it. */
static int write_tmp(const char *path, const char *tmp, uint32_t version, const bytes *h,
		     const dnn_ckpt_tensor *tensors, int ntensors, char *err, size_t errlen)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		dnn_set_err(err, errlen, path, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		dnn_set_err(err, errlen, path, "cannot open %s: %s", tmp, strerror(errno));
		close(fd);
		return -1;
	}
	int r = write_body(f, version, h, tensors, ntensors);
	if (r == -2)
		dnn_set_err(err, errlen, path, "out of memory");
	else if (r != 0)
		dnn_set_err(err, errlen, path, "write to %s failed: %s", tmp, errno ? strerror(errno) : "short write");
	else if (fsync(fileno(f)) != 0) {
		dnn_set_err(err, errlen, path, "fsync of %s failed: %s", tmp, strerror(errno));
		r = -1;
	}
	if (r != 0) {
		fclose(f); // already failing; its own error adds nothing
		return -1;
	}
	if (fclose(f) != 0) {
		dnn_set_err(err, errlen, path, "closing %s failed: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int dnn_checkpoint_save(const char *path, const dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	uint64_t payload;
	uint32_t version;
	size_t net_len;
	if (check_args(path, meta, tensors, ntensors, &payload, err, errlen) != 0 ||
	    check_meta(path, meta, &version, &net_len, err, errlen) != 0)
		return -1;
	bytes h = {0};
	if (build_header(&h, path, meta, version, net_len, tensors, ntensors, err, errlen) != 0) {
		free(h.p);
		return -1;
	}
	// PATH.tmp.<pid> in the same directory, so rename() is atomic.
	size_t tlen = strlen(path) + 32;
	char *tmp = malloc(tlen);
	int rc = -1;
	if (!tmp) {
		dnn_set_err(err, errlen, path, "out of memory");
		free(h.p);
		return -1;
	}
	snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
	if (write_tmp(path, tmp, version, &h, tensors, ntensors, err, errlen) != 0)
		unlink(tmp);
	else if (rename(tmp, path) != 0) {
		dnn_set_err(err, errlen, path, "cannot rename %s over it: %s", tmp, strerror(errno));
		unlink(tmp);
	} else
		rc = sync_dir(path, err, errlen);
	free(tmp);
	free(h.p);
	return rc;
}

/* ------------------------------------------------------------------ load */

/* A header being read: its bytes, and the offset of the next field. */
typedef struct {
	const char *path;
	const unsigned char *hp;
	uint64_t hlen, o;
	char *err;
	size_t errlen;
	char *state; // meta.state: tensor 1's name suffix
} cursor;

/* 0 when nb more bytes are left, else -1 with "header ends inside <what>". */
static int need(cursor *c, uint64_t nb, const char *what)
{
	if (c->hlen - c->o >= nb)
		return 0;
	dnn_set_err(c->err, c->errlen, c->path, "header ends inside %s (corrupt header)", what);
	return -1;
}

/* The fixed fields into got; checks the fingerprint (want, if not 0) and the counts. */
static int parse_fixed(cursor *c, uint32_t version, const dnn_ckpt_meta *want, int ntensors, dnn_ckpt_meta *got,
		       uint32_t *nt)
{
	if (need(c, CKPT_HDR_FIXED, "the fixed fields") != 0)
		return -1;
	const unsigned char *hp = c->hp;
	got->net_fingerprint = get64(hp);
	got->step = get64(hp + 8);
	got->epoch = get32(hp + 16);
	*nt = get32(hp + 20);
	got->rng_state = get64(hp + 24);
	got->nclasses = get32(hp + 32);
	got->class_names = NULL;
	got->net_text = NULL;
	got->version = version;
	got->state[0] = '\0';
	c->o = CKPT_HDR_FIXED;
	if (want && want->net_fingerprint != 0 && got->net_fingerprint != want->net_fingerprint) {
		dnn_set_err(c->err, c->errlen, c->path,
			"checkpoint is for another net (fingerprint %016llx, this net is %016llx)",
			(unsigned long long)got->net_fingerprint, (unsigned long long)want->net_fingerprint);
		return -1;
	}
	if (ntensors >= 0 && *nt != (uint32_t)ntensors) {
		dnn_set_err(c->err, c->errlen, c->path, "checkpoint holds %u tensors, this net has %d", *nt, ntensors);
		return -1;
	}
	if (*nt > MAX_TENSORS) {
		dnn_set_err(c->err, c->errlen, c->path, "absurd tensor count %u (corrupt header)", *nt);
		return -1;
	}
	if (got->nclasses > MAX_CLASSES) {
		dnn_set_err(c->err, c->errlen, c->path, "absurd class count %u (corrupt header)", got->nclasses);
		return -1;
	}
	return 0;
}

/* Past the n class names, checking each. */
static int skip_class_names(cursor *c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (need(c, 4, "a class name") != 0)
			return -1;
		uint32_t len = get32(c->hp + c->o);
		c->o += 4;
		if (len > MAX_NAME) {
			dnn_set_err(c->err, c->errlen, c->path, "class name %u is %u bytes long (corrupt header)", i, len);
			return -1;
		}
		if (need(c, len, "a class name") != 0)
			return -1;
		// Loaded as a C string: an inner NUL would silently cut it short.
		if (memchr(c->hp + c->o, '\0', len)) {
			dnn_set_err(c->err, c->errlen, c->path, "class name %u contains a NUL byte (corrupt header)", i);
			return -1;
		}
		c->o += len;
	}
	return 0;
}

/* The net text's section (versions 2 and later): its offset and length. */
static int skip_net_text(cursor *c, uint64_t *net_off, uint32_t *net_len)
{
	if (need(c, 4, "the net text's length") != 0)
		return -1;
	*net_len = get32(c->hp + c->o);
	c->o += 4;
	if (*net_len > MAX_NET_BYTES) {
		dnn_set_err(c->err, c->errlen, c->path, "net text of %u bytes (at most %u; corrupt header)", *net_len,
			MAX_NET_BYTES);
		return -1;
	}
	if (need(c, *net_len, "the net text") != 0)
		return -1;
	if (memchr(c->hp + c->o, '\0', *net_len)) {
		dnn_set_err(c->err, c->errlen, c->path, "the net text contains a NUL byte (corrupt header)");
		return -1;
	}
	*net_off = c->o;
	c->o += *net_len;
	return 0;
}

/* Tensor i of the file, its name (len bytes from the file) and size, against the caller's. */
static int match_tensor(cursor *c, uint32_t i, const char *name, uint32_t len, uint64_t n, const dnn_ckpt_tensor *t)
{
	size_t wl = strlen(t->name);
	if (len != wl || memcmp(name, t->name, wl) != 0) {
		// The name comes from the file: show at most 64 bytes, printable ones only.
		char shown[68];
		size_t k = 0;
		for (; k < len && k < 64; k++)
			shown[k] = name[k] >= 0x20 && name[k] < 0x7f ? name[k] : '?';
		strcpy(shown + k, len > 64 ? "..." : "");
		dnn_set_err(c->err, c->errlen, c->path, "tensor %u is \"%s\" in the checkpoint, this net has \"%s\"", i,
			shown, t->name);
		return -1;
	}
	if (n != t->n) {
		dnn_set_err(c->err, c->errlen, c->path, "tensor \"%s\" has %llu values in the checkpoint, this net has %llu",
			t->name, (unsigned long long)n, (unsigned long long)t->n);
		return -1;
	}
	return 0;
}

/* meta.state := what follows the last '.' of name (len bytes from the file), if it fits and holds
 * no NUL. */
static void note_state(cursor *c, const char *name, uint32_t len)
{
	uint32_t d = len;
	while (d > 0 && name[d - 1] != '.')
		d--;
	const uint32_t k = len - d;
	if (d == 0 || k >= sizeof(((dnn_ckpt_meta *)0)->state) || memchr(name + d, '\0', k))
		return;
	memcpy(c->state, name + d, k);
	c->state[k] = '\0';
}

/* The nt tensor entries: checked against the caller's tensors, or (ntensors < 0) summed into
 * *total (payload bytes). */
static int parse_tensors(cursor *c, uint32_t nt, const dnn_ckpt_tensor *tensors, int ntensors, uint64_t *total)
{
	*total = 0;
	for (uint32_t i = 0; i < nt; i++) {
		if (need(c, 4, "a tensor name") != 0)
			return -1;
		uint32_t len = get32(c->hp + c->o);
		c->o += 4;
		if (len > MAX_NAME) {
			dnn_set_err(c->err, c->errlen, c->path, "tensor %u name is %u bytes long (corrupt header)", i, len);
			return -1;
		}
		if (need(c, (uint64_t)len + 8, "a tensor entry") != 0)
			return -1;
		const char *name = (const char *)c->hp + c->o;
		c->o += len;
		uint64_t n = get64(c->hp + c->o);
		c->o += 8;
		if (i == 1)
			note_state(c, name, len);
		if (ntensors >= 0) {
			if (match_tensor(c, i, name, len, n, &tensors[i]) != 0)
				return -1;
			continue;
		}
		uint64_t b;
		if (__builtin_mul_overflow(n, 4, &b) || __builtin_add_overflow(*total, b, total) ||
		    *total > (UINT64_MAX >> 2)) {
			dnn_set_err(c->err, c->errlen, c->path, "tensor %u is absurdly large (%llu values; corrupt header)",
				i, (unsigned long long)n);
			return -1;
		}
	}
	return 0;
}

/* got->net_text and got->class_names, allocated from the (checked) header. */
static int copy_names(cursor *c, uint64_t class_off, uint64_t net_off, uint32_t net_len, dnn_ckpt_meta *got)
{
	if (net_len > 0) {
		got->net_text = malloc((size_t)net_len + 1);
		if (!got->net_text)
			goto oom;
		memcpy(got->net_text, c->hp + net_off, net_len);
		got->net_text[net_len] = '\0';
	}
	if (got->nclasses == 0)
		return 0;
	char **nm = calloc(got->nclasses, sizeof(char *));
	if (!nm)
		goto oom;
	uint64_t o = class_off;
	for (uint32_t i = 0; i < got->nclasses; i++) {
		uint32_t len = get32(c->hp + o);
		o += 4;
		nm[i] = malloc((size_t)len + 1);
		if (!nm[i]) {
			for (uint32_t j = 0; j < i; j++)
				free(nm[j]);
			free(nm);
			goto oom;
		}
		memcpy(nm[i], c->hp + o, len);
		nm[i][len] = '\0';
		o += len;
	}
	got->class_names = nm;
	return 0;
oom:
	free(got->net_text);
	got->net_text = NULL;
	dnn_set_err(c->err, c->errlen, c->path, "out of memory");
	return -1;
}

/* Parses and checks the header of a checkpoint of this version against the caller's tensors
 * (ntensors < 0: any tensors, their payload bytes into *payload). With alloc, fills
 * got->class_names and got->net_text (allocated) once everything matched. */
static int parse_header(const char *path, const unsigned char *hp, uint64_t hlen, uint32_t version,
			const dnn_ckpt_meta *want, const dnn_ckpt_tensor *tensors, int ntensors,
			dnn_ckpt_meta *got, int alloc, uint64_t *payload, char *err, size_t errlen)
{
	cursor c = {.path = path, .hp = hp, .hlen = hlen, .err = err, .errlen = errlen, .state = got->state};
	uint32_t nt, net_len = 0;
	uint64_t net_off = 0, total = 0;
	if (parse_fixed(&c, version, want, ntensors, got, &nt) != 0)
		return -1;
	const uint64_t class_off = c.o;
	if (skip_class_names(&c, got->nclasses) != 0 || (version >= 2 && skip_net_text(&c, &net_off, &net_len) != 0) ||
	    parse_tensors(&c, nt, tensors, ntensors, &total) != 0)
		return -1;
	if (c.o != hlen) {
		dnn_set_err(err, errlen, path, "header is %llu bytes, its fields take %llu (corrupt header)",
			(unsigned long long)hlen, (unsigned long long)c.o);
		return -1;
	}
	if (payload)
		*payload = total;
	return alloc ? copy_names(&c, class_off, net_off, net_len, got) : 0;
}

/* Reads exactly n bytes; 0, or -1 with err set. */
static int read_all(FILE *f, const char *path, unsigned char *buf, size_t n, char *err,
		    size_t errlen)
{
	size_t r = fread(buf, 1, n, f);
	if (r != n) {
		if (ferror(f))
			dnn_set_err(err, errlen, path, "read error: %s", strerror(errno));
		else
			dnn_set_err(err, errlen, path, "file shrank while reading (%zu of %zu bytes)", r, n);
		return -1;
	}
	return 0;
}

/* Opens a checkpoint: a regular file long enough for one, whose prefix (read into pre) has the
 * magic and a version this build reads. Returns the open file, or NULL with err set. */
static FILE *open_ckpt(const char *path, uint64_t *size, unsigned char pre[CKPT_PREFIX], uint32_t *version,
		       uint32_t *hlen, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0)
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
	else if (S_ISDIR(st.st_mode))
		dnn_set_err(err, errlen, path, "is a directory, not a checkpoint");
	else if (!S_ISREG(st.st_mode))
		dnn_set_err(err, errlen, path, "not a regular file");
	else if ((*size = (uint64_t)st.st_size) == 0)
		dnn_set_err(err, errlen, path, "empty file (not a checkpoint)");
	else if (*size < CKPT_PREFIX + CKPT_HDR_FIXED + 4)
		dnn_set_err(err, errlen, path, "too short for a checkpoint (%llu bytes)", (unsigned long long)*size);
	else if (read_all(f, path, pre, CKPT_PREFIX, err, errlen) != 0)
		;
	else if (memcmp(pre, ckpt_magic, 8) != 0)
		dnn_set_err(err, errlen, path, "not a checkpoint (bad magic)");
	else if ((*version = get32(pre + 8)) < 1 || *version > CKPT_VERSION)
		dnn_set_err(err, errlen, path, "checkpoint version %u is not supported (this build reads 1 to %u)",
			*version, CKPT_VERSION);
	else {
		*hlen = get32(pre + 12);
		return f;
	}
	fclose(f);
	return NULL;
}

/* 0 when hlen fits in [CKPT_HDR_FIXED, cap] and in the file, else -1 with err. */
static int check_hlen(const char *path, uint32_t hlen, uint64_t cap, uint64_t size, char *err, size_t errlen)
{
	if (hlen >= CKPT_HDR_FIXED && hlen <= cap && CKPT_PREFIX + (uint64_t)hlen + 4 <= size)
		return 0;
	dnn_set_err(err, errlen, path, "header length %u out of bounds (file is %llu bytes; corrupt or truncated)", hlen,
		(unsigned long long)size);
	return -1;
}

/* The file's size is not what these tensors need: read just the header to say why, if it can
 * tell (unverified by the CRC, but a mismatch is a mismatch), else report the size. Closes f;
 * returns -1. */
static int explain_size(FILE *f, const char *path, uint32_t hlen, uint32_t version, const dnn_ckpt_meta *meta,
			const dnn_ckpt_tensor *tensors, int ntensors, uint64_t size, uint64_t want_size, char *err,
			size_t errlen)
{
	unsigned char *hp = malloc(hlen);
	if (!hp) {
		dnn_set_err(err, errlen, path, "out of memory");
		fclose(f);
		return -1;
	}
	dnn_ckpt_meta got = {0};
	int r = read_all(f, path, hp, hlen, err, errlen);
	fclose(f);
	if (r == 0 && parse_header(path, hp, hlen, version, meta, tensors, ntensors, &got, 0, NULL, err, errlen) == 0)
		dnn_set_err(err, errlen, path, "file is %llu bytes, a checkpoint of these tensors is %llu (truncated or corrupt)",
			(unsigned long long)size, (unsigned long long)want_size);
	free(hp);
	return -1;
}

/* The whole file (size bytes, the prefix already read into pre) into memory, its CRC checked.
 * Closes f. Returns the buffer (free()), or NULL with err. */
static unsigned char *read_verified(FILE *f, const char *path, const unsigned char *pre, uint64_t size, char *err,
				    size_t errlen)
{
	unsigned char *buf = size <= SIZE_MAX ? malloc((size_t)size) : NULL;
	if (!buf) {
		if (size > SIZE_MAX)
			dnn_set_err(err, errlen, path, "too large for this machine");
		else
			dnn_set_err(err, errlen, path, "out of memory (%llu bytes)", (unsigned long long)size);
		fclose(f);
		return NULL;
	}
	memcpy(buf, pre, CKPT_PREFIX);
	int r = read_all(f, path, buf + CKPT_PREFIX, (size_t)size - CKPT_PREFIX, err, errlen);
	if (r == 0 && fgetc(f) != EOF) {
		dnn_set_err(err, errlen, path, "file grew while reading");
		r = -1;
	}
	fclose(f);
	if (r != 0) {
		free(buf);
		return NULL;
	}
	uLong crc = crc32(0L, Z_NULL, 0);
	for (uint64_t o = 0; o < size - 4;) {
		uInt k = size - 4 - o > (1u << 30) ? (1u << 30) : (uInt)(size - 4 - o);
		crc = crc32(crc, buf + o, k);
		o += k;
	}
	if ((uint32_t)crc != get32(buf + size - 4)) {
		dnn_set_err(err, errlen, path, "checksum mismatch (file is corrupt or truncated)");
		free(buf);
		return NULL;
	}
	return buf;
}

int dnn_checkpoint_load(const char *path, dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	uint64_t payload, size = 0;
	if (check_args(path, meta, tensors, ntensors, &payload, err, errlen) != 0)
		return -1;
	unsigned char pre[CKPT_PREFIX];
	uint32_t version = 0, hlen = 0;
	FILE *f = open_ckpt(path, &size, pre, &version, &hlen, err, errlen);
	if (!f)
		return -1;
	// The largest header these tensors allow: fixed fields, class names, net text, tensor entries.
	uint64_t hdr_cap = CKPT_HDR_FIXED + MAX_CLASS_BYTES + (version >= 2 ? 4 + MAX_NET_BYTES : 0);
	for (int i = 0; i < ntensors; i++)
		hdr_cap += 12 + strlen(tensors[i].name);
	if (check_hlen(path, hlen, hdr_cap, size, err, errlen) != 0) {
		fclose(f);
		return -1;
	}
	uint64_t want_size = CKPT_PREFIX + (uint64_t)hlen + payload + 4;
	if (size != want_size)
		return explain_size(f, path, hlen, version, meta, tensors, ntensors, size, want_size, err, errlen);
	// size == want_size, which is bounded by the caller's own tensors: safe to hold in memory.
	unsigned char *buf = read_verified(f, path, pre, size, err, errlen);
	dnn_ckpt_meta got = {0};
	if (!buf)
		return -1;
	if (parse_header(path, buf + CKPT_PREFIX, hlen, version, meta, tensors, ntensors, &got, 1, NULL, err,
			 errlen) != 0) {
		free(buf);
		return -1;
	}
	// Everything checked: now, and only now, write into the caller's buffers.
	const unsigned char *p = buf + CKPT_PREFIX + hlen;
	for (int i = 0; i < ntensors; i++) {
		float *d = tensors[i].data;
		for (uint64_t j = 0; j < tensors[i].n; j++, p += 4) {
			uint32_t u = get32(p);
			memcpy(&d[j], &u, 4);
		}
	}
	free(buf);
	*meta = got;
	return 0;
}

void dnn_ckpt_free_names(dnn_ckpt_meta *meta)
{
	if (!meta)
		return;
	free(meta->net_text);
	meta->net_text = NULL;
	if (!meta->class_names)
		return;
	for (uint32_t i = 0; i < meta->nclasses; i++)
		free(meta->class_names[i]);
	free(meta->class_names);
	meta->class_names = NULL;
	meta->nclasses = 0;
}

/* ------------------------------------------------------------------ header only */

/* The rest of the file after its header: payload bytes and the CRC, checked against crc (which
 * covers the prefix and the header). */
static int verify_rest(FILE *f, const char *path, uLong crc, uint64_t payload, char *err, size_t errlen)
{
	const size_t B = 1 << 20;
	unsigned char *blk = malloc(B);
	int rc = -1;
	if (!blk) {
		dnn_set_err(err, errlen, path, "out of memory");
		return -1;
	}
	uint64_t left = payload;
	while (left > 0) {
		size_t k = left > B ? B : (size_t)left;
		if (read_all(f, path, blk, k, err, errlen) != 0)
			break;
		crc = crc32(crc, blk, (uInt)k);
		left -= k;
	}
	if (left == 0 && read_all(f, path, blk, 4, err, errlen) == 0) {
		if ((uint32_t)crc != get32(blk))
			dnn_set_err(err, errlen, path, "checksum mismatch (file is corrupt or truncated)");
		else
			rc = 0;
	}
	free(blk);
	return rc;
}

int dnn_checkpoint_read_info(const char *path, dnn_ckpt_meta *meta, int verify, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!meta) {
		dnn_set_err(err, errlen, path, "no meta to fill");
		return -1;
	}
	memset(meta, 0, sizeof(*meta));
	unsigned char pre[CKPT_PREFIX], *hp = NULL;
	uint32_t version = 0, hlen = 0;
	uint64_t size = 0, payload = 0;
	FILE *f = open_ckpt(path, &size, pre, &version, &hlen, err, errlen);
	if (!f)
		return -1;
	int rc = -1;
	dnn_ckpt_meta got;
	if (check_hlen(path, hlen, MAX_INFO_HEADER, size, err, errlen) != 0)
		goto out;
	if (!(hp = malloc(hlen))) {
		dnn_set_err(err, errlen, path, "out of memory");
		goto out;
	}
	if (read_all(f, path, hp, hlen, err, errlen) != 0 ||
	    parse_header(path, hp, hlen, version, NULL, NULL, -1, &got, 1, &payload, err, errlen) != 0)
		goto out;
	*meta = got;
	if (verify) {
		uint64_t want = CKPT_PREFIX + (uint64_t)hlen + payload + 4;
		uLong crc = crc32(crc32(crc32(0L, Z_NULL, 0), pre, sizeof(pre)), hp, hlen);
		if (size != want)
			dnn_set_err(err, errlen, path, "file is %llu bytes, its header describes %llu (truncated or corrupt)",
				(unsigned long long)size, (unsigned long long)want);
		if (size != want || verify_rest(f, path, crc, payload, err, errlen) != 0) {
			dnn_ckpt_free_names(meta);
			goto out;
		}
	}
	rc = 0;
out:
	free(hp);
	fclose(f);
	return rc;
}

int dnn_checkpoint_read_classes(const char *path, dnn_ckpt_meta *meta, char *err, size_t errlen)
{
	return dnn_checkpoint_read_info(path, meta, 0, err, errlen);
}
