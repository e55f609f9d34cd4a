/* SPDX-License-Identifier: MIT */
/* error_text.c - the texts of stage messages (core/exi_error_text.h, white
 * box): labels, cut names, signature lists. */
#include <stdio.h>
#include <string.h>

#include "common/helpers.h"
#include "core/exi_error_text.h"

TEST_SUITE(error_text, 10);

Test(error_text, a_label_names_the_stage_and_its_name) {
    char buf[128];
    exi_stage_label(buf, sizeof buf, "ex_then", "parse_request");
    cr_assert_str_eq(buf, "ex_then(parse_request)");
    exi_stage_label(buf, sizeof buf, "ex_then", NULL);
    cr_assert_str_eq(buf, "ex_then");
    exi_stage_label(buf, sizeof buf, "ex_then", "");
    cr_assert_str_eq(buf, "ex_then()");
}

Test(error_text, a_long_name_is_cut_with_an_ellipsis) {
    char name[EXI_STAGE_NAME_MAX + 10], want[128], buf[128];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    exi_stage_label(buf, sizeof buf, "ex_bulk", name);
    snprintf(want, sizeof want, "ex_bulk(%.*s...)", EXI_STAGE_NAME_MAX, name);
    cr_assert_str_eq(buf, want);
    /* Exactly the limit: shown whole. */
    name[EXI_STAGE_NAME_MAX] = '\0';
    exi_stage_label(buf, sizeof buf, "ex_bulk", name);
    snprintf(want, sizeof want, "ex_bulk(%s)", name);
    cr_assert_str_eq(buf, want);
}

/* A cut never splits a UTF-8 sequence: the message stays valid text. */
Test(error_text, a_cut_keeps_utf8_sequences_whole) {
    char name[EXI_STAGE_NAME_MAX + 8], buf[128];
    memset(name, 'a', EXI_STAGE_NAME_MAX - 1);
    memcpy(name + EXI_STAGE_NAME_MAX - 1, "\xc3\xa9tape", 7);  /* é straddles the limit */
    name[EXI_STAGE_NAME_MAX + 6] = '\0';
    exi_stage_label(buf, sizeof buf, "ex_then", name);
    char want[128];
    snprintf(want, sizeof want, "ex_then(%.*s...)", EXI_STAGE_NAME_MAX - 1, name);
    cr_assert_str_eq(buf, want);
}

Test(error_text, a_fixed_message_takes_the_name_after_the_stage) {
    const char *fixed = "ex_let_value: the function returned NULL";
    cr_assert_eq(exi_stage_fixed(fixed, NULL), fixed, "no name: the static text itself, nothing kept");
    cr_assert_str_eq(exi_stage_fixed(fixed, "make_reply"), "ex_let_value(make_reply): the function returned NULL");
    /* Kept once: the same text is the same pointer. */
    cr_assert_eq(exi_stage_fixed(fixed, "make_reply"), exi_stage_fixed(fixed, "make_reply"));
}

Test(error_text, a_name_with_percent_signs_is_text_not_a_format) {
    cr_assert_str_eq(exi_stage_text("ex_then", "fns[i % 2]", "fixed", "%s", "x"), "ex_then(fns[i % 2]): x");
}

Test(error_text, mismatches_name_both_sides) {
    ex_sig sends = EX_SIG(EX_T_INT, EX_T_STR), takes = EX_SIG(EX_T_INT, EX_T_INT);
    cr_assert_str_eq(exi_stage_sig_mismatch("ex_then", "f", "fixed", &sends, &takes),
                     "ex_then(f): the input sender sends (int, str); the function takes (int, int)");
    ex_value v[1] = { ex_double(1.5) };
    cr_assert_str_eq(exi_stage_values_mismatch("ex_let_value", NULL, "fixed", v, 1, &takes),
                     "ex_let_value: the child sent (double); the function takes (int, int)");
}

Test(error_text, a_signature_list_reads_as_a_sentence) {
    char buf[256];
    ex_sigs sg = ex_sigs_none();
    exi_sigs_text(&sg, buf, sizeof buf);
    cr_assert_str_eq(buf, "no values");
    ex_sigs_add_value(&sg, EX_SIG(EX_T_INT, EX_T_INT));
    exi_sigs_text(&sg, buf, sizeof buf);
    cr_assert_str_eq(buf, "(int, int)");
    ex_sigs_add_value(&sg, EX_SIG(EX_T_DOUBLE));
    exi_sigs_text(&sg, buf, sizeof buf);
    cr_assert_str_eq(buf, "(int, int) and (double)");
    ex_sigs_add_value(&sg, EX_SIG0);
    sg.flags |= EX_SIGS_DYNAMIC;
    exi_sigs_text(&sg, buf, sizeof buf);
    cr_assert_str_eq(buf, "(int, int), (double), () and (any values)");
    /* A small buffer: cut, terminated. */
    exi_sigs_text(&sg, buf, 8);
    cr_assert_eq(strlen(buf), 7);
}

/* The longest texts fit: a cut name and two signatures of EX_MAX_ARITY
 * of the longest type name. */
Test(error_text, the_longest_message_is_not_cut) {
    ex_sig big = { EX_MAX_ARITY, { 0 } };
    for (int i = 0; i < EX_MAX_ARITY; i++) big.types[i] = EX_T_TOKEN;
    char name[EXI_STAGE_NAME_MAX + 20];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    const char *t = exi_stage_sig_mismatch("ex_let_value_borrowed", name, "fixed", &big, &big);
    cr_assert_str_neq(t, "fixed");
    size_t len = strlen(t);
    cr_assert(len > 2 && t[len - 1] == ')', "%s", t);
}
