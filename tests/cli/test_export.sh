#!/usr/bin/env bash
# `zero export` and `--init-from`: a 2-rank stage-3 checkpoint exported to one safetensors file
# whose names, shapes and values (read back with numpy) are the checkpoint's; bf16/fp16 halve the
# data; a run initialized from the export (or the checkpoint) has the checkpoint's validation
# loss; a GPT-2 file written by numpy in Hugging Face's layout loads and gives the loss and the
# greedy text an independent numpy forward computes; bad files are refused with one line naming
# the tensor; export's peak RSS does not grow with the model.
set -u
: "${ZERO:?set ZERO to the zero binary}"
PY=/usr/bin/python3
DATA_DIR="${ZERO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/data"
REF="$DATA_DIR/gpt2_ref.py"
FIX="$DATA_DIR/gpt2_numpy.safetensors"
"$PY" -c 'import numpy' || { echo "FAIL numpy is required (scripts/deps.sh installs python3-numpy)"; exit 1; }
TMP=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. "$(dirname "$0")/lib.sh" # check NAME COMMAND...
# expect_error NAME STATUS NEEDLE...: the last run exited with STATUS and printed exactly one
# stderr line "zero: error: ..." containing every NEEDLE
expect_error() {
    local name=$1 want=$2; shift 2
    check "$name: exit $want (got $rc)" test "$rc" -eq "$want"
    check "$name: one error line" test "$(wc -l <"$TMP/err")" -eq 1
    check "$name: 'zero: error:' prefix" grep -q '^zero: error: ' "$TMP/err"
    for n in "$@"; do check "$name: mentions '$n'" grep -qF -- "$n" "$TMP/err"; done
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || cat "$TMP/err"
}
# the validation loss of the last --log-json step record
val_loss() { sed -n 's/.*"step":[0-9]*,.*"val_loss":\([^,]*\).*/\1/p' "$1" | tail -1; }
run() { # run NAME ARGS...: zero train, --log-json to $TMP/NAME.json; a failure ends the test
    local name=$1; shift
    "$ZERO" train --seq 32 --val-every 0 --val-batches 1 --log-json "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || {
        echo "FAIL run $name: $ZERO train $*"; cat "$TMP/$name.err"; exit 1; }
}
close() { "$PY" -c "import sys; a, b, tol = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= tol * abs(b))" "$@"; }

# --- a checkpoint of 2 ranks at stage 3, exported
run train --model tiny --ranks 2 --stage 3 --micro-batch 6 --steps 4 --lr 3e-3 --save "$TMP/ck"
V4=$(val_loss "$TMP/train.json")
"$ZERO" export "$TMP/ck" -o "$TMP/m.safetensors" --json >"$TMP/x.json" 2>"$TMP/err"; rc=$?
check "export: exit 0" test $rc -eq 0
check "export: no stderr" test ! -s "$TMP/err"
check "export: json summary" "$PY" - "$TMP/x.json" "$TMP/m.safetensors" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
assert d["step"] == 4 and d["world"] == 2 and d["dtype"] == "fp32", d
assert d["tensors"] == 28 and d["params"] == 120576, d   # tiny: 2 + 12*2 + 2 tensors
assert d["bytes"] == os.path.getsize(sys.argv[2]), d
EOF
check "export: names, shapes and values are the checkpoint's" "$PY" - "$TMP/m.safetensors" "$TMP/ck" "$DATA_DIR" <<'EOF'
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[3]); import gpt2_ref
w, meta = gpt2_ref.read_safetensors(sys.argv[1])
step = os.path.join(sys.argv[2], open(os.path.join(sys.argv[2], "latest")).read().strip())
man = json.load(open(os.path.join(step, "manifest.json")))
assert meta["format"] == "pt", meta
assert {k: meta[k] for k in ("n_layer", "n_embd", "n_head", "n_ctx", "vocab")} == \
    {"n_layer": "2", "n_embd": "64", "n_head": "4", "n_ctx": "64", "vocab": "256"}, meta
# Hugging Face GPT-2's keys, no "transformer." prefix
hf = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"} | {"h.%d.%s" % (l, n) for l in range(2) for n in (
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")}
assert set(w) == hf, sorted(set(w) ^ hf)
assert w["h.0.attn.c_attn.weight"].shape == (64, 192) and w["h.1.mlp.c_proj.weight"].shape == (256, 64)
# each unit's master: the ranks' slices back to back
masters = {}
for f in sorted(man["files"], key=lambda f: f["rank"]):
    r, _ = gpt2_ref.read_safetensors(os.path.join(step, f["name"]))
    for k, v in r.items():
        masters.setdefault(k, []).append(v)
n = 0
for u in man["units"]:
    m = np.concatenate(masters[u["name"] + "/master"])
    assert m.size == u["numel"], (u["name"], m.size)
    for p in u["params"]:
        a = m[p["offset"]:p["offset"] + int(np.prod(p["shape"]))].reshape(p["shape"])
        assert w[p["name"]].shape == a.shape and np.array_equal(w[p["name"]], a), p["name"]
        n += 1
assert n == 28 and abs(float(w["h.1.ln_1.weight"].mean()) - 1) < 0.1
EOF

# --- bf16 and fp16: half the bytes per value, each the fp32 value rounded to nearest even
for dt in bf16 fp16; do
    "$ZERO" export "$TMP/ck" -o "$TMP/m_$dt.safetensors" --dtype $dt >"$TMP/out" 2>"$TMP/err"; rc=$?
    check "export --dtype $dt: exit 0" test $rc -eq 0
    check "export --dtype $dt: half the data, values rounded" "$PY" - "$TMP/m.safetensors" "$TMP/m_$dt.safetensors" $dt "$DATA_DIR" <<'EOF'
import json, struct, sys
import numpy as np
sys.path.insert(0, sys.argv[4]); import gpt2_ref
def data_bytes(p):
    b = open(p, "rb").read(); return len(b) - 8 - struct.unpack("<Q", b[:8])[0]
assert data_bytes(sys.argv[2]) * 2 == data_bytes(sys.argv[1]) == 120576 * 4
a, _ = gpt2_ref.read_safetensors(sys.argv[1]); h, _ = gpt2_ref.read_safetensors(sys.argv[2])
for k in a:
    x = a[k].astype(np.float32)
    if sys.argv[3] == "fp16":
        want = x.astype(np.float16).astype(np.float64)
    else:
        u = x.view(np.uint32).astype(np.uint64)
        want = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    assert np.array_equal(h[k], want), k
EOF
done

# --- round trip: a run initialized from the export (lr 0: one step changes nothing) validates
# on the same windows with the checkpoint's weights, so its validation loss is the checkpoint's
# (bitwise: same ranks, stage and batch). The first *training* loss would use step 0's batch,
# which the original run saw at step 0 with other weights, so validation is the comparison.
run rt --init-from "$TMP/m.safetensors" --ranks 2 --stage 3 --micro-batch 6 --steps 1 --lr 0
check "round trip: validation loss $(val_loss "$TMP/rt.json") = the checkpoint's $V4" test "$(val_loss "$TMP/rt.json")" = "$V4"
check "round trip: the model came from the file" grep -q "m.safetensors (120576 params)" "$TMP/rt.out"
run rtck --init-from "$TMP/ck" --ranks 2 --stage 3 --micro-batch 6 --steps 1 --lr 0
check "init from the checkpoint: validation loss = the checkpoint's" test "$(val_loss "$TMP/rtck.json")" = "$V4"

# --- against an independent forward (tests/data/gpt2_ref.py, float64 numpy) on a text file
"$PY" -c "
import random
random.seed(5)
words = 'the quick brown fox jumps over a lazy dog while zero shards optimizer states across ranks'.split()
open('$TMP/text.txt', 'w').write(' '.join(random.choice(words) for _ in range(5000))[:20000])"
run rt16 --init-from "$TMP/m_bf16.safetensors" --micro-batch 4 --steps 1 --lr 0 --data "$TMP/text.txt"
REF16=$("$PY" "$REF" valloss "$TMP/m_bf16.safetensors" "$TMP/text.txt" 32 4 4)
check "bf16 export: validation loss $(val_loss "$TMP/rt16.json") = numpy's $REF16 (rel 2e-5)" close "$(val_loss "$TMP/rt16.json")" "$REF16" 2e-5

# --- a GPT-2 written by numpy as Hugging Face lays it out (tests/data/make_gpt2_fixture.py):
# "transformer." prefix, attn.bias/masked_bias buffers, tied lm_head, F32/F16/BF16, no n_head
run fix --init-from "$FIX" --heads 2 --micro-batch 4 --steps 1 --lr 0 --data "$TMP/text.txt"
REFF=$("$PY" "$REF" valloss "$FIX" "$TMP/text.txt" 32 4 2)
check "numpy fixture: validation loss $(val_loss "$TMP/fix.json") = numpy's $REFF (rel 2e-5)" close "$(val_loss "$TMP/fix.json")" "$REFF" 2e-5
check "numpy fixture: shape from the tensors" grep -q "gpt2_numpy.safetensors (34688 params)" "$TMP/fix.out"
"$ZERO" sample --init-from "$FIX" --heads 2 --prompt "zero shards" --tokens 24 --temperature 0 --json >"$TMP/s.json" 2>"$TMP/err"; rc=$?
check "numpy fixture: sample exit 0" test $rc -eq 0
"$PY" "$REF" greedy "$FIX" 2 24 $(printf 'zero shards' | od -An -tu1) >"$TMP/g.json"
check "numpy fixture: greedy tokens are numpy's argmax path" "$PY" - "$TMP/s.json" "$TMP/g.json" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["min_gap"] > 1e-4, b      # no near-tie that float32 could flip
assert a["tokens"] == b["tokens"], (a["tokens"], b["tokens"])
EOF
"$ZERO" train --init-from "$FIX" --steps 1 --data "$TMP/text.txt" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "no n_head recorded, no --heads" 2 "width 32" "--heads"

# --- refused files: one line naming the tensor, its shape and the expected one
edit() { # edit IN OUT PYTHON: rewrites a safetensors file; the code changes `h` (header) and `d` (name -> bytes)
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__", {})
d = {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
exec(sys.argv[3])
out, at = {"__metadata__": meta}, 0
for k in h:
    out[k] = dict(h[k], data_offsets=[at, at + len(d[k])]); at += len(d[k])
t = json.dumps(out).encode(); t += b" " * (-len(t) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + b"".join(d[k] for k in h))
EOF
}
init() { "$ZERO" train --init-from "$1" --heads 2 --steps 1 --data "$TMP/text.txt" "${@:2}" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
edit "$FIX" "$TMP/missing.st" 'del h["transformer.h.1.mlp.c_fc.bias"]'
init "$TMP/missing.st"
expect_error "missing tensor" 1 "missing tensor 'h.1.mlp.c_fc.bias' (expected shape [128])"
edit "$FIX" "$TMP/transposed.st" 'h["transformer.h.0.attn.c_attn.weight"]["shape"] = [96, 32]'
init "$TMP/transposed.st"
expect_error "Linear (out, in) layout" 1 "tensor 'transformer.h.0.attn.c_attn.weight' has shape [96, 32]; this model expects [32, 96]"
edit "$FIX" "$TMP/int.st" 'h["transformer.ln_f.bias"]["dtype"] = "I16"'
init "$TMP/int.st"
expect_error "integer dtype" 1 "'transformer.ln_f.bias' has dtype I16: expected F32, BF16 or F16"
edit "$FIX" "$TMP/extra.st" 'h["transformer.h.2.ln_1.weight"] = dict(h["transformer.ln_f.bias"]); d["transformer.h.2.ln_1.weight"] = d["transformer.ln_f.bias"]'
init "$TMP/extra.st" --model tiny --layers 2 --dim 32 --vocab 256
expect_error "a tensor this model does not have" 1 "tensor 'transformer.h.2.ln_1.weight' is not a parameter of this model"
init "$TMP/m.safetensors" --model small
expect_error "another model than the flags say" 1 "tensor 'wte.weight' has shape [256, 64]; this model expects [256, 512]"
cp "$TMP/m.safetensors" "$TMP/flip.st"
"$PY" -c "
p = '$TMP/flip.st'; b = bytearray(open(p, 'rb').read()); b[-100] ^= 1; open(p, 'wb').write(b)"
"$ZERO" train --init-from "$TMP/flip.st" --steps 1 --data "$TMP/text.txt" >"$TMP/out" 2>"$TMP/err"; rc=$? # its metadata has n_head
expect_error "flipped byte" 1 "tensor 'ln_f.bias': checksum mismatch" "flip.st"
init "$TMP/nothing.st"
expect_error "no such file" 2 "nothing.st" "No such file"
init "$TMP/nothing.st" --model tiny
expect_error "no such file, shape from the flags" 2 "nothing.st" "No such file"
"$ZERO" train --init-from "$TMP/m.safetensors" --seq 65 --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--seq longer than the positions" 2 "--seq 65" "64 positions"
"$ZERO" train --init-from "$TMP/m.safetensors" --resume "$TMP/ck" --steps 5 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "--init-from with --resume" 2 "--resume and --init-from"

# --- export's own errors: nothing half-written
"$ZERO" export "$TMP/ck" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export without -o" 2 "expected -o DIR"
"$ZERO" export -o "$TMP/x.safetensors" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export without a checkpoint" 2 "expected a checkpoint directory"
"$ZERO" export "$TMP/ck" -o "$TMP/x.safetensors" --dtype int8 >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export --dtype int8" 2 "--dtype 'int8'" "fp32, bf16 or fp16"
"$ZERO" export "$TMP/ck" -o "$TMP/no/such/dir/x.safetensors" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export into a missing directory" 1 "$TMP/no/such/dir/x.safetensors"
LATEST=$(cat "$TMP/ck/latest")
cp -r "$TMP/ck" "$TMP/bad"
"$PY" - "$TMP/bad/$LATEST/rank_00001.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
lo, hi = h["h.1/master"]["data_offsets"]; b[8 + n + (lo + hi) // 2] ^= 0x40; open(p, "wb").write(b)
EOF
"$ZERO" export "$TMP/bad" -o "$TMP/bad.safetensors" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export of a corrupted checkpoint" 1 "rank_00001.safetensors" "'h.1/master'" "checksum mismatch"
check "export of a corrupted checkpoint: no file" test ! -e "$TMP/bad.safetensors" -a ! -e "$TMP/bad.st.tmp"
ZERO_FAULT="write:2:enospc:always" "$ZERO" export "$TMP/ck" -o "$TMP/full.safetensors" >"$TMP/out" 2>"$TMP/err"; rc=$?
expect_error "export onto a full disk" 1 "No space left on device" "full.safetensors"
check "export onto a full disk: no file" test ! -e "$TMP/full.safetensors" -a ! -e "$TMP/full.safetensors.tmp"

# --- memory: streaming, so the peak RSS of exporting a 25 MB model is that of a 0.5 MB one plus
# at most a few MiB (the 1 MiB chunk, its fp16 copy, the writer's 1 MiB staging, the header)
run wide --model tiny --dim 512 --heads 8 --micro-batch 1 --steps 1 --save "$TMP/wide"
"$ZERO" export "$TMP/wide" -o "$TMP/w.safetensors" --dtype fp16 --json >"$TMP/w.json" 2>"$TMP/err" || { echo "FAIL export wide"; cat "$TMP/err"; fail=1; }
"$ZERO" export "$TMP/ck" -o "$TMP/t.safetensors" --dtype fp16 --json >"$TMP/t.json" 2>"$TMP/err" || { echo "FAIL export tiny"; fail=1; }
check "export peak RSS does not grow with the model" "$PY" - "$TMP/w.json" "$TMP/t.json" <<'EOF'
import json, sys
w, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
model = w["params"] * 4
grow = w["rss_peak"] - t["rss_peak"]
print("     export peak RSS: %.1f MiB for %d params (fp32 %.1f MiB), %.1f MiB for %d params: +%.2f MiB"
      % (w["rss_peak"] / 2**20, w["params"], model / 2**20, t["rss_peak"] / 2**20, t["params"], grow / 2**20))
assert model > 24 * 2**20 and grow < 6 * 2**20, (model, grow)
EOF

# --- -o inside the checkpoint is refused: it would overwrite (a rank file) or mix with its files
cp -r "$TMP/ck" "$TMP/ck_keep"
step=$(cat "$TMP/ck/latest")
rc=0; "$ZERO" export "$TMP/ck" -o "$TMP/ck/$step/rank_00000.safetensors" >/dev/null 2>"$TMP/err" || rc=$?
expect_error "-o a rank file of the checkpoint" 2 "is inside the checkpoint '$TMP/ck'"
check "-o a rank file of the checkpoint: the checkpoint is intact" diff -r "$TMP/ck" "$TMP/ck_keep"
rc=0; "$ZERO" export "$TMP/ck" -o "$TMP/ck" >/dev/null 2>"$TMP/err" || rc=$?
expect_error "-o the checkpoint itself" 2 "is inside the checkpoint"
check "-o the checkpoint itself: nothing added" diff -r "$TMP/ck" "$TMP/ck_keep"

# --- a tokenizer file that cannot be copied fails the export before anything is written: the
# earlier export in the directory stays whole
cp -r "$DATA_DIR/finetune/qwen2_chat" "$TMP/src"
run ft --init-from "$TMP/src" --steps 1 --micro-batch 2 --save "$TMP/ftck"
"$ZERO" export "$TMP/ftck" -o "$TMP/ftout" >/dev/null 2>"$TMP/err" || echo "FAIL export of the fine-tune: $(cat "$TMP/err")"
(cd "$TMP/ftout" && md5sum ./* >"$TMP/ftout.md5")
rm "$TMP/src/tokenizer.json" && mkdir "$TMP/src/tokenizer.json"
rc=0; "$ZERO" export "$TMP/ftck" -o "$TMP/ftout" --dtype bf16 >/dev/null 2>"$TMP/err" || rc=$?
expect_error "a source tokenizer.json that is a directory" 1 "tokenizer.json: not a regular file"
check "a failed export leaves the earlier one whole" sh -c "cd '$TMP/ftout' && md5sum -c --quiet '$TMP/ftout.md5'"

exit $fail
