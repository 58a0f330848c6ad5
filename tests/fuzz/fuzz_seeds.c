/* fuzz_seeds OUTDIR — writes the seed corpora of the fuzz harnesses:
 *   OUTDIR/netfile/     the built-in nets and small nets using every op and key
 *   OUTDIR/idx/         valid IDX pairs (raw and gzip'd), and a few near misses
 *   OUTDIR/cifar/       valid CIFAR-10 batches in one, two and three files (raw and gzip'd)
 *   OUTDIR/tokens/      texts, llm.c token files and pairs, and a few near misses
 *   OUTDIR/checkpoint/  checkpoints written by dnn_checkpoint_save for each tensor set
 * in the input layouts of fuzz_common.h. Run by the build (tests/fuzz/CMakeLists.txt), so no
 * binary corpus is kept in the repository. */
#include "fuzz_common.h"

#include <errno.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "graph.h"

static const char *outdir;

static void put(const char *harness, const char *name, const void *data, size_t n)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", outdir, harness);
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		perror(p);
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/%s/%s", outdir, harness, name);
	FILE *f = fopen(p, "wb");
	if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
		perror(p);
		exit(1);
	}
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* ------------------------------------------------------------------ net files */
static const char *const small_nets[][2] = {
    {"mlp", "input x 1 8 8\ndense h x out=16\nrelu r h\ndense o r out=3\nsoftmax_xent loss o\n"},
    {"conv-all-keys", "# every conv key\ninput img 3 16 16\n"
		      "conv c1 img out=4 k=3 stride=2 pad=1 dilation=1 bias=1\n"
		      "batchnorm bn1 c1 eps=1e-3 momentum=0.2\nrelu r1 bn1\n"
		      "maxpool p1 r1 k=3 stride=2 pad=1\navgpool g p1\ndense fc g out=10\n"
		      "softmax_xent loss fc\n"},
    {"residual", "input x 2 12 12\nconv a x out=4 k=3 pad=1\nrelu ra a\nconv b ra out=4 k=3 pad=1\n"
		 "conv s x out=4 k=1\nadd sum b,s\nrelu rs sum\nconv d rs out=4 k=3 dilation=2 pad=2\n"
		 "add sum2 d,rs,sum\navgpool gp sum2\ndense fc gp out=2\nsoftmax_xent loss fc\n"},
    {"out-of-order", "softmax_xent loss fc\ndense fc r out=5\nrelu r x\ninput x 1 4 4\n"},
    {"crlf-tabs", "input\tx\t1 6 6\r\nconv\tc x\tout=2 k=3\r\nrelu r c # comment\r\n"
		  "dense f r out=2\r\nsoftmax_xent l f\r\n"},
    {"bad-shape", "input x 1 4 4\nconv c x out=2 k=5\nrelu r c\ndense f r out=2\nsoftmax_xent l f\n"},
    {"bad-cycle", "input x 1 4 4\ndense a b out=4\ndense b a out=4\nsoftmax_xent l b\n"},
    {"big-input", "input x 65536 1 1\ndense f x out=1048576\nsoftmax_xent l f\n"},
};

static void net_seeds(void)
{
	for (int i = 0; i < dnn_builtin_net_count(); i++) {
		const char *name = dnn_builtin_net_name(i);
		const char *text = dnn_builtin_net_text(name);
		put("netfile", name, text, strlen(text));
	}
	for (size_t i = 0; i < sizeof(small_nets) / sizeof(small_nets[0]); i++)
		put("netfile", small_nets[i][0], small_nets[i][1], strlen(small_nets[i][1]));
	// The same small net with trailing bytes that the harness reads as --input H W.
	char buf[512];
	size_t n = strlen(small_nets[0][1]);
	memcpy(buf, small_nets[0][1], n);
	memcpy(buf + n, "#\x20\x00\x20\x00", 5); // comment byte, then H = W = 32 (le16)
	put("netfile", "mlp-input-32x32", buf, n + 5);
}

/* ------------------------------------------------------------------ IDX */
/* flags, max_classes, limit, images (n of r x c), labels (n, label i % mod). */
static void idx_seed(const char *name, uint8_t flags, uint8_t max_classes, uint8_t limit, uint32_t imagic,
		     uint32_t n, uint32_t r, uint32_t c, size_t npix, uint32_t lmagic, uint32_t nl, size_t nlab,
		     int mod)
{
	size_t ilen = 16 + npix, llen = 8 + nlab;
	uint8_t *b = calloc(5 + ilen + llen, 1);
	b[0] = flags, b[1] = max_classes, b[2] = limit, b[3] = (uint8_t)ilen, b[4] = (uint8_t)(ilen >> 8);
	uint8_t *im = b + 5, *lb = im + ilen;
	be32(im, imagic), be32(im + 4, n), be32(im + 8, r), be32(im + 12, c);
	for (size_t i = 0; i < npix; i++)
		im[16 + i] = (uint8_t)(i * 37);
	be32(lb, lmagic), be32(lb + 4, nl);
	for (size_t i = 0; i < nlab; i++)
		lb[8 + i] = (uint8_t)(i % (size_t)mod);
	put("idx", name, b, 5 + ilen + llen);
	free(b);
}

static void idx_seeds(void)
{
	idx_seed("valid", 0, 10, 0, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("valid-gz-images", 1, 10, 0, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("valid-gz-labels", 2, 10, 0, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("valid-gz-both", 3, 10, 0, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("valid-limit", 0, 10, 2, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("valid-28x28", 0, 10, 0, 0x803, 2, 28, 28, 2 * 784, 0x801, 2, 2, 10);
	idx_seed("labels-out-of-range", 0, 3, 0, 0x803, 5, 4, 3, 60, 0x801, 5, 5, 10);
	idx_seed("counts-disagree", 0, 10, 0, 0x803, 5, 4, 3, 60, 0x801, 4, 4, 10);
	idx_seed("truncated-images", 0, 10, 0, 0x803, 5, 4, 3, 59, 0x801, 5, 5, 10);
	idx_seed("huge-promise", 3, 10, 0, 0x803, 100000000, 4096, 4096, 60, 0x801, 100000000, 5, 10);
}

/* ------------------------------------------------------------------ CIFAR-10 */
static void cifar_seed(const char *name, uint8_t flags, uint8_t limit, int nfiles, int recs_per_file)
{
	size_t rec = 3073, per = rec * (size_t)recs_per_file, n = 6 + per * (size_t)nfiles;
	uint8_t *b = calloc(n, 1);
	b[0] = (uint8_t)(flags | (nfiles - 1)), b[1] = limit;
	b[2] = (uint8_t)per, b[3] = (uint8_t)(per >> 8), b[4] = (uint8_t)per, b[5] = (uint8_t)(per >> 8);
	for (size_t r = 0; r < (size_t)(recs_per_file * nfiles); r++) {
		uint8_t *p = b + 6 + r * rec;
		p[0] = (uint8_t)(r % 10);
		for (size_t i = 1; i < rec; i++)
			p[i] = (uint8_t)(i * 13 + r);
	}
	put("cifar", name, b, n);
	free(b);
}

static void cifar_seeds(void)
{
	cifar_seed("one-file", 0, 0, 1, 2);
	cifar_seed("one-file-gz", FUZZ_CIFAR_GZ, 0, 1, 2);
	cifar_seed("two-files", 0, 0, 2, 1);
	cifar_seed("three-files-gz", FUZZ_CIFAR_GZ, 0, 3, 1);
	cifar_seed("limit-1", 0, 1, 2, 1);
}

/* ------------------------------------------------------------------ token files */
/* flags, T, vocab, then (mode 0) a text or (1, 2) an llm.c file of n tokens promising `promise`
 * with `magic` (mode 2: a second file of 40 tokens follows). */
static void tokens_seed(const char *name, uint8_t flags, uint8_t T, uint16_t vocab, uint32_t magic, int n, int promise)
{
	static uint8_t b[8192];
	size_t k = 6;
	b[0] = flags, b[1] = T, b[2] = (uint8_t)vocab, b[3] = (uint8_t)(vocab >> 8);
	if ((flags & 3u) == 0) {
		const char *text = "In the beginning God created the heaven and the earth. \xc3\xa9t\xc3\xa9\n";
		for (int r = 0; r < n; r++)
			for (const char *c = text; *c; c++)
				b[k++] = (uint8_t)*c;
	} else {
		for (int file = 0; file < ((flags & 3u) >= 2 ? 2 : 1); file++) {
			const int m = file ? 40 : n, pm = file ? 40 : promise;
			const size_t start = k;
			memset(b + k, 0, 1024);
			for (int i = 0; i < 4; i++)
				b[k + i] = (uint8_t)(magic >> (8 * i)), b[k + 8 + i] = (uint8_t)((uint32_t)pm >> (8 * i));
			b[k + 4] = 1;
			k += 1024;
			for (int i = 0; i < m; i++, k += 2)
				b[k] = (uint8_t)(i * 7 % 300), b[k + 1] = (uint8_t)((i * 7 % 300) >> 8); /* ids < 300 */
			if (file == 0)
				b[4] = (uint8_t)(k - start), b[5] = (uint8_t)((k - start) >> 8);
		}
	}
	put("tokens", name, b, k);
}

static void tokens_seeds(void)
{
	tokens_seed("text-train", FUZZ_TOKENS_TRAIN, 16, 256, 0, 8, 0);
	tokens_seed("text-val", 0, 8, 256, 0, 8, 0);
	tokens_seed("text-small-vocab", FUZZ_TOKENS_TRAIN, 8, 128, 0, 4, 0);
	tokens_seed("llmc-train", 1 | FUZZ_TOKENS_TRAIN, 8, 300, 20240520, 200, 200);
	tokens_seed("llmc-val", 1, 4, 300, 20240520, 200, 200);
	tokens_seed("llmc-pair", 2 | FUZZ_TOKENS_TRAIN, 8, 300, 20240520, 100, 100);
	tokens_seed("llmc-pair-val", 2, 8, 300, 20240520, 100, 100);
	tokens_seed("llmc-truncated", 1 | FUZZ_TOKENS_TRAIN, 8, 300, 20240520, 100, 101);
	tokens_seed("llmc-bad-magic", 1 | FUZZ_TOKENS_TRAIN, 8, 300, 20240521, 100, 100);
	tokens_seed("llmc-vocab-too-small", 1 | FUZZ_TOKENS_TRAIN, 8, 50, 20240520, 100, 100);
}

/* ------------------------------------------------------------------ checkpoints */
/* version: 0 (current: DNN_CKPT_VERSION) or an older one; net: the net text (versions 2 on), or NULL. */
static void ckpt_seed_v(int set_i, uint8_t flags, uint32_t nclasses, uint32_t version, char *net)
{
	const fuzz_ckpt_set *set = &fuzz_ckpt_sets[set_i];
	static float store[4][300];
	dnn_ckpt_tensor t[4];
	for (int i = 0; i < set->n; i++) {
		for (uint64_t j = 0; j < set->lens[i]; j++)
			store[i][j] = (float)i - 0.5f * (float)j;
		t[i] = (dnn_ckpt_tensor){set->names[i], store[i], set->lens[i]};
	}
	char *classes[3] = {"cat", "", "dog with spaces"};
	dnn_ckpt_meta meta = {.net_fingerprint = FUZZ_CKPT_FP, .step = 1234, .epoch = 3,
			      .rng_state = 0xfeedfacecafebeefull, .nclasses = nclasses, .class_names = classes,
			      .version = version, .net_text = net};
	char path[4096], err[512];
	snprintf(path, sizeof(path), "%s/seed.ckpt", outdir);
	if (dnn_checkpoint_save(path, &meta, t, set->n, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_seeds: %s\n", err);
		exit(1);
	}
	FILE *f = fopen(path, "rb");
	static uint8_t buf[1 << 16];
	buf[0] = (uint8_t)(set_i | flags);
	size_t n = f ? fread(buf + 1, 1, sizeof(buf) - 1, f) : 0;
	if (!f || n == 0 || n == sizeof(buf) - 1) {
		fprintf(stderr, "fuzz_seeds: cannot read back %s\n", path);
		exit(1);
	}
	fclose(f);
	remove(path);
	char name[64];
	snprintf(name, sizeof(name), "set%d-classes%u-flags%u-v%u%s", set_i, nclasses, flags, version ? version : DNN_CKPT_VERSION,
		 net ? "-net" : "");
	put("checkpoint", name, buf, n + 1);
}

static void ckpt_seed(int set_i, uint8_t flags, uint32_t nclasses)
{
	ckpt_seed_v(set_i, flags, nclasses, 0, NULL);
}

static void ckpt_seeds(void)
{
	for (int s = 0; s < 4; s++) {
		ckpt_seed(s, 0, 0);
		ckpt_seed(s, FUZZ_CKPT_FIX_CRC | FUZZ_CKPT_CHECK_FP, 3);
	}
	ckpt_seed(2, FUZZ_CKPT_FIX_CRC, 0);
	ckpt_seed(2, FUZZ_CKPT_CHECK_FP, 3);
	// The current version with the net text (what starpu_anp writes), and versions 2 and 1 (older files).
	static char net[] = "# net mlp.net, as trained\ninput x 1 8 8\ndense h x out=16 \nrelu r h\n"
			    "dense o r out=3\nsoftmax_xent loss o\n";
	for (int s = 0; s < 4; s++) {
		ckpt_seed_v(s, FUZZ_CKPT_FIX_CRC, 3, 0, net);
		ckpt_seed_v(s, FUZZ_CKPT_FIX_CRC | FUZZ_CKPT_CHECK_FP, 0, 0, net);
		ckpt_seed_v(s, FUZZ_CKPT_FIX_CRC, 3, 1, NULL);
		ckpt_seed_v(s, FUZZ_CKPT_FIX_CRC, 3, 2, net);
	}
	ckpt_seed_v(1, 0, 3, 1, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds OUTDIR\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
		perror(outdir);
		return 1;
	}
	net_seeds();
	idx_seeds();
	cifar_seeds();
	tokens_seeds();
	ckpt_seeds();
	return 0;
}
