/*
 * abi_pins.h - a table of everything a 1.0 provider depends on, as one
 * header saw it.
 *
 * frozen_pins.c is compiled twice, once against the live abi/sbx/provider.h
 * and once against the frozen tests/abi/frozen/1.0 copy, each time under
 * another function name (ABI_PINS_FN). test_frozen_pins.c compares the two
 * tables. This header includes no sbx header, so the comparing unit sees
 * neither copy.
 */
#ifndef SBX_TEST_ABI_PINS_H
#define SBX_TEST_ABI_PINS_H

#include <stddef.h>
#include <stdint.h>

/* How the live value must relate to the frozen one. */
enum abi_pin_rel {
    ABI_PIN_EQ = 0, /* equal: offsets, member sizes, numbers */
    ABI_PIN_GE = 1, /* may grow in later minors: struct sizes, the minor */
    ABI_PIN_ONE = 2 /* a type check that must hold (value 1) in both */
};

struct abi_pin {
    const char *what; /* e.g. "offsetof(sbx_exec_args, env)" */
    int rel;          /* enum abi_pin_rel */
    uint64_t value;
    const char *text; /* for string constants, else NULL */
};

/* Both tables; each stores its length in *n. */
const struct abi_pin *abi_pins_live(size_t *n);
const struct abi_pin *abi_pins_frozen(size_t *n);

#endif
