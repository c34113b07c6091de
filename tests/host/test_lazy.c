/* Lazily resolved libraries: failures name the library, the package and
 * what needed it. */
#include <criterion/criterion.h>

#include "base/lazy_lib.h"

#include <string.h>

static void (*some_fn)(void);

Test(lazy, missing_library_is_named_with_package_and_purpose)
{
    char failure[512] = "";
    struct sbx_lazy_symbol syms[] = {{"nothing", &some_fn, sizeof some_fn}};
    cr_assert_eq(sbxh_lazy_resolve("libsbx-no-such-lib.so.9", "libnosuch9",
                                   "the test store", syms, 1, failure,
                                   sizeof failure), -1);
    cr_assert(strstr(failure, "the test store needs libsbx-no-such-lib.so.9"),
              "%s", failure);
    cr_assert(strstr(failure, "Debian package libnosuch9"), "%s", failure);
}

Test(lazy, missing_symbol_is_named)
{
    char failure[512] = "";
    struct sbx_lazy_symbol syms[] = {
        {"getpid", &some_fn, sizeof some_fn},
        {"sbx_no_such_function", &some_fn, sizeof some_fn}};
    cr_assert_eq(sbxh_lazy_resolve("libc.so.6", "libc6", "a test", syms, 2,
                                   failure, sizeof failure), -1);
    cr_assert(strstr(failure, "sbx_no_such_function"), "%s", failure);
}

Test(lazy, resolves_real_functions)
{
    char failure[512] = "";
    struct sbx_lazy_symbol syms[] = {{"getpid", &some_fn, sizeof some_fn}};
    cr_assert_eq(sbxh_lazy_resolve("libc.so.6", "libc6", "a test", syms, 1,
                                   failure, sizeof failure), 0, "%s", failure);
    cr_assert_not_null(some_fn);
    cr_assert_str_empty(failure);
}
