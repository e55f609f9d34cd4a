/* SPDX-License-Identifier: MIT */
/* context.c - the context switch (exi_context.h) as one file-scope asm
 * block per architecture, and the C that lays out a fresh context.
 *
 * The switch pushes the callee-saved state on the running stack, stores
 * the stack pointer into *from, loads *to's, pops its state and returns
 * `arg` into whatever called the switch that suspended *to.  A fresh context
 * holds a frame laid out the same way whose return address is
 * exi_context_start, with entry and user in two callee-saved slots.
 *
 * exi_context_start is the outermost frame: its CFI marks the return
 * address undefined and the frame pointer it passes on is 0, so debuggers
 * and the sanitizers' unwinders (DWARF or frame-pointer) stop there.
 * The switch itself has no CFI: it is never on a stack while something
 * unwinds, except in a signal inside its few instructions. */
#include <stdint.h>
#include <string.h>

#include "task/exi_context.h"

/* The first instruction of a fresh context; never called from C. */
__attribute__((visibility("hidden"))) void exi_context_start(void);

#if defined(__x86_64__)

/* With -fcf-protection the object is marked IBT-compatible: the switch may
 * be reached through an indirect branch, so it needs a landing pad.
 * (Shadow stacks cannot work with any stack switch that returns elsewhere;
 * they are off unless every object asks for them.) */
#if defined(__CET__) && (__CET__ & 1)
#define EXI_LANDING "endbr64\n"
#else
#define EXI_LANDING ""
#endif

/* Saved frame, from the saved sp up: MXCSR (4 bytes), x87 CW (2), pad (2),
 * r15, r14, r13, r12, rbx, rbp, return address: 64 bytes.
 * The switch leaves by ret, not by pop + indirect jmp: the jmp wins in a
 * bare ping-pong loop (no returns), but it leaves the return predictor one
 * entry off, so every return after the switch mispredicts (measured round
 * trip with three call levels on each side: 26 ns with ret, 41 ns jmp). */
enum { FRAME_WORDS = 8, SLOT_R13 = 3, SLOT_R12 = 4, SLOT_RET = 7 };

__asm__(
    ".pushsection .text\n"
    ".globl exi_context_switch\n"
    ".hidden exi_context_switch\n"
    ".type exi_context_switch, @function\n"
    ".p2align 4\n"
    "exi_context_switch:\n"
    EXI_LANDING
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movl (%rsp), %r8d\n"
    "    movzwl 4(%rsp), %r9d\n"
    "    movq %rsp, (%rdi)\n"
    "    movq (%rsi), %rsp\n"
    /* Loading the control words stalls the pipeline; they rarely differ. */
    "    cmpl (%rsp), %r8d\n"
    "    je 1f\n"
    "    ldmxcsr (%rsp)\n"
    "1:\n"
    "    cmpw 4(%rsp), %r9w\n"
    "    je 2f\n"
    "    fldcw 4(%rsp)\n"
    "2:\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    movq %rdx, %rax\n"
    /* Not ret: the return predictor expects the caller on the old stack
     * and would miss every time; an indirect jump is predicted. */
    "    popq %rcx\n"
    "    jmp *%rcx\n"
    ".size exi_context_switch, .-exi_context_switch\n"
    "\n"
    /* Reached by the switch's final jump with rsp 16-byte aligned, rax = arg,
     * r12 = entry, r13 = user, rbp = 0. */
    ".globl exi_context_start\n"
    ".hidden exi_context_start\n"
    ".type exi_context_start, @function\n"
    ".p2align 4\n"
    "exi_context_start:\n"
    "    .cfi_startproc\n"
    "    .cfi_undefined rip\n"
    "    movq %rax, %rdi\n"
    "    movq %r13, %rsi\n"
    "    callq *%r12\n"
    "    ud2\n"
    "    .cfi_endproc\n"
    ".size exi_context_start, .-exi_context_start\n"
    ".popsection\n");

static void fill_frame(uint64_t *frame, void (*entry)(void *, void *), void *user) {
    uint32_t mxcsr = __builtin_ia32_stmxcsr();
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    uint64_t fp = (uint64_t)mxcsr | (uint64_t)cw << 32;
    memcpy(&frame[0], &fp, sizeof fp);
    frame[SLOT_R13] = (uint64_t)(uintptr_t)user;
    frame[SLOT_R12] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_RET] = (uint64_t)(uintptr_t)exi_context_start;
}

#elif defined(__aarch64__)

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define EXI_LANDING "bti c\n"
#else
#define EXI_LANDING ""
#endif

/* Saved frame, from the saved sp up: x19-x28, x29, x30, d8-d15, FPCR, pad:
 * 176 bytes.  FPCR is saved because its rounding, flush-to-zero and
 * default-NaN fields are state the AAPCS64 lets a routine change only if
 * it restores it, so per-context state, like MXCSR on x86-64.  Writing it
 * can stall the pipeline, so the switch writes it only when it differs.
 * The switch leaves by ret, as on x86-64 (and with BTI enforced a br to a
 * return address, which has no landing pad, would fault). */
enum { FRAME_WORDS = 22, SLOT_X19 = 0, SLOT_X20 = 1, SLOT_X30 = 11, SLOT_FPCR = 20 };

__asm__(
    ".pushsection .text\n"
    ".globl exi_context_switch\n"
    ".hidden exi_context_switch\n"
    ".type exi_context_switch, %function\n"
    ".p2align 4\n"
    "exi_context_switch:\n"
    EXI_LANDING
    "    sub sp, sp, #176\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mrs x9, fpcr\n"
    "    str x9, [sp, #160]\n"
    "    mov x10, sp\n"
    "    str x10, [x0]\n"
    "    ldr x10, [x1]\n"
    "    mov sp, x10\n"
    "    ldr x10, [sp, #160]\n"
    "    cmp x9, x10\n"
    "    b.eq 1f\n"
    "    msr fpcr, x10\n"
    "1:\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #176\n"
    "    mov x0, x2\n"
    "    ret\n"
    ".size exi_context_switch, .-exi_context_switch\n"
    "\n"
    /* Reached by the switch's ret with sp 16-byte aligned, x0 = arg,
     * x19 = entry, x20 = user, x29 = 0. */
    ".globl exi_context_start\n"
    ".hidden exi_context_start\n"
    ".type exi_context_start, %function\n"
    ".p2align 4\n"
    "exi_context_start:\n"
    "    .cfi_startproc\n"
    "    .cfi_undefined x30\n"
    "    mov x1, x20\n"
    "    blr x19\n"
    "    brk #1\n"
    "    .cfi_endproc\n"
    ".size exi_context_start, .-exi_context_start\n"
    ".popsection\n");

static void fill_frame(uint64_t *frame, void (*entry)(void *, void *), void *user) {
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    frame[SLOT_FPCR] = fpcr;
    frame[SLOT_X19] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_X20] = (uint64_t)(uintptr_t)user;
    frame[SLOT_X30] = (uint64_t)(uintptr_t)exi_context_start;
}

#else
#error "cexec: no context switch for this architecture (x86-64 and aarch64 only)"
#endif

void exi_context_init(exi_context *ctx, void *lo, size_t size, void (*entry)(void *arg, void *user), void *user) {
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    /* 16 zero bytes above the first frame: a null frame record for
     * frame-pointer walkers that look past the outermost frame. */
    uint64_t *frame = (uint64_t *)(top - 16) - FRAME_WORDS;
    memset(frame, 0, (FRAME_WORDS + 2) * sizeof *frame);
    fill_frame(frame, entry, user);
    ctx->sp = frame;
}
