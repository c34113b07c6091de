/*
 * metrics.h - the Prometheus metrics of `sbx reconcile --watch --metrics
 * ADDR` (docs/OPERATIONS.md): what the reconciler's passes and the store
 * say (cli_metrics.c), the op latency samples other processes leave in the
 * spool (cli_metrics_spool.c, shared/op_samples.h), served over HTTP on a
 * loopback address with libmicrohttpd (cli_metrics_http.c).
 */
#ifndef SBX_CLI_METRICS_H
#define SBX_CLI_METRICS_H

#include <sbx/session.h>

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

struct cli_metrics;

/* ---- values and their rendering (cli_metrics.c) ---- */

struct cli_metrics *cli_metrics_new(void);
void cli_metrics_free(struct cli_metrics *mx);

/* After a reconcile pass: its reports (pools may be NULL when the pools'
 * pass did not run), whether the whole pass succeeded, how long it took. */
void cli_metrics_pass(struct cli_metrics *mx, const struct sbx_reconcile_report *rep,
                      const struct sbx_pool_report *pools,
                      const struct sbx_evict_report *evict, bool ok, uint64_t duration_ns);

/* Read the sessions, intents and pools from the store (after each pass). */
void cli_metrics_collect(struct cli_metrics *mx, sbx_sessions *m);

/* Fold one valid op sample (the spool reader calls this, holding no lock). */
void cli_metrics_sample(struct cli_metrics *mx, const char *provider, const char *op,
                        int status, uint64_t duration_ns);
/* Count samples that were not folded: invalid records, over the series cap. */
void cli_metrics_samples_invalid(struct cli_metrics *mx, uint64_t n);

struct cli_spool;

/* The spool render folds first (may be NULL). */
void cli_metrics_set_spool(struct cli_metrics *mx, struct cli_spool *spool);

/* Fold the spool, then write the exposition (text format 0.0.4) into a
 * malloc'd buffer: *len bytes, NUL-terminated. NULL when out of memory.
 * Thread-safe (the HTTP server's thread calls it). */
char *cli_metrics_render(struct cli_metrics *mx, size_t *len);

/* ---- the spool (cli_metrics_spool.c) ---- */

/* Create (0700) and open the spool directory (sbxs_op_spool_dir) and take
 * its server lock. Prints the error and returns NULL when that fails
 * (another server holds the lock, others may write the directory, ...). */
struct cli_spool *cli_spool_open(void);
/* Fold into mx every record written since the last call; remove the files
 * whose writers are done. Called with mx's lock held. */
void cli_spool_fold(struct cli_spool *sp, struct cli_metrics *mx);
void cli_spool_close(struct cli_spool *sp);

/* ---- the HTTP server (cli_metrics_http.c) ---- */

/* Parse "HOST:PORT" ("127.0.0.1:9464", "[::1]:9464", "localhost:9464")
 * into a loopback socket address. Returns false with a message in msg
 * (a non-loopback or malformed address). */
bool cli_metrics_parse_addr(const char *addr, struct sockaddr_storage *sa,
                            socklen_t *salen, char *msg, size_t msglen);

struct cli_http;

/* Listen on addr and serve GET /metrics from mx. Prints the error
 * (address in use, ...) and returns NULL on failure; prints
 * "metrics: http://HOST:PORT/metrics" on stdout on success. */
struct cli_http *cli_http_start(struct cli_metrics *mx, const char *addr);
void cli_http_stop(struct cli_http *h);

#endif
