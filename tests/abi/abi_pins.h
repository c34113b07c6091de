/*
 * abi_pins.h - tables of everything a provider of a frozen minor depends
 * on, as one header saw it.
 *
 * frozen_pins.c is compiled four times, each time under another function
 * name (ABI_PINS_FN): the 1.0 table (ABI_PINS_MINOR=0) against the frozen
 * tests/abi/frozen/1.0 copy and against the live abi/sbx/provider.h, and the
 * 1.1 table (ABI_PINS_MINOR=1: the 1.0 entries, then what 1.1 appended)
 * against the frozen tests/abi/frozen/1.1 copy and against the live header.
 * test_frozen_pins.c compares each pair. This header includes no sbx header,
 * so the comparing unit sees none of the copies.
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

/* The tables; each stores its length in *n. */
const struct abi_pin *abi_pins_live_1_0(size_t *n);
const struct abi_pin *abi_pins_frozen_1_0(size_t *n);
const struct abi_pin *abi_pins_live_1_1(size_t *n);
const struct abi_pin *abi_pins_frozen_1_1(size_t *n);

#endif
