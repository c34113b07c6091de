/* cancel.h - the inside of a cancellation token (internal to libsbx). */
#ifndef SBX_HOST_CANCEL_H
#define SBX_HOST_CANCEL_H

#include <sbx/sbx.h>

#include <stdatomic.h>

struct sbx_cancel {
    atomic_int fired;
    int fd; /* eventfd, readable once fired */
    sbx_progress_fn progress; /* sbx_cancel_set_progress, or NULL */
    void *progress_ud;
};

/* Report progress to the token's callback, if it has one (NULL c: none).
 * unit is "bytes" or "steps". */
void sbxh_progress(sbx_cancel *c, const char *what, const char *unit, uint64_t done,
                   uint64_t total, const char *detail, bool finished);

/* Bytes of a step counted as they pass and reported every MiB once the
 * step reached `threshold` bytes (0: from the first MiB), then as finished
 * by sbxh_meter_end when anything was reported. Zero it, then set
 * cancel, what (a few words, copied), total (0: unknown) and threshold. */
struct sbxh_meter {
    sbx_cancel *cancel;
    char what[96];
    uint64_t total, threshold;
    uint64_t done, reported;
    bool shown;
};
void sbxh_meter_add(struct sbxh_meter *m, uint64_t n);
void sbxh_meter_end(struct sbxh_meter *m);

#endif
