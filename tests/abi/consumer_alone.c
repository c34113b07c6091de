/*
 * consumer_alone.c - the consumer headers compile with only themselves and
 * sbx/types.h on the include path (consumer_headers.sh leaves
 * sbx/provider.h out): a consumer never needs the provider ABI's
 * descriptor, ops or host table. Compiled as strict C99 and as C++11.
 */
#include <sbx/sbx.h>
#include <sbx/session.h>
#include <sbx/memory.h>
#include <sbx/manifest.h>

#ifdef SBX_PROVIDER_H
#error "a consumer header included sbx/provider.h"
#endif

int consumer_demo(const sbx_provider *p);
int consumer_demo(const sbx_provider *p)
{
    const sbx_provider_info *info = sbx_provider_get_info(p);
    struct sbx_exec_args args = {sizeof args, NULL, NULL, NULL, NULL, 0, NULL, NULL};
    (void)args;
    return (sbx_provider_info_caps(info) & SBX_CAP_USERS) ? SBX_OK
                                                         : (int)SBX_E_UNSUPPORTED;
}
