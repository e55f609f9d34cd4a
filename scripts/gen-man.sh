#!/bin/sh
# SPDX-License-Identifier: MIT
# gen-man.sh - the API reference as man pages (section 3), generated from
# the public headers, whose comments are the documentation:
#   - a page per function or function-like macro (ex_*), its text the
#     comment just above its declaration (a comment followed by several
#     declarations documents them all);
#   - a page per header, cexec_<header>(3): the header's opening comment
#     and the list of what it declares;
#   - cexec(3): the index of the headers.
# A public function without a comment fails the generation: the header is
# the documentation, so an undocumented function is a bug.
#
#   scripts/gen-man.sh OUT_DIR VERSION     writes OUT_DIR/man3/*.3
#   scripts/gen-man.sh --self-test
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

# Reads one header; prints records "FUNC<US>name<US>declaration<US>comment"
# and one "HEADER<US><US><US>opening comment" (US: the unit separator, which
# read does not merge as it does tabs), with "\n" for line breaks inside
# fields.  Prints "UNDOC<US>name" for a declaration without a comment.
extract() {
    awk -v US="$(printf '\037')" '
        function flush_decl(   name, t) {
            t = decl; gsub(/[ \t]+/, " ", t)
            name = t
            if (t ~ /^#define/) { sub(/^#define /, "", name); sub(/\(.*/, "", name) }
            else { sub(/\(.*/, "", name); sub(/.*[ *]/, "", name) }
            if (name !~ /^ex_/) return
            sub(/ *\{.*$/, ";", t); if (t !~ /;$/ && t !~ /^#define/) t = t ";"
            if (t ~ /^#define/) { sub(/\).*$/, ")", t) }
            if (group == "") print "UNDOC" US name
            else print "FUNC" US name US t US group
        }
        BEGIN { incomment = 0; text = ""; group = ""; header_done = 0; indecl = 0 }
        indecl {
            decl = decl " " $0
            if ($0 ~ /[;{]/ || $0 !~ /\\$/ && decl ~ /^#define/) { indecl = 0; flush_decl() }
            next
        }
        incomment {
            line = $0
            if (line ~ /\*\//) { sub(/[ \t]*\*\/.*$/, "", line); incomment = 0 }
            sub(/^ \* ?/, "", line); sub(/^ \*$/, "", line)
            text = text (text == "" ? "" : "\\n") line
            if (!incomment) {
                if (!header_done) { print "HEADER" US US US text; header_done = 1; group = "" }
                else group = text
            }
            next
        }
        /^\/\*/ {
            line = $0; sub(/^\/\* ?/, "", line)
            if (line ~ /SPDX-License-Identifier/) next
            if (line ~ /\*\//) { sub(/[ \t]*\*\/.*$/, "", line); text = line
                if (!header_done) { print "HEADER" US US US text; header_done = 1 } else group = text
                next }
            incomment = 1; text = line; next
        }
        /^[ \t]*$/ { group = ""; next }
        /^typedef|^#(if|endif|else|include|ifndef|ifdef|undef)|^extern "C"|^}|^template|^constexpr/ { next }
        /^#define ex_[a-z0-9_]*\(|^#define EX_SIG\(/ {
            decl = $0
            if ($0 ~ /\\$/) { indecl = 1; next }
            flush_decl(); next
        }
        /^[A-Za-z_][A-Za-z0-9_ *]*[ *]ex_[a-z0-9_]+\(/ {
            decl = $0
            if ($0 !~ /[;{]/) { indecl = 1; next }
            flush_decl(); next
        }
        /^[a-z]/ { group = "" }
    ' "$1"
}

# Escapes a field for troff (no-fill text): backslashes, and leading dots
# or quotes that would be read as requests.
esc() {
    printf '%s\n' "$1" | sed -e 's/\\n/\n/g' | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/—/\\(em/g' -e 's/§/\\(sc/g'
}

generate() {  # $1 out dir, $2 version; the headers in $3
    out=$1/man3
    mkdir -p "$out"
    date=$(date -u +%Y-%m-%d)
    undoc=0
    index=""
    for h in "$3"/cexec/*.h; do
        base=$(basename "$h" .h)
        page=cexec_$base
        names=""
        missing=""
        extract "$h" > "$out/.records"
        while IFS="$(printf '\037')" read -r kind name decl comment; do
            case "$kind" in
                UNDOC) missing="$missing $name" ;;
                HEADER)
                    hdesc=$comment ;;
                FUNC)
                    names="$names $name"
                    summary=$(printf '%s\n' "$comment" | sed -e 's/\\n/ /g' -e 's/\. .*/./' | cut -c1-120)
                    {
                        printf '.TH %s 3 "%s" "cexec %s" "cexec reference"\n' "$name" "$date" "$2"
                        printf '.SH NAME\n%s \\- %s\n' "$name" "$(esc "$summary")"
                        printf '.SH SYNOPSIS\n.nf\n.B #include <cexec/%s.h>\n.sp\n' "$base"
                        esc "$decl"
                        printf '.fi\n.SH DESCRIPTION\n.nf\n'
                        esc "$comment"
                        printf '.fi\n.SH SEE ALSO\n.BR %s (3),\n.BR cexec (3)\n' "$page"
                    } > "$out/$name.3.tmp"
                    # A name declared twice (a static inline and its
                    # prototype): the documented one wins, the first kept.
                    [ -e "$out/$name.3" ] && rm -f "$out/$name.3.tmp" || mv "$out/$name.3.tmp" "$out/$name.3"
                    ;;
            esac
        done < "$out/.records"
        rm -f "$out/.records"
        # Undocumented: declared, and documented at none of its declarations
        # (a static inline after its documented prototype is fine).
        for m in $missing; do
            case " $names " in
                *" $m "*) ;;
                *) echo "gen-man: $base.h: $m has no comment" >&2; undoc=1 ;;
            esac
        done
        {
            printf '.TH %s 3 "%s" "cexec %s" "cexec reference"\n' "$page" "$date" "$2"
            printf '.SH NAME\n%s \\- <cexec/%s.h>\n.SH SYNOPSIS\n.nf\n.B #include <cexec/%s.h>\n.fi\n' "$page" "$base" "$base"
            printf '.SH DESCRIPTION\n.nf\n'
            esc "${hdesc:-}"
            printf '.fi\n'
            if [ -n "$names" ]; then
                printf '.SH FUNCTIONS\n'
                for n in $(printf '%s\n' $names | sort -u); do printf '.BR %s (3)\n.br\n' "$n"; done
            fi
            printf '.SH SEE ALSO\n.BR cexec (3)\n'
        } > "$out/$page.3"
        index="$index $page"
        hdesc=""
    done
    {
        printf '.TH CEXEC 3 "%s" "cexec %s" "cexec reference"\n' "$date" "$2"
        printf '.SH NAME\ncexec \\- std::execution (senders and receivers) for C17\n'
        printf '.SH SYNOPSIS\n.nf\n.B #include <cexec/cexec.h>\n.fi\n.sp\nLink with \\fIpkg-config --cflags --libs cexec\\fP.\n'
        printf '.SH DESCRIPTION\nOne page per public header, each listing its functions; one page per function.\n'
        printf 'The guide, the design and the performance notes are in the project'"'"'s docs/ folder.\n.SH HEADERS\n'
        for p in $index; do printf '.BR %s (3)\n.br\n' "$p"; done
    } > "$out/cexec.3"
    return $undoc
}

if [ "${1:-}" = "--self-test" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/inc/cexec"
    cat > "$tmp/inc/cexec/demo.h" <<'EOF'
/* cexec/demo.h - a demo header. */
/* Does one thing.  More text. */
int ex_documented(int a,
                  int b);

int ex_undocumented(void);
EOF
    if generate "$tmp/out" 0 "$tmp/inc" 2>/dev/null; then
        echo "gen-man: self-test FAILED (an undocumented function passed)" >&2; exit 1
    fi
    grep -q 'Does one thing' "$tmp/out/man3/ex_documented.3" || { echo "gen-man: self-test FAILED (no description)" >&2; exit 1; }
    grep -q 'int ex_documented(int a, int b);' "$tmp/out/man3/ex_documented.3" || { echo "gen-man: self-test FAILED (no synopsis)" >&2; exit 1; }
    echo "gen-man: self-test passed"
    exit 0
fi

outdir=${1:?usage: scripts/gen-man.sh OUT_DIR VERSION | --self-test}
version=${2:?usage: scripts/gen-man.sh OUT_DIR VERSION | --self-test}
rm -rf "$outdir/man3"
generate "$outdir" "$version" "$root/include"
n=$(ls "$outdir/man3" | wc -l)
echo "gen-man: $n pages in $outdir/man3 (every public function documented)"
