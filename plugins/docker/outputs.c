/*
 * outputs.c - export_outputs: /mnt/session/outputs as a tar stream.
 *
 * The outputs directory is a bind of the session's resources/outputs host
 * directory (resources.c), writable inside the container. Export asks the
 * daemon for GET /containers/{id}/archive?path=/mnt/session/outputs/. (the
 * trailing "/." makes the entries relative to the directory: "./a",
 * "./sub/b") and hands the bytes to the sink as they arrive, unchanged and
 * unbuffered. The daemon builds the archive without following symlinks, so
 * whatever the sandbox planted arrives as what it is (a symlink, a FIFO, a
 * hard link entry); validating and extracting it is the host's job
 * (sbx_export_to_dir in libsbx), not the provider's.
 *
 * A container created without the outputs bind (by an earlier version of
 * the provider, or by hand) fails closed: exporting from its own file
 * system instead would hand out whatever the image holds there.
 */
#include "docker.h"

#include <stdio.h>
#include <string.h>

struct relay {
    const struct sbx_sink *sink;
    int status; /* what the caller's sink returned, 0 while it accepts */
};

static int relay_write(void *ctx, const void *buf, size_t len)
{
    struct relay *r = ctx;
    int s = r->sink && r->sink->write ? r->sink->write(r->sink->ctx, buf, len) : 0;
    if (s != 0)
        r->status = s;
    return s;
}

int docker_export_outputs(sbx_sandbox *sb, sbx_call *call,
                          const struct sbx_sink *tar_sink)
{
    struct docker_state *st = sb->st;
    if (!sb->outputs_src)
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: container %.12s was created without the "
                                   "%s mount; its outputs cannot be exported "
                                   "(re-create the sandbox)",
                                   sb->id, DOCKER_OUTPUTS);
    char path[512];
    if (docker_path(st, path, sizeof path, "/containers/%s/archive?path=%s", sb->id,
                    "%2Fmnt%2Fsession%2Foutputs%2F.") != 0)
        return st->host->set_error(st->host, call, SBX_E_INTERNAL,
                                   "docker: export path too long");
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "GET";
    req.path = path;
    req.cancel = &dc.c;
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    struct relay r = {tar_sink, 0};
    struct sbx_sink sink = SBX_SINK_INIT(&r, relay_write);
    sbxp_http_error err;
    int rc = sbxp_http_request(st->http, &req, &sink, NULL, &err);
    if (rc == SBX_OK)
        return SBX_OK;
    if (r.status != 0)
        return st->host->set_error(st->host, call, r.status,
                                   "docker: exporting %s of container %.12s: the "
                                   "sink stopped the transfer (%s)",
                                   DOCKER_OUTPUTS, sb->id,
                                   sbx_strerror((sbx_status)r.status));
    if (rc == SBX_E_NOT_FOUND)
        return st->host->set_error(st->host, call, SBX_E_NOT_FOUND,
                                   "docker: exporting outputs: container %.12s or its "
                                   "%s directory no longer exists",
                                   sb->id, DOCKER_OUTPUTS);
    return docker_report(st, call, &err, "exporting %s of container %.12s",
                         DOCKER_OUTPUTS, sb->id);
}
