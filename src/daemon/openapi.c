/* src/daemon/openapi.c — docs/openapi.json, embedded at build time and
 * served at GET /v1/openapi.json. The path comes from the build
 * (WARD_OPENAPI_PATH); the bytes are followed by a NUL. */
#include "daemon.h"

__asm__(".section .rodata\n"
	".global ward_openapi_json\n"
	".hidden ward_openapi_json\n"
	".type ward_openapi_json, @object\n"
	"ward_openapi_json:\n"
	".incbin \"" WARD_OPENAPI_PATH "\"\n"
	".global ward_openapi_json_end\n"
	".hidden ward_openapi_json_end\n"
	"ward_openapi_json_end:\n"
	".byte 0\n"
	".previous\n");
