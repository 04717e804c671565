/* zt_prom: the coordinator's Prometheus endpoint. GET /metrics answers in
 * Prometheus's text exposition format (0.0.4) with the job as job.json
 * last recorded it: its state, replicas by pool and state, restarts and
 * retries, each replica's step, loss and examples/s (and its other
 * metrics), checkpoints, evaluations, dropped control-plane messages, and
 * the replicas' data-plane latency histograms.
 *
 * Served by libmicrohttpd from a thread of its own: the coordinator's loop
 * renders the text (zt_prom_update) and the thread hands out the latest,
 * so a scrape never waits on the job and never touches its state. */
#ifndef ZT_PROM_H
#define ZT_PROM_H
#include <jansson.h>
#include <stddef.h>

typedef struct zt_prom zt_prom_t;

/* Listens on addr:port (port 0: one the system picks); with a token, only
 * a request carrying "Authorization: Bearer <token>" gets the metrics
 * (others 401). NULL on failure, with the address and the reason in err. */
zt_prom_t *zt_prom_start(const char *addr, int port, const char *token, char *err, size_t errlen);

/* The port it listens on. */
int zt_prom_port(const zt_prom_t *self);

/* Renders job (a job.json document) as the next answer. */
void zt_prom_update(zt_prom_t *self, json_t *job);

/* The text for job, as served (malloc'd). */
char *zt_prom_render(json_t *job);

void zt_prom_stop(zt_prom_t **self);

#endif
