/* anpgen — writes a small image-folder data set of Adjective-Noun-Pair classes for the tests and
 * the demo: adjectives are colours, nouns are shapes ("red_circle", "blue_triangle", ...), drawn
 * on a noisy grey background at a random place and size, as PNG and JPEG files of different
 * sizes and aspect ratios.
 *
 *   anpgen DIR [--per-class N] [--val-per-class M] [--adjectives K] [--corrupt] [--seed S]
 *
 * With --val-per-class M > 0 the layout is DIR/train/<class>/ and DIR/val/<class>/, else
 * DIR/<class>/. --corrupt adds files that must be skipped, and prints how many: a text file named
 * .jpg, a truncated PNG, an empty .png and a PNG header with absurd dimensions (last line:
 * "corrupt=4"). Exit status 0, or 1 with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

static const char *adjectives[] = {"red", "green", "blue", "yellow"};
static const unsigned char colours[][3] = {{220, 40, 40}, {40, 190, 60}, {50, 80, 230}, {230, 210, 40}};
static const char *nouns[] = {"circle", "square", "triangle"};
#define NNOUNS 3

static uint64_t rng_state;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static void mkdir_or_die(const char *p)
{
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "anpgen: mkdir %s: %s\n", p, strerror(errno));
		exit(1);
	}
}

static int inside(int noun, double x, double y, double cx, double cy, double r)
{
	double dx = x - cx, dy = y - cy;
	switch (noun) {
	case 0: return dx * dx + dy * dy <= r * r;
	case 1: return dx >= -0.8 * r && dx <= 0.8 * r && dy >= -0.8 * r && dy <= 0.8 * r;
	default: { /* upward triangle: apex (cx, cy - r), base at cy + 0.8 r, half width r */
		double t = (dy + r) / (1.8 * r);
		return t >= 0 && t <= 1 && dx >= -t * r && dx <= t * r;
	}
	}
}

/* An image of class (adj, noun): w x h RGB. */
static unsigned char *draw(int adj, int noun, int w, int h)
{
	unsigned char *px = malloc((size_t)w * h * 3);
	if (!px) {
		fprintf(stderr, "anpgen: out of memory\n");
		exit(1);
	}
	int bg = rnd_int(60, 190);
	int m = w < h ? w : h;
	double r = m * (0.30 + 0.08 * (rnd() % 1000) / 1000.0);
	double cx = w / 2.0 + (rnd_int(-60, 60) / 1000.0) * m, cy = h / 2.0 + (rnd_int(-60, 60) / 1000.0) * m;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			unsigned char *p = px + ((size_t)y * w + x) * 3;
			int in = inside(noun, x + 0.5, y + 0.5, cx, cy, r);
			for (int c = 0; c < 3; c++) {
				int v = (in ? colours[adj][c] : bg) + rnd_int(-18, 18);
				p[c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
		}
	return px;
}

static void write_image(const char *dir, const char *cls, int k, int adj, int noun)
{
	/* sizes 40..120, aspect ratios within 3:4..4:3 (a random crop of the resized image then
	 * still holds most of the shape) */
	int w = rnd_int(40, 120), h = w * rnd_int(75, 133) / 100;
	unsigned char *px = draw(adj, noun, w, h);
	char path[8192];
	int ok;
	if (k % 2 == 0) {
		snprintf(path, sizeof(path), "%s/%s/%04d.png", dir, cls, k);
		ok = stbi_write_png(path, w, h, 3, px, w * 3);
	} else {
		snprintf(path, sizeof(path), "%s/%s/%04d.jpg", dir, cls, k);
		ok = stbi_write_jpg(path, w, h, 3, px, 90);
	}
	free(px);
	if (!ok) {
		fprintf(stderr, "anpgen: cannot write %s\n", path);
		exit(1);
	}
}

static void write_bytes(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "anpgen: cannot write %s\n", path);
		exit(1);
	}
}

static void write_class_set(const char *dir, int nadj, int per_class, int first)
{
	mkdir_or_die(dir);
	for (int a = 0; a < nadj; a++)
		for (int n = 0; n < NNOUNS; n++) {
			char cls[64], p[8192];
			snprintf(cls, sizeof(cls), "%s_%s", adjectives[a], nouns[n]);
			snprintf(p, sizeof(p), "%s/%s", dir, cls);
			mkdir_or_die(p);
			for (int k = 0; k < per_class; k++)
				write_image(dir, cls, first + k, a, n);
		}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: anpgen DIR [--per-class N] [--val-per-class M] [--adjectives K] [--corrupt] [--seed S]\n");
		return 1;
	}
	const char *dir = argv[1];
	int per_class = 24, val_per_class = 0, nadj = 3, corrupt = 0;
	unsigned long seed = 1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--corrupt"))
			corrupt = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "--per-class"))
			per_class = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--val-per-class"))
			val_per_class = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--adjectives"))
			nadj = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--seed"))
			seed = strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "anpgen: unknown argument '%s'\n", argv[i]);
			return 1;
		}
	}
	if (per_class < 1 || val_per_class < 0 || nadj < 1 || nadj > 4) {
		fprintf(stderr, "anpgen: bad counts\n");
		return 1;
	}
	rng_state = 0x9e3779b97f4a7c15ull ^ (seed * 0x2545f4914f6cdd1dull);
	mkdir_or_die(dir);
	char train[4096], val[4096];
	snprintf(train, sizeof(train), "%s%s", dir, val_per_class > 0 ? "/train" : "");
	snprintf(val, sizeof(val), "%s/val", dir);
	write_class_set(train, nadj, per_class, 0);
	if (val_per_class > 0)
		write_class_set(val, nadj, val_per_class, per_class);
	if (corrupt) {
		char p[8192];
		/* 1. not an image at all */
		snprintf(p, sizeof(p), "%s/%s_%s/garbage.jpg", train, adjectives[0], nouns[0]);
		const char *text = "this is not a JPEG file\n";
		write_bytes(p, text, strlen(text));
		/* 2. a PNG cut in the middle of its pixel data */
		int w = 64, h = 64, len;
		unsigned char *px = draw(0, 1, w, h);
		unsigned char *png = stbi_write_png_to_mem(px, w * 3, w, h, 3, &len);
		free(px);
		if (!png) {
			fprintf(stderr, "anpgen: cannot encode a PNG\n");
			return 1;
		}
		snprintf(p, sizeof(p), "%s/%s_%s/truncated.png", train, adjectives[0], nouns[1]);
		write_bytes(p, png, (size_t)len / 2);
		/* 3. an empty file */
		snprintf(p, sizeof(p), "%s/%s_%s/empty.png", train, adjectives[1 % nadj], nouns[2]);
		write_bytes(p, "", 0);
		/* 4. a valid PNG header claiming 1,000,000 x 1,000,000 pixels */
		unsigned char big[64];
		memcpy(big, png, 33 < len ? 33 : (size_t)len);
		for (int i = 0; i < 4; i++)
			big[16 + i] = (unsigned char)(1000000u >> (24 - 8 * i)), big[20 + i] = big[16 + i];
		snprintf(p, sizeof(p), "%s/%s_%s/huge.png", train, adjectives[2 % nadj], nouns[0]);
		write_bytes(p, big, 33);
		free(png);
		printf("corrupt=4\n");
	}
	return 0;
}
