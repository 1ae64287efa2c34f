/* tests/fuzz/replay.c — runs a fuzz target over corpus files (TAP).
 * Used in normal builds so every corpus entry is a regression test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, int n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("not ok %d - %s: cannot open\n", n, path);
		return 1;
	}
	static uint8_t buf[1 << 20];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	printf("ok %d - %s\n", n, path);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0, failed = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			struct dirent **list;
			int k = scandir(argv[i], &list, NULL, alphasort);
			for (int j = 0; j < k; j++) {
				if (list[j]->d_name[0] != '.') {
					char p[4096];
					snprintf(p, sizeof(p), "%s/%s", argv[i], list[j]->d_name);
					failed += replay_file(p, ++n);
				}
				free(list[j]);
			}
			free(list);
		} else {
			failed += replay_file(argv[i], ++n);
		}
	}
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
