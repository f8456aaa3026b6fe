#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then what a user of the installed tree does: build
# and run an outside program (tests/install/consumer) through pkg-config and through CMake's
# find_package, linked dynamically (libzero.so.0) and statically (libzero.a), and use the
# installed `zero`, its man page and its bash completion; and the project configures without a
# C++ compiler.
set -u
: "${ZERO_BUILD_DIR:?}" "${ZERO_SOURCE_DIR:?}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
P="$TMP/prefix"
CC=${CC:-cc}
fail=0
check() { # check NAME COMMAND...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; return 1; fi
}
cmake --install "$ZERO_BUILD_DIR" --prefix "$P" >"$TMP/install.log" 2>&1 || { echo "FAIL cmake --install"; cat "$TMP/install.log"; exit 1; }
V=$(sed -n 's/^#define ZERO_VERSION_STRING "\(.*\)"/\1/p' "$ZERO_SOURCE_DIR/include/zero/zero.h")
MAJOR=${V%%.*}
LIB=$(dirname "$(find "$P" -name "libzero.so.$V" | head -1)")
check "libzero.so.$V installed" test -f "$LIB/libzero.so.$V"
check "libzero.so.$MAJOR -> libzero.so.$V" test "$(readlink "$LIB/libzero.so.$MAJOR")" = "libzero.so.$V"
check "libzero.so -> libzero.so.$MAJOR" test "$(readlink "$LIB/libzero.so")" = "libzero.so.$MAJOR"
check "soname libzero.so.$MAJOR" bash -c "readelf -d '$LIB/libzero.so.$V' | grep -q 'SONAME.*\[libzero.so.$MAJOR\]'"
# libzero.so exports the public API only (cmake/libzero.map): every function a public header
# declares, none of the zero__ internals, nothing without the prefix
nm -D --defined-only "$LIB/libzero.so.$V" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sed 's/@.*//' | sort -u >"$TMP/exported"
check "libzero.so exports symbols" test -s "$TMP/exported"
check "libzero.so exports no zero__ internal" test -z "$(grep '^zero__' "$TMP/exported")"
check "libzero.so exports nothing outside zero_*" test -z "$(grep -v '^zero_' "$TMP/exported")"
sed -n 's/^[a-z].*[ *]\(zero_[a-z0-9_]*\)(.*/\1/p' "$ZERO_SOURCE_DIR"/include/zero/*.h | sort -u >"$TMP/declared"
check "every function of the public headers is exported" test -z "$(comm -23 "$TMP/declared" "$TMP/exported")"
check "every exported function is declared in a public header" test -z "$(comm -13 "$TMP/declared" "$TMP/exported")"
check "libzero.a installed" test -f "$LIB/libzero.a"
check "every public header under include/zero/" \
    test "$(cd "$ZERO_SOURCE_DIR/include/zero" && ls ./*.h | wc -l)" -eq "$(ls "$P/include/zero/"*.h | wc -l)"
check "no private header installed" test -z "$(find "$P" -name internal.h)"
check "zero.pc" test -f "$LIB/pkgconfig/zero.pc"
check "CMake package" test -f "$LIB/cmake/zero/zeroConfig.cmake" -a -f "$LIB/cmake/zero/zeroConfigVersion.cmake"
check "the zero command runs: zero --version" test "$("$P/bin/zero" --version)" = "zero $V"
MAN="$P/share/man/man1/zero.1"
check "zero(1) installed" test -f "$MAN"
# the page holds every command's help, as the installed zero prints it
for c in $("$P/bin/zero" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
    check "zero(1) has the help of zero $c" grep -qx ".SS \"zero $c\"" "$MAN"
done
first_flag_line=$("$P/bin/zero" train --help | sed -n 2p | sed 's/-/\\-/g')
check "zero(1) has zero train's help text verbatim" grep -qxF -- "$first_flag_line" "$MAN"
if command -v man >/dev/null 2>&1; then
    check "man renders zero(1) without warnings" bash -c "test -z \"\$(man --warnings -l '$MAN' 2>&1 >/dev/null)\""
else
    echo "SKIP man is not installed: zero(1) not rendered"
fi
COMP="$P/share/bash-completion/completions/zero"
check "bash completion installed" test -f "$COMP"
complete_words() { # complete_words WORD...: what the completion offers for the last word
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _zero; printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP" "$@"
}
check "completion: zero tr -> train" test "$(complete_words "$P/bin/zero" tr)" = train
check "completion: zero train --ra -> --ranks" test "$(complete_words "$P/bin/zero" train --ra)" = --ranks
check "completion: zero bench i -> io" test "$(complete_words "$P/bin/zero" bench i)" = io

export PKG_CONFIG_PATH="$LIB/pkgconfig"
check "pkg-config: version $V" test "$(pkg-config --modversion zero)" = "$V"
check "pkg-config: prefix is the install's" test "$(cd "$(pkg-config --variable=prefix zero)" && pwd -P)" = "$(cd "$P" && pwd -P)"
SRC="$ZERO_SOURCE_DIR/tests/install/consumer/prog.c"
run_ok() { # run_ok BINARY: it prints "zero V ok"
    local out
    out=$("$1" 2>&1) || { echo "$out"; return 1; }
    [ "$out" = "zero $V ok (stage 2)" ] || { echo "$out"; return 1; }
}
links_libzero_so() { ldd "$1" | grep -q "libzero.so.$MAJOR => $LIB/libzero.so.$MAJOR"; }
# dynamic: only -lzero (the library's own dependencies are its business)
# shellcheck disable=SC2046
$CC -Wall -Werror -o "$TMP/pc_dyn" "$SRC" $(pkg-config --cflags --libs zero) -Wl,-rpath,"$LIB" 2>"$TMP/err"
check "pkg-config, dynamic: builds" test $? -eq 0 || cat "$TMP/err"
check "pkg-config, dynamic: runs" run_ok "$TMP/pc_dyn"
check "pkg-config, dynamic: uses the installed libzero.so.$MAJOR" links_libzero_so "$TMP/pc_dyn"
# static: libzero.a by name, and what --static adds (Requires.private, Libs.private)
static_libs=$(pkg-config --static --libs zero | sed 's/-lzero\b/-l:libzero.a/')
# shellcheck disable=SC2046,SC2086
$CC -Wall -Werror -o "$TMP/pc_static" "$SRC" $(pkg-config --cflags zero) $static_libs 2>"$TMP/err"
check "pkg-config --static: builds" test $? -eq 0 || cat "$TMP/err"
check "pkg-config --static: runs" run_ok "$TMP/pc_static"
check "pkg-config --static: no libzero.so needed" bash -c "! ldd '$TMP/pc_static' | grep -q libzero"

for kind in shared static; do
    B="$TMP/cmake_$kind"
    flags=()
    [ $kind = static ] && flags=(-DZERO_USE_STATIC_LIBS=ON)
    cmake -S "$ZERO_SOURCE_DIR/tests/install/consumer" -B "$B" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="-Wall -Werror" -DCMAKE_INSTALL_RPATH="$LIB" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "${flags[@]}" \
        >"$TMP/cmake.log" 2>&1 && cmake --build "$B" >>"$TMP/cmake.log" 2>&1
    check "find_package(zero), $kind: configures and builds" test $? -eq 0 || cat "$TMP/cmake.log"
    check "find_package(zero), $kind: runs" run_ok "$B/prog"
    if [ $kind = shared ]; then
        check "find_package(zero), shared: uses the installed libzero.so.$MAJOR" links_libzero_so "$B/prog"
    else
        check "find_package(zero), static: no libzero.so needed" bash -c "! ldd '$B/prog' | grep -q libzero"
    fi
done
# an incompatible version request is refused by the package's version file
mkdir -p "$TMP/v9" && sed 's/find_package(zero 0.1 REQUIRED)/find_package(zero 9.0 REQUIRED)/' \
    "$ZERO_SOURCE_DIR/tests/install/consumer/CMakeLists.txt" >"$TMP/v9/CMakeLists.txt" && cp "$SRC" "$TMP/v9/"
cmake -S "$TMP/v9" -B "$TMP/v9/build" -DCMAKE_PREFIX_PATH="$P" >"$TMP/v9.log" 2>&1
check "find_package(zero 9.0) refuses version $V" test $? -ne 0

# no C++ compiler is needed: a configure whose C++ compiler does not exist succeeds (CUDA off)
cmake -S "$ZERO_SOURCE_DIR" -B "$TMP/nocxx" -DZERO_CUDA=OFF -DCMAKE_CXX_COMPILER=/nonexistent/c++ >"$TMP/nocxx.log" 2>&1
check "configures without a C++ compiler" test $? -eq 0 || tail -5 "$TMP/nocxx.log"

[ $fail -eq 0 ] && echo "all install checks passed"
exit $fail
