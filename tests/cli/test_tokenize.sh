#!/usr/bin/env bash
# `zero tokenize` and `zero bench tokenize`: --print gives the ids of Hugging Face tokenizers for eight
# trained tokenizers (tests/data/tokenizer, scripts/make_tokenizer_fixtures.py) line by line; -o
# writes a ZEROTOK2 file with a loss mask for JSONL data, packed with --seq; every refusal is one
# line with its exit status.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
SRC="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
D="$SRC/tests/data/tokenizer"
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
expect_error() { # NAME STATUS NEEDLE...: exit STATUS, one stderr line "zero: error: ..." with every NEEDLE
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
}
run() { "$ZERO" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }

# --- --help
run tokenize --help
check "tokenize --help exits 0 and shows usage" test "$rc" -eq 0 -a -n "$(grep -F 'usage: zero tokenize' "$TMP/out")"
run bench tokenize --help
check "bench tokenize --help exits 0" test "$rc" -eq 0

# --- exact ids, line by line, for both families
for t in gpt2 llama3 qwen2 smollm2 llama2 mistral metaspace gpt2_prefix; do
    for c in fortunes unicode; do
        run tokenize --tokenizer "$D/$t" "$D/$c.txt" --print
        check "$t $c: --print equals HF tokenizers" cmp -s "$TMP/out" "$D/$t.$c.ids"
    done
done
run tokenize --tokenizer "$D/llama3/tokenizer.json" "$D/fortunes.txt" --print --no-special
check "--no-special drops the BOS" test "$(head -1 "$TMP/out")" = "$(head -1 "$D/llama3.fortunes.ids" | cut -d' ' -f2-)"
run tokenize --tokenizer "$D/llama3" "$D/fortunes.txt" "$D/unicode.txt" --print
check "several inputs: their lines in order" test "$(wc -l <"$TMP/out")" -eq $(($(wc -l <"$D/fortunes.txt") + $(wc -l <"$D/unicode.txt")))
run tokenize --tokenizer "$D/qwen2" "$D/chats.jsonl" --print --json
check "--print --json on a chat: ids and the assistant mask of apply_chat_template, then EOS" "$PY" - "$TMP/out" "$D/qwen2.chat.ids" <<'EOF'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [l.split("|") for l in open(sys.argv[2])]
assert len(got) == len(want) == 3
for g, (ids, mask) in zip(got, want):
    ids, mask = [int(x) for x in ids.split()], [int(x) for x in mask.split()]
    assert g["ids"][:-1] == ids and g["mask"][:-1] == mask, (g, ids, mask)
    assert g["mask"][-1] == 1  # EOS after an assistant turn counts
EOF

# --- ShareGPT and Alpaca, as JSONL and as one JSON array (scripts/make_data_shape_fixtures.py)
for f in sharegpt alpaca; do
    for t in qwen2 llama3 mistral smollm2; do
        for ext in jsonl json; do
            run tokenize --tokenizer "$D/$t" "$D/$f.$ext" --print --json
            check "$t $f.$ext --print --json: the ids and mask of transformers/tokenizers, then EOS" \
                "$PY" - "$TMP/out" "$D/$t.$f.ids" <<'EOF'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [l.split("|") for l in open(sys.argv[2])]
assert len(got) == len(want) >= 3, (len(got), len(want))
for g, (ids, mask) in zip(got, want):
    ids, mask = [int(x) for x in ids.split()], [int(x) for x in mask.split()]
    if len(g["ids"]) == len(ids) + 1:  # EOS added (Mistral's chats end with it already)
        assert g["mask"][-1] == 1  # after the assistant's turn, or the output, it counts
        g["ids"], g["mask"] = g["ids"][:-1], g["mask"][:-1]
    assert g["ids"] == ids and g["mask"] == mask, (g, ids, mask)
EOF
        done
    done
done
run tokenize --tokenizer "$D/qwen2" "$D/sharegpt.json" "$D/sharegpt.jsonl" "$D/chats.jsonl" -o "$TMP/sg.tok" --json
check "a JSON array, JSONL and chats in one token file" test "$rc" -eq 0 -a -n "$(grep -F '"examples": 9' "$TMP/out")"
printf '[\n  {"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},\n  {"conversations": [{"from": "tool", "value": "x"}]}\n]\n' >"$TMP/sg.json"
run tokenize --tokenizer "$D/qwen2" "$TMP/sg.json" -o "$TMP/x.tok"
expect_error "ShareGPT: an unknown role" 1 "$TMP/sg.json:3:" "conversations[0]: from 'tool' is not one of human, user, gpt, assistant, chatgpt, model, system"
run tokenize --tokenizer "$D/qwen2" "$TMP/sg.json" -o "$TMP/x.tok" --skip-bad-examples
check "ShareGPT: --skip-bad-examples skips it, names its line" grep -qF "first: $TMP/sg.json:3:" "$TMP/err"
printf '{"instruction": "a", "output": "b", "text": "c"}\n' >"$TMP/mix.jsonl"
run tokenize --tokenizer "$D/qwen2" "$TMP/mix.jsonl" -o "$TMP/x.tok"
expect_error "Alpaca beside text" 1 "$TMP/mix.jsonl:1:" "one shape an example, found \"instruction\" and \"text\""
printf '[{"text": "a"},\n]\n' >"$TMP/comma.json"
run tokenize --tokenizer "$D/qwen2" "$TMP/comma.json" -o "$TMP/x.tok" --skip-bad-examples
expect_error "a JSON array's trailing comma (not skippable: the file is not JSON)" 1 "$TMP/comma.json:2:" "a ',' before ']'"
printf '{"text": "a"}\n\n{"text": "b"}\n' >"$TMP/blank.jsonl"
run tokenize --tokenizer "$D/qwen2" "$TMP/blank.jsonl" --print
check "--print: a blank line gives an empty line" test "$(sed -n 2p "$TMP/out")" = "" -a "$(wc -l <"$TMP/out")" -eq 3

# --- token files
run tokenize --tokenizer "$D/qwen2" "$D/chats.jsonl" "$D/pc.jsonl" -o "$TMP/a.tok" --json
check "-o chats + prompt/completion: exit 0" test "$rc" -eq 0
check "the file is ZEROTOK2 with a mask, as the summary says" "$PY" - "$TMP/a.tok" "$TMP/out" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
s = json.loads(open(sys.argv[2]).read())
magic, ver, vocab, count, tb, flags, row = struct.unpack("<8sIIQIII", b[:36])
assert magic == b"ZEROTOK2" and ver == 2 and tb == 2 and flags == 3 and row == 0, (magic, ver, tb, flags, row)
assert count == s["tokens"] and vocab == s["vocab"] == 800 and s["mask"] is True and s["examples"] == 6, s
assert len(b) == 64 + 4 * count
mask, starts = b[64 + 2 * count:64 + 3 * count], b[64 + 3 * count:]
assert sum(mask) == s["trained"] and 0 < s["trained"] < count and set(mask) <= {0, 1}
# each example's first token, and nothing else, starts a document
assert sum(starts) == 6 and starts[0] == 1 and set(starts) <= {0, 1}, list(starts)
EOF
run tokenize --tokenizer "$D/smollm2" "$D/fortunes.txt" -o "$TMP/b.tok"
check "a text file: no mask, one document (its first token its only start)" "$PY" -c "
import struct; b = open('$TMP/b.tok', 'rb').read(); m, v, voc, n, tb, fl, row = struct.unpack('<8sIIQIII', b[:36])
assert fl == 2 and row == 0 and len(b) == 64 + 3 * n and b[64 + 2 * n:] == bytes([1]) + bytes(n - 1), (fl, row)"
check "summary line" grep -q "^zero tokenize: wrote $TMP/b.tok: .* tokens" "$TMP/out"
run tokenize --tokenizer "$D/llama3" "$D/pc.jsonl" "$D/chats.jsonl" -o "$TMP/c.tok" --seq 127 --json
check "--seq 127: rows of 128 tokens" "$PY" -c "
import json, struct; s = json.load(open('$TMP/out')); b = open('$TMP/c.tok', 'rb').read()
m, v, voc, n, tb, fl, row = struct.unpack('<8sIIQIII', b[:36])
assert row == 128 == s['row'] and n == 128 * s['rows'] and s['padding'] > 0 and fl == 3, s
st = b[64 + 3 * n:]
assert all(st[r * 128] == 1 for r in range(s['rows'])), 'a row starts a document'
assert sum(st) >= s['examples'], (sum(st), s['examples'])"

mkdir -p "$TMP/dir"
cp "$D/fortunes.txt" "$TMP/dir/a.txt"
cp "$D/pc.jsonl" "$TMP/dir/b.jsonl"
ln -s "$D/unicode.txt" "$TMP/dir/c.txt"      # symlinks, hidden files and *.dat are not read
cp "$D/unicode.txt" "$TMP/dir/.hidden"
run tokenize --tokenizer "$D/llama2" "$TMP/dir" -o "$TMP/g.tok"
run tokenize --tokenizer "$D/llama2" "$TMP/dir/a.txt" "$TMP/dir/b.jsonl" -o "$TMP/h.tok"
check "a directory: its regular files in name order" cmp -s "$TMP/g.tok" "$TMP/h.tok"

# --- bad examples: refused with file:line, or skipped and counted
printf '{"text": "fine"}\n{"prompt": "only a prompt"}\n\n{"messages": [{"role": "robot", "content": "x"}]}\n' >"$TMP/bad.jsonl"
run tokenize --tokenizer "$D/llama3" "$TMP/bad.jsonl" -o "$TMP/d.tok"
expect_error "a bad line" 1 "$TMP/bad.jsonl:2:" "expected both \"prompt\" and \"completion\"" "--skip-bad-examples"
check "nothing written after a bad line" test ! -e "$TMP/d.tok"
run tokenize --tokenizer "$D/llama3" "$TMP/bad.jsonl" -o "$TMP/d.tok" --skip-bad-examples --json
check "--skip-bad-examples: exit 0, 2 skipped" "$PY" -c "
import json; s = json.load(open('$TMP/out')); assert s['skipped'] == 2 and s['examples'] == 1, s"
check "--skip-bad-examples: a warning naming the first" grep -q "skipped 2 bad examples (first: $TMP/bad.jsonl:2:" "$TMP/err"
printf '{"text": "%s"}\n' "$(printf 'word %.0s' $(seq 1 40))" >"$TMP/long.jsonl"
run tokenize --tokenizer "$D/llama3" "$TMP/long.jsonl" -o "$TMP/e.tok" --seq 15
expect_error "an example longer than the sequence" 1 "$TMP/long.jsonl:1:" "longer than a sequence (seq + 1 = 16)"
printf '{"messages": [{"role": "user", "content": "hi"}]}\n' >"$TMP/chat.jsonl"
run tokenize --tokenizer "$D/gpt2" "$TMP/chat.jsonl" -o "$TMP/f.tok"
expect_error "a chat, no format known" 1 "$TMP/chat.jsonl:1:" "chatml, llama3, mistral"
run tokenize --tokenizer "$D/gpt2" "$TMP/chat.jsonl" -o "$TMP/f.tok" --chat-template chatml
expect_error "a format whose tokens are missing" 1 "needs the token <|im_start|>"

# --- usage errors (exit 2) and broken tokenizers (exit 1)
run tokenize "$D/fortunes.txt" --print
expect_error "no --tokenizer" 2 "expected --tokenizer"
run tokenize --tokenizer "$D/gpt2" --print
expect_error "no input" 2 "expected at least one INPUT"
run tokenize --tokenizer "$D/gpt2" "$TMP/nope.txt" --print
expect_error "a missing input" 2 "input '$TMP/nope.txt' does not exist"
run tokenize --tokenizer "$TMP/nodir" "$D/fortunes.txt" --print
expect_error "a missing tokenizer" 2 "--tokenizer '$TMP/nodir' does not exist"
run tokenize --tokenizer "$D/gpt2" "$D/fortunes.txt" --print -o "$TMP/x.tok"
expect_error "--print and -o" 2 "exactly one of -o OUT and --print"
run tokenize --tokenizer "$D/gpt2" "$D/fortunes.txt"
expect_error "neither --print nor -o" 2 "exactly one of -o OUT and --print"
run tokenize --tokenizer "$D/gpt2" "$D/fortunes.txt" -o "$TMP/x.tok" --chat-template zephyr
expect_error "an unknown chat format" 2 "'zephyr'" "chatml, llama3, mistral"
run tokenize --tokenizer "$D/gpt2" "$D/fortunes.txt" -o "$TMP/x.tok" --seq 0
expect_error "--seq 0" 2 "--seq '0'"
run tokenize --tokenizer "$D/gpt2" "$D/fortunes.txt" -o "$TMP/x.tok" --bogus
expect_error "an unknown option" 2 "unknown option '--bogus'"
mkdir -p "$TMP/tk"
"$PY" -c "
import json, sys; j = json.load(open('$D/gpt2/tokenizer.json')); j['pre_tokenizer'] = {'type': 'Whitespace'}
json.dump(j, open('$TMP/tk/tokenizer.json', 'w'))"
run tokenize --tokenizer "$TMP/tk" "$D/fortunes.txt" --print
expect_error "an unsupported pre-tokenizer" 1 "$TMP/tk/tokenizer.json: pre_tokenizer.type 'Whitespace' is not supported"
printf '{"model": ' >"$TMP/tk/tokenizer.json"
run tokenize --tokenizer "$TMP/tk" "$D/fortunes.txt" --print
expect_error "a truncated tokenizer.json" 1 "$TMP/tk/tokenizer.json" "not valid JSON"

# --- zero bench tokenize
run bench tokenize --tokenizer "$D/gpt2" --data "$D/fortunes.txt" --reps 1 --no-python --json
check "bench tokenize --json: MB/s and tokens" "$PY" -c "
import json; s = json.load(open('$TMP/out')); assert s['mbps'] > 0 and s['tokens'] == $(tr ' ' '\n' <"$D/gpt2.fortunes.ids" | grep -c .) and s['ratio'] is None, s"
run bench tokenize --data "$D/fortunes.txt"
expect_error "bench without --tokenizer" 2 "expected --tokenizer"

# --- -o naming an input (or a file inside an input directory) is refused before anything is written
printf '{"text": "keep me"}\n' >"$TMP/in.jsonl"
cp "$TMP/in.jsonl" "$TMP/in.keep"
run tokenize --tokenizer "$D/gpt2" "$TMP/in.jsonl" -o "$TMP/./in.jsonl"
expect_error "-o is the input" 2 "-o '$TMP/./in.jsonl' is the input '$TMP/in.jsonl'"
check "-o is the input: the input is intact" cmp -s "$TMP/in.jsonl" "$TMP/in.keep"
mkdir -p "$TMP/indir" && cp "$TMP/in.jsonl" "$TMP/indir/"
run tokenize --tokenizer "$D/gpt2" "$TMP/indir" -o "$TMP/indir/out.bin"
expect_error "-o inside an input directory" 2 "is inside the input '$TMP/indir'"
check "-o inside an input directory: nothing written" test ! -e "$TMP/indir/out.bin"
# --- a normalized added token under a Regex Replace normalizer matches the normalized text, as in
# HF tokenizers ("aqa" -> "bqb" both ways: one token; tokenizers 0.23.3 encodes it to the added id)
mkdir -p "$TMP/rx"
"$PY" - "$D/gpt2/tokenizer.json" "$TMP/rx/tokenizer.json" <<'EOF2'
import json, sys
t = json.load(open(sys.argv[1]))
t["normalizer"] = {"type": "Replace", "pattern": {"Regex": "a"}, "content": "b"}
n = max(list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens") or []]) + 1
t["added_tokens"] = list(t.get("added_tokens") or []) + [{"id": n, "content": "aqa", "single_word": False, "lstrip": False,
                                                             "rstrip": False, "normalized": True, "special": False}]
json.dump(t, open(sys.argv[2], "w"))
print(n, file=open(sys.argv[2] + ".id", "w"))
EOF2
printf 'aqa\n' >"$TMP/aqa.txt"
run tokenize --tokenizer "$TMP/rx" "$TMP/aqa.txt" --print --no-special
check "a Regex Replace normalizer reaches the normalized added tokens" test "$(cat "$TMP/out")" = "$(cat "$TMP/rx/tokenizer.json.id")"

printf 'some text to tokenize\n' >"$TMP/t.txt"
# --- options that would change nothing are refused: --no-special for a token file, the JSONL
# options without a JSONL input
run tokenize --tokenizer "$D/llama3" "$TMP/t.txt" -o "$TMP/ns.bin" --no-special
expect_error "--no-special with -o" 2 "--no-special goes with --print"
run tokenize --tokenizer "$D/llama3" "$TMP/t.txt" -o "$TMP/ct.bin" --chat-template chatml
expect_error "--chat-template on text" 2 "--chat-template applies to JSONL examples"
run tokenize --tokenizer "$D/llama3" "$TMP/t.txt" -o "$TMP/sb.bin" --skip-bad-examples
expect_error "--skip-bad-examples on text" 2 "--skip-bad-examples applies to JSONL examples"

# --- an empty input and a binary one (a token file given again) are refused, not tokenized
: >"$TMP/empty.txt"
run tokenize --tokenizer "$D/gpt2" "$TMP/empty.txt" -o "$TMP/e.bin"
expect_error "an empty input" 2 "input '$TMP/empty.txt' is empty"
printf 'some text to tokenize\n' >"$TMP/t.txt"
run tokenize --tokenizer "$D/gpt2" "$TMP/t.txt" -o "$TMP/t.bin"
check "a text file tokenizes" test "$rc" -eq 0
run tokenize --tokenizer "$D/gpt2" "$TMP/t.bin" -o "$TMP/t2.bin"
expect_error "a token file as input" 1 "data file '$TMP/t.bin' looks binary (NUL byte at offset"

exit $fail
