/* src/daemon/serve-stub.c — `ward serve` in a build without libmicrohttpd
 * (the static release binary): says so instead of serving. */
#include <stdio.h>

#include "serve.h"

int ward_cli_serve(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs("ward: error: serve: this ward was built without libmicrohttpd "
	      "(static build); use a dynamically linked ward for 'ward serve'\n", stderr);
	return 1;
}
