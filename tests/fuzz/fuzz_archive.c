/*
 * fuzz_archive.c - the archive entry checks and the checked extraction on
 * arbitrary bytes (tar, tar.gz, zip: whatever libarchive recognizes).
 * Every input must end in SBX_OK or a refusal with a message, write
 * nothing outside the scratch directory and leave it removable.
 */
#include "archive_check.h"
#include "tree_remove.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mem {
    const uint8_t *data;
    size_t len, pos;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem *m = ctx;
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

static int scratch = -1; /* a private directory for all iterations */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (scratch < 0) {
        char dir[] = "/tmp/sbx-fuzz-archive-XXXXXX";
        if (!mkdtemp(dir))
            abort();
        scratch = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (mkdirat(scratch, "x", 0755) != 0)
        abort();
    int dest = openat(scratch, "x", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct mem m = {data, size, 0};
    struct sbx_source src = SBX_SOURCE_INIT(&m, mem_read);
    /* small limits keep iterations fast and exercise the refusals */
    struct sbxs_archive_limits lim = {1 << 20, 4 << 20, 512};
    struct sbxs_error err;
    sbxs_error_clear(&err);
    int rc = sbxs_archive_extract(&src, NULL, dest, &lim, &err);
    if (rc != SBX_OK && !err.message[0])
        __builtin_trap(); /* every refusal names its reason */
    close(dest);
    /* nothing but "x" may exist in the scratch directory */
    if (faccessat(scratch, "x", F_OK, AT_SYMLINK_NOFOLLOW) != 0)
        __builtin_trap();
    if (sbxs_remove_tree(scratch, "x") != 0)
        __builtin_trap();
    return 0;
}
