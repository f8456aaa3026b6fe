#!/bin/sh
# Writes the man page zero(1) to stdout from the help texts of a built `zero` (CMake runs it at
# build time, so the page says exactly what the program's --help says and cannot drift from it).
# usage: sh scripts/gen_man.sh path/to/zero > zero.1
set -eu
zero=${1:?usage: gen_man.sh ZERO_BINARY}
ver=$("$zero" --version | sed -n 's/^zero //p')
[ -n "$ver" ] || { echo "gen_man.sh: '$zero --version' printed no version" >&2; exit 1; }

# Verbatim text for roff: backslashes, leading dots and quotes, and minus signs (so that flags
# copied from the page are ASCII hyphen-minus).
verbatim() {
    printf '.nf\n'
    awk '{ gsub(/\\/, "\\e"); gsub(/-/, "\\-"); if ($0 ~ /^[.'"'"']/) $0 = "\\&" $0; print }'
    printf '.fi\n'
}

help_of() { # the help of `zero ARGS... --help`; a command without one fails the build
    "$zero" "$@" --help 2>&1 || { echo "gen_man.sh: 'zero $* --help' failed" >&2; exit 1; }
}

commands=$("$zero" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ -n "$commands" ] || { echo "gen_man.sh: 'zero --help' lists no commands" >&2; exit 1; }

cat <<HEAD
.\\" Generated from the help texts of zero $ver by scripts/gen_man.sh: do not edit.
.TH ZERO 1 "" "zero $ver" "User Commands"
.SH NAME
zero \\- the Zero Redundancy Optimizer (ZeRO) in C: train, sample, export, inspect, plan, benchmark
.SH SYNOPSIS
.B zero
.I command
.RI [ options ]
.br
.B zero
.I command
.B \\-\\-help
.br
.B zero \\-\\-version
.SH DESCRIPTION
HEAD
"$zero" --help | verbatim
printf '.SH COMMANDS\n'
for c in $commands; do
    printf '.SS "zero %s"\n' "$c"
    help_of "$c" | verbatim
    if [ "$c" = bench ]; then
        # the benchmarks named by `zero bench --help`: "usage: zero bench adam|comm|io|step ..."
        for b in $("$zero" bench --help | sed -n 's/^usage: zero bench \([a-z|]*\).*/\1/p' | tr '|' ' '); do
            printf '.SS "zero bench %s"\n' "$b"
            help_of bench "$b" | verbatim
        done
    fi
done
cat <<'TAIL'
.SH EXIT STATUS
0 on success; 2 for a usage error (a bad flag or value, a missing argument, a file named on the
command line that does not exist); 1 for a failure at run time. Errors are one line on standard
error: \fBzero: error: ...\fR.
.SH SEE ALSO
.BR mpiexec (1);
the project's docs/CLI.md (every flag, with defaults and examples) and docs/INSTALL.md.
TAIL
