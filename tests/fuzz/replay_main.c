/* replay_main — runs a fuzz harness's LLVMFuzzerTestOneInput once on each given file, or on each
 * file of each given directory, without libFuzzer. Linked with every harness by the ordinary
 * compiler (gcc or clang, with or without DNN_SANITIZE), so the regression inputs and the seed
 * corpora are replayed in every build, not only where clang's -fsanitize=fuzzer exists.
 * Exit 0 when every input ran (a harness aborts on a broken invariant). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf)
			abort();
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		cap *= 2;
		buf = realloc(buf, cap);
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv)
{
	long runs = 0;
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			bad = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]) != 0;
			runs++;
			continue;
		}
		struct dirent **ents;
		int ne = scandir(argv[i], &ents, NULL, by_name);
		if (ne < 0) {
			perror(argv[i]);
			bad = 1;
			continue;
		}
		for (int k = 0; k < ne; k++) {
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", argv[i], ents[k]->d_name);
			if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
				bad |= run_file(p) != 0;
				runs++;
			}
			free(ents[k]);
		}
		free(ents);
	}
	printf("%s: replayed %ld inputs\n", argv[0], runs);
	return bad;
}
