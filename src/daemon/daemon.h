/* src/daemon/daemon.h — what the parts of `ward serve`, the HTTP front end
 * of the service core, share.
 *
 * One process, one epoll loop (serve.c): libmicrohttpd runs in
 * external-epoll mode inside it, the service core's one epoll fd
 * (include/ward/service.h: executions, sessions, workers) sits in the same
 * loop, and signals arrive through a self-pipe. This front end only
 * translates: it authenticates, routes (routes.c), reads bodies within
 * their limits, calls the core, and turns the core's replies and events
 * into responses and connection resumes. It decides nothing the core
 * decides (quotas, paths, verdicts) and must never block on a client.
 */
#ifndef WARD_DAEMON_H
#define WARD_DAEMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/audit.h"
#include "server/keys.h"
#include "ward/service.h"

struct MHD_Daemon;
struct MHD_Connection;

/* Settings: the config file's keys, and flags of the same names. */
struct srv_config {
	struct ward_service_config core; /* the service core's */
	char *socket;            /* unix socket path; "" or "none": no unix socket */
	char *listen;            /* "127.0.0.1:PORT" or NULL */
	uint64_t max_body;       /* bytes of a request body */
	uint64_t max_header;     /* bytes of a request's headers (MHD memory limit) */
	/* connections */
	uint64_t max_connections;     /* per listener (MHD's connection limit) */
	uint64_t max_per_address;     /* TCP: per client address */
	uint64_t max_unauthenticated; /* without a valid key yet; the oldest goes */
	uint64_t header_timeout_ms;   /* to authenticate, from the accept */
	uint64_t idle_timeout_ms;     /* an idle connection (MHD's timeout) */
	/* speed: who starts sandboxes */
	bool launcher;                /* a launcher clones them (default true) */
	char *zygote;                 /* "python" (default) or "none" */
	char *zygote_modules;         /* preloaded, comma-separated */
	/* /mcp (mcp-http.c) */
	uint64_t mcp_max_sessions;    /* MCP sessions open, all tenants */
	uint64_t mcp_max_sessions_per_tenant;
	uint64_t mcp_session_idle_ms; /* an MCP session unused this long ends */
	char *mcp_allowed_origins;    /* comma-separated; NULL: no browser origin */
};

struct srv {
	struct srv_config cfg;
	struct ward_service *svc;         /* the core */
	int epfd;                         /* the loop: MHD, the core, signals, clients */
	struct MHD_Daemon *mhd[2];
	int mhd_fd[2];                    /* their epoll fds */
	int n_mhd;
	bool unix_bound;
	bool stopping;
	struct ward_launcher *launcher;   /* cfg.launcher: started before the core */
	struct ward_zygote *zygote;
	const char *openapi;              /* the OpenAPI document */
	size_t openapi_len;
};

/* config.c */
void srv_config_defaults(struct srv_config *c);
void srv_config_release(struct srv_config *c);
/* Parses flags (and the file --config names) into c. Returns 0, 1 for
 * --help (printed), or -1 after printing the error. */
int srv_config_parse(struct srv_config *c, int argc, char **argv);

/* http.c */
/* Starts the HTTP daemons: on unix_fd (a listening socket, or -1) and on
 * cfg.listen. 0 or -1 (printed). */
int srv_http_start(struct srv *s, int unix_fd);
void srv_http_stop(struct srv *s);
void srv_http_run(struct srv *s);
int srv_http_timeout(struct srv *s);
/* Stops accepting: the listening sockets close, open connections stay. */
void srv_http_quiesce(struct srv *s);
unsigned srv_http_connections(struct srv *s);
/* A client waiting for an execution hung up (its watch fired). */
void srv_http_client_gone(struct srv *s, void *waiter);
/* GET /v1/events: its client hung up (WATCH_EVENTS) */
void srv_events_client_gone(void *ptr);

/* mcp-http.c: a client waiting on /mcp hung up (its watch fired); the
 * loop's idle expiry and its deadline (ms, -1: none); every MCP session
 * ended (before the core is freed). */
void srv_mcp_client_gone(struct srv *s, void *call);
void srv_mcp_tick(struct srv *s);
int srv_mcp_timeout(struct srv *s);
void srv_mcp_close_all(void);

/* The loop's watches: data.ptr of each epoll event points at one. */
enum watch_kind { WATCH_MHD, WATCH_SIGNAL, WATCH_SERVICE, WATCH_CLIENT, WATCH_MCP, WATCH_EVENTS };
struct watch {
	enum watch_kind kind;
	void *ptr;
	int idx;
};
int srv_loop(struct srv *s);

#endif
