/* tests/unit/t-languages.c — the C side of the one language registry agrees
 * with runners/languages.json (the session agent's side is checked by
 * runners/session/test_agent.py against the same file).
 *
 * Usage: t-languages PATH/TO/runners/languages.json
 */
#include <jansson.h>
#include <string.h>

#include "tap.h" /* stdio before base/banned.h */
#include "kernel-internal.h"

#define RUNNERS_INSIDE "/opt/ward/runners"

static void check_argv(json_t *want, char *const *got, const char *name)
{
	size_t i, n = json_array_size(want);
	bool same = got != NULL;
	for (i = 0; same && i < n; i++) {
		const char *w = json_string_value(json_array_get(want, i));
		char buf[512];
		if (w && strncmp(w, "{runners}/", 10) == 0) {
			snprintf(buf, sizeof(buf), "%s%s", RUNNERS_INSIDE, w + 9);
			w = buf;
		}
		same = got[i] && w && strcmp(got[i], w) == 0;
	}
	ok(same && got[n] == NULL, "%s: the kernel's command line is the registry's", name);
}

int main(int argc, char **argv)
{
	json_error_t je;
	const char *file = argc > 1 ? argv[1] : WARD_LANGUAGES_JSON;
	json_t *root = json_load_file(file, 0, &je);
	if (!ok(root != NULL, "the registry parses")) {
		diag("%s: %s", file, je.text);
		return tap_done();
	}
	json_t *langs = json_object_get(root, "languages");
	is_int(json_array_size(langs), WARD_LANG_COUNT, "as many languages as enum ward_lang");
	size_t i;
	json_t *l;
	json_array_foreach(langs, i, l) {
		const char *name = json_string_value(json_object_get(l, "name"));
		is_str(ward_lang_name((enum ward_lang)i), name, "language %zu is %s", i, name);
		is_int(ward_lang_from_name(name), i, "%s: found by its name", name);
		is_str(ward_lang_extension((enum ward_lang)i),
		       json_string_value(json_object_get(l, "extension")), "%s: extension", name);
		size_t j;
		json_t *a;
		json_array_foreach(json_object_get(l, "aliases"), j, a)
			is_int(ward_lang_from_name(json_string_value(a)), i, "%s: alias %s",
			       name, json_string_value(a));
		check_argv(json_object_get(l, "argv"), ward_lang_kernel_argv((enum ward_lang)i), name);
	}
	is_int(ward_lang_from_name("cobol"), -1, "an unknown name is -1");
	is_int(ward_lang_from_name(NULL), -1, "NULL is -1");
	ok(ward_lang_name(WARD_LANG_COUNT) == NULL, "out of range is NULL");
	json_decref(root);
	return tap_done();
}
