/* SPDX-License-Identifier: MIT */
/* regs_probe.h - exact checks of the callee-saved registers across
 * exi_context_switch, for tests/context/qemu_context.c and
 * tests/exec_context.c.  Include in one file per program.
 *
 *   probe_switch(from, to, arg, out): loads a known pattern (probe_value)
 *     into every callee-saved integer register (and d8-d15 on aarch64),
 *     switches, and on return stores those registers into out[] before
 *     restoring its caller's.  Returns what the switch returned.
 *   clobber_switch(from, to, arg): the other side: puts garbage in the
 *     same registers and switches.
 *   fp_get/fp_set/fp_variant/fp_eq: the floating-point control state a
 *     context keeps (MXCSR and x87 CW, or FPCR).
 * Plain C cannot do this: the compiler chooses which registers hold what. */
#ifndef CEXEC_REGS_PROBE_H
#define CEXEC_REGS_PROBE_H

#include <stdint.h>

#include "task/exi_context.h"

#if defined(__x86_64__)
/* rbx, rbp, r12, r13, r14, r15 */
enum { PROBE_REGS = 6 };
#define PROBE_NAMES { "rbx", "rbp", "r12", "r13", "r14", "r15" }
#elif defined(__aarch64__)
/* x19-x28, x29, d8-d15 */
enum { PROBE_REGS = 19 };
#define PROBE_NAMES { "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", \
                      "d8", "d9", "d10", "d11", "d12", "d13", "d14", "d15" }
#endif

__attribute__((visibility("hidden"))) void *probe_switch(exi_context *from, exi_context *to, void *arg, uint64_t *out);
__attribute__((visibility("hidden"))) void *clobber_switch(exi_context *from, exi_context *to, void *arg);

/* The value probe_switch loads into register i. */
static inline uint64_t probe_value(int i) {
    uint64_t k = (uint64_t)i + 1;
    return 0x5a00000000000000ull | k * 0x0101010101ull;
}

#if defined(__x86_64__)
/* Saves and restores the callee-saved registers around a probe. */
#define X86_PUSH_CALLEE \
    "    pushq %rbp\n" \
    "    pushq %rbx\n" \
    "    pushq %r12\n" \
    "    pushq %r13\n" \
    "    pushq %r14\n" \
    "    pushq %r15\n"
#define X86_POP_CALLEE \
    "    popq %r15\n" \
    "    popq %r14\n" \
    "    popq %r13\n" \
    "    popq %r12\n" \
    "    popq %rbx\n" \
    "    popq %rbp\n"
__asm__(
    ".pushsection .text\n"
    ".globl probe_switch\n"
    ".hidden probe_switch\n"
    ".type probe_switch, @function\n"
    "probe_switch:\n"
    X86_PUSH_CALLEE
    "    pushq %rcx\n"                 /* out; rsp is now 16-byte aligned */
    "    movabsq $0x5a00000101010101, %rbx\n"
    "    movabsq $0x5a00000202020202, %rbp\n"
    "    movabsq $0x5a00000303030303, %r12\n"
    "    movabsq $0x5a00000404040404, %r13\n"
    "    movabsq $0x5a00000505050505, %r14\n"
    "    movabsq $0x5a00000606060606, %r15\n"
    "    call exi_context_switch\n"
    "    movq (%rsp), %rcx\n"
    "    movq %rbx, 0(%rcx)\n"
    "    movq %rbp, 8(%rcx)\n"
    "    movq %r12, 16(%rcx)\n"
    "    movq %r13, 24(%rcx)\n"
    "    movq %r14, 32(%rcx)\n"
    "    movq %r15, 40(%rcx)\n"
    "    popq %rcx\n"
    X86_POP_CALLEE
    "    ret\n"
    ".size probe_switch, .-probe_switch\n"
    ".globl clobber_switch\n"
    ".hidden clobber_switch\n"
    ".type clobber_switch, @function\n"
    "clobber_switch:\n"
    X86_PUSH_CALLEE
    "    subq $8, %rsp\n"
    "    movq $-1, %rbx\n"
    "    movq $-2, %rbp\n"
    "    movq $-3, %r12\n"
    "    movq $-4, %r13\n"
    "    movq $-5, %r14\n"
    "    movq $-6, %r15\n"
    "    call exi_context_switch\n"
    "    addq $8, %rsp\n"
    X86_POP_CALLEE
    "    ret\n"
    ".size clobber_switch, .-clobber_switch\n"
    ".popsection\n");
#undef X86_PUSH_CALLEE
#undef X86_POP_CALLEE
#elif defined(__aarch64__)
/* Saves and restores x19-x28 and d8-d15 at [sp, #16] .. [sp, #144]. */
#define A64_SAVE_CALLEE \
    "    stp x19, x20, [sp, #16]\n" \
    "    stp x21, x22, [sp, #32]\n" \
    "    stp x23, x24, [sp, #48]\n" \
    "    stp x25, x26, [sp, #64]\n" \
    "    stp x27, x28, [sp, #80]\n" \
    "    stp d8, d9, [sp, #96]\n" \
    "    stp d10, d11, [sp, #112]\n" \
    "    stp d12, d13, [sp, #128]\n" \
    "    stp d14, d15, [sp, #144]\n"
#define A64_RESTORE_CALLEE \
    "    ldp x19, x20, [sp, #16]\n" \
    "    ldp x21, x22, [sp, #32]\n" \
    "    ldp x23, x24, [sp, #48]\n" \
    "    ldp x25, x26, [sp, #64]\n" \
    "    ldp x27, x28, [sp, #80]\n" \
    "    ldp d8, d9, [sp, #96]\n" \
    "    ldp d10, d11, [sp, #112]\n" \
    "    ldp d12, d13, [sp, #128]\n" \
    "    ldp d14, d15, [sp, #144]\n"
/* Pattern i+1 is built as 0x5a00_00ii_iiii_iiii with movz/movk. */
#define PROBE_LOAD(reg, b) \
    "    movz " reg ", #0x" b b ", lsl #0\n" \
    "    movk " reg ", #0x" b b ", lsl #16\n" \
    "    movk " reg ", #0x00" b ", lsl #32\n" \
    "    movk " reg ", #0x5a00, lsl #48\n"
__asm__(
    ".pushsection .text\n"
    ".globl probe_switch\n"
    ".hidden probe_switch\n"
    ".type probe_switch, %function\n"
    "probe_switch:\n"
    "    stp x29, x30, [sp, #-176]!\n"
    A64_SAVE_CALLEE
    "    str x3, [sp, #160]\n"
    PROBE_LOAD("x19", "01") PROBE_LOAD("x20", "02") PROBE_LOAD("x21", "03") PROBE_LOAD("x22", "04")
    PROBE_LOAD("x23", "05") PROBE_LOAD("x24", "06") PROBE_LOAD("x25", "07") PROBE_LOAD("x26", "08")
    PROBE_LOAD("x27", "09") PROBE_LOAD("x28", "0a") PROBE_LOAD("x29", "0b")
    PROBE_LOAD("x9", "0c") "    fmov d8, x9\n"
    PROBE_LOAD("x9", "0d") "    fmov d9, x9\n"
    PROBE_LOAD("x9", "0e") "    fmov d10, x9\n"
    PROBE_LOAD("x9", "0f") "    fmov d11, x9\n"
    PROBE_LOAD("x9", "10") "    fmov d12, x9\n"
    PROBE_LOAD("x9", "11") "    fmov d13, x9\n"
    PROBE_LOAD("x9", "12") "    fmov d14, x9\n"
    PROBE_LOAD("x9", "13") "    fmov d15, x9\n"
    "    bl exi_context_switch\n"
    "    ldr x9, [sp, #160]\n"
    "    stp x19, x20, [x9, #0]\n"
    "    stp x21, x22, [x9, #16]\n"
    "    stp x23, x24, [x9, #32]\n"
    "    stp x25, x26, [x9, #48]\n"
    "    stp x27, x28, [x9, #64]\n"
    "    str x29, [x9, #80]\n"
    "    str d8, [x9, #88]\n"
    "    str d9, [x9, #96]\n"
    "    str d10, [x9, #104]\n"
    "    str d11, [x9, #112]\n"
    "    str d12, [x9, #120]\n"
    "    str d13, [x9, #128]\n"
    "    str d14, [x9, #136]\n"
    "    str d15, [x9, #144]\n"
    A64_RESTORE_CALLEE
    "    ldp x29, x30, [sp], #176\n"
    "    ret\n"
    ".size probe_switch, .-probe_switch\n"
    ".globl clobber_switch\n"
    ".hidden clobber_switch\n"
    ".type clobber_switch, %function\n"
    "clobber_switch:\n"
    "    stp x29, x30, [sp, #-160]!\n"
    A64_SAVE_CALLEE
    "    mov x19, #-1\n"
    "    mov x20, #-2\n"
    "    mov x21, #-3\n"
    "    mov x22, #-4\n"
    "    mov x23, #-5\n"
    "    mov x24, #-6\n"
    "    mov x25, #-7\n"
    "    mov x26, #-8\n"
    "    mov x27, #-9\n"
    "    mov x28, #-10\n"
    "    mov x29, #-11\n"
    "    fmov d8, x19\n"
    "    fmov d9, x20\n"
    "    fmov d10, x21\n"
    "    fmov d11, x22\n"
    "    fmov d12, x23\n"
    "    fmov d13, x24\n"
    "    fmov d14, x25\n"
    "    fmov d15, x26\n"
    "    bl exi_context_switch\n"
    A64_RESTORE_CALLEE
    "    ldp x29, x30, [sp], #160\n"
    "    ret\n"
    ".size clobber_switch, .-clobber_switch\n"
    ".popsection\n");
#undef PROBE_LOAD
#undef A64_SAVE_CALLEE
#undef A64_RESTORE_CALLEE
#endif

/* ------------------------------------- floating-point control state */

#if defined(__x86_64__)
/* MXCSR rounding (bits 13-14) and the x87 CW rounding control (bits 10-11;
 * not the precision control, which valgrind does not model). */
typedef struct fpstate { uint32_t mxcsr; uint16_t cw; } fpstate;
static inline fpstate fp_get(void) {
    fpstate s;
    s.mxcsr = __builtin_ia32_stmxcsr();
    __asm__ volatile("fnstcw %0" : "=m"(s.cw));
    return s;
}
static inline void fp_set(fpstate s) {
    __builtin_ia32_ldmxcsr(s.mxcsr);
    __asm__ volatile("fldcw %0" : : "m"(s.cw));
}
static inline fpstate fp_variant(fpstate s, int k) {
    uint32_t sse_rc = (uint32_t)k & 3u, x87_rc = ((uint32_t)k + 1u) & 3u;
    s.mxcsr = (s.mxcsr & ~0x6000u) | sse_rc << 13;
    s.cw = (uint16_t)(((uint32_t)s.cw & ~0x0c00u) | x87_rc << 10);
    return s;
}
static inline int fp_eq(fpstate a, fpstate b) { return (a.mxcsr & 0xffc0u) == (b.mxcsr & 0xffc0u) && a.cw == b.cw; }
#elif defined(__aarch64__)
/* FPCR RMode (bits 22-23) and FZ (bit 24). */
typedef struct fpstate { uint64_t fpcr; } fpstate;
static inline fpstate fp_get(void) {
    fpstate s;
    __asm__ volatile("mrs %0, fpcr" : "=r"(s.fpcr));
    return s;
}
static inline void fp_set(fpstate s) { __asm__ volatile("msr fpcr, %0" : : "r"(s.fpcr)); }
static inline fpstate fp_variant(fpstate s, int k) {
    uint64_t rmode = (uint64_t)k & 3u, fz = (uint64_t)k & 1u;
    s.fpcr = (s.fpcr & ~(7ull << 22)) | rmode << 22 | fz << 24;
    return s;
}
static inline int fp_eq(fpstate a, fpstate b) { return a.fpcr == b.fpcr; }
#endif

#endif
