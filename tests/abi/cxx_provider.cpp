// cxx_provider.cpp - a minimal provider written in C++.
//
// Proves that sbx/provider.h serves a C++ backend: the header compiles as
// C++, SBX_PROVIDER_DEFINE gives the entry point C linkage (so it is
// exported unmangled as sbx_provider_describe) and the host loads the
// result. Built twice by tests/abi/CMakeLists.txt: as C++11, where the ops
// table is initialized by position, and as C++20, where it uses designated
// initializers. The ops keep state and report errors like a real provider's
// but make no sandboxes.
#include <sbx/provider.h>

#include <new>

namespace {

// One provider instance.
struct instance {
    explicit instance(const sbx_host *h) : host(h) {}
    const sbx_host *host;
};

const sbx_host *host_of(void *state)
{
    return static_cast<instance *>(state)->host;
}

// Every op is noexcept: an exception must never unwind into the host,
// which is C. Allocation uses the nothrow form for the same reason.
int cxx_init(const sbx_host *host, sbx_call *call, void **state) noexcept
{
    instance *inst = new (std::nothrow) instance(host);
    if (!inst)
        return host->set_error(host, call, SBX_E_NOMEM, "cxx_provider: out of memory");
    *state = inst;
    return SBX_OK;
}

void cxx_fini(void *state) noexcept
{
    delete static_cast<instance *>(state);
}

int cxx_create(void *state, sbx_call *call, const sbx_create_args *, char *,
               sbx_sandbox **) noexcept
{
    const sbx_host *host = host_of(state);
    return host->set_error(host, call, SBX_E_UNSUPPORTED,
                           "cxx_provider makes no sandboxes");
}

int cxx_attach(void *state, sbx_call *call, const sbx_attach_args *args,
               sbx_sandbox **) noexcept
{
    const sbx_host *host = host_of(state);
    return host->set_error(host, call, SBX_E_NOT_FOUND, "cxx_provider has no sandbox %s",
                           args->ref);
}

// No handle is ever produced, so the handle ops are unreachable.
int cxx_exec(sbx_sandbox *, sbx_call *, const sbx_exec_args *, sbx_exec_result *) noexcept
{
    return SBX_E_UNSUPPORTED;
}

int cxx_read_file(sbx_sandbox *, sbx_call *, const char *, const sbx_sink *) noexcept
{
    return SBX_E_UNSUPPORTED;
}

int cxx_write_file(sbx_sandbox *, sbx_call *, const char *, const sbx_source *,
                   unsigned) noexcept
{
    return SBX_E_UNSUPPORTED;
}

const char *cxx_root(sbx_sandbox *) noexcept
{
    return "/";
}

void cxx_release(sbx_sandbox *) noexcept {}

int cxx_destroy(void *, sbx_call *, const sbx_destroy_args *) noexcept
{
    return SBX_OK; // nothing was ever created
}

#if __cplusplus >= 202002L
// C++20 designated initializers must follow declaration order. g++ 12 with
// -Wextra warns about every member left out, so all of them are named.
const sbx_provider_ops cxx_ops = {
    .init = cxx_init,
    .fini = cxx_fini,
    .create = cxx_create,
    .attach = cxx_attach,
    .exec = cxx_exec,
    .read_file = cxx_read_file,
    .write_file = cxx_write_file,
    .root = cxx_root,
    .release = cxx_release,
    .destroy = cxx_destroy,
    .mount_put = nullptr,
    .mount_remove = nullptr,
    .export_outputs = nullptr,
    .skill_install = nullptr,
    .reserved = {nullptr, nullptr},
    .egress_set = nullptr,
    .egress_get = nullptr,
    .memory_load = nullptr,
    .memory_diff = nullptr,
    .memory_accept = nullptr,
    .group_add = nullptr,
    .user_add = nullptr,
    .memory_watch = nullptr,
    .proc_start = nullptr,
    .proc_write = nullptr,
    .proc_read = nullptr,
    .proc_signal = nullptr,
    .proc_list = nullptr,
    .proc_resize = nullptr,
    .file_list = nullptr,
    .file_stat = nullptr,
    .file_mkdir = nullptr,
    .file_remove = nullptr,
    .file_rename = nullptr,
    .port_resolve = nullptr,
    .pause = nullptr,
    .resume = nullptr,
    .health = nullptr,
    .fork = nullptr,
};
#else
// By position, in the order of struct sbx_provider_ops.
const sbx_provider_ops cxx_ops = {
    cxx_init,    cxx_fini,      cxx_create,     cxx_attach, cxx_exec,
    cxx_read_file, cxx_write_file, cxx_root,    cxx_release, cxx_destroy,
    nullptr,     nullptr,       nullptr,        nullptr,    {nullptr, nullptr},
    nullptr,     nullptr,       nullptr,        nullptr,    nullptr,
    nullptr,     nullptr,       nullptr,
    // ABI 1.2: proc_start, proc_write, proc_read, proc_signal, proc_list
    nullptr,     nullptr,       nullptr,        nullptr,    nullptr,
    // proc_resize, file_list, file_stat, file_mkdir, file_remove
    nullptr,     nullptr,       nullptr,        nullptr,    nullptr,
    // file_rename, port_resolve, pause, resume, health
    nullptr,     nullptr,       nullptr,        nullptr,    nullptr,
    // fork
    nullptr,
};
#endif

const sbx_config_key cxx_keys[] = {
    SBX_CONFIG_KEY("greeting", SBX_CFG_STRING, "a string the C++ provider accepts"),
    SBX_CONFIG_KEYS_END,
};

} // namespace

SBX_PROVIDER_DEFINE("cxx_provider", "0.1.0", "a provider written in C++",
                    SBX_ISOLATION_NONE, 0, &cxx_ops, cxx_keys)
