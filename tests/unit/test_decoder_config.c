/* The decoder's configuration: preset parameter counts against the published sizes, config.json
 * parsing with transformers' defaults (published rope_scaling and transformers 5's
 * rope_parameters alike, head_dim, GQA, biases, sliding windows), every refusal naming its field
 * and value, config.json out and back in, the unit table of a Llama-family layer, and the
 * activation figure equal to what dec_create allocates. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "decoder/decoder.h"
#include "harness.h"

static void test_presets(void) {
    /* the published parameter counts (Hugging Face model cards / safetensors totals) */
    const struct { const char *name; uint64_t params; dec_arch arch; } known[] = {
        {"gpt2", 124439808ull, DEC_ARCH_GPT2},           {"gpt2-xl", 1557611200ull, DEC_ARCH_GPT2},
        {"llama-3.2-1b", 1235814400ull, DEC_ARCH_LLAMA}, {"llama-3.2-3b", 3212749824ull, DEC_ARCH_LLAMA},
        {"llama-3.1-8b", 8030261248ull, DEC_ARCH_LLAMA}, {"qwen2.5-0.5b", 494032768ull, DEC_ARCH_QWEN2},
        {"qwen2.5-7b", 7615616512ull, DEC_ARCH_QWEN2},   {"qwen3-8b", 8190735360ull, DEC_ARCH_QWEN3},
        {"mistral-7b", 7248023552ull, DEC_ARCH_MISTRAL}, {"smollm2-135m", 134515008ull, DEC_ARCH_LLAMA},
        {"smollm2-1.7b", 1711376384ull, DEC_ARCH_LLAMA},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        dec_config c;
        ZT_OK(dec_config_preset(&c, known[i].name, NULL));
        ZT_OK(dec_config_check(&c, NULL));
        ZT_CHECKF(dec_num_params(&c) == known[i].params, "%s: %llu parameters, published %llu", known[i].name,
                  (unsigned long long)dec_num_params(&c), (unsigned long long)known[i].params);
        ZT_EQ_INT(c.arch, known[i].arch);
        uint64_t units = 0;
        for (int u = 0; u < dec_num_units(&c); u++) units += dec_unit_numel(&c, u);
        ZT_EQ_INT(units, dec_num_params(&c));
        /* config.json out and back: the same configuration */
        char *j = dec_config_to_json(&c, NULL, "bfloat16");
        dec_config back;
        zero_error err = {{0}};
        ZT_CHECKF(j && dec_config_from_json(&back, j, NULL, &err) == ZERO_OK, "%s: %s", known[i].name, err.msg);
        ZT_CHECKF(dec_config_equal(&c, &back), "%s: config.json round trip changed the configuration", known[i].name);
        ZT_CHECK(strstr(j, "\n  \"torch_dtype\": \"bfloat16\"") && !strchr(j, '\t'));
        free(j);
    }
    dec_config c;
    ZT_OK(dec_config_preset(&c, "llama-3.1-8b", NULL));
    ZT_CHECK(!c.tied && c.rope_type == DEC_ROPE_LLAMA3 && c.rope_factor == 8.0 && c.rope_theta == 500000.0);
    ZT_CHECK(c.n_kv_head == 8 && c.head_dim == 128 && c.n_inner == 14336);
    zero_error err = {{0}};
    ZT_EQ_INT(dec_config_preset(&c, "llama-4", &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "'llama-4'") && strstr(err.msg, "qwen3-8b") && strstr(err.msg, "model directory"),
              "message: %s", err.msg);
}

/* Parses json; expects success and returns the configuration. */
static dec_config parse_ok(const char *json) {
    dec_config c;
    memset(&c, 0, sizeof c);
    zero_error err = {{0}};
    ZT_CHECKF(dec_config_from_json(&c, json, NULL, &err) == ZERO_OK, "%s: %s", json, err.msg);
    return c;
}

/* Expects a refusal whose message holds both needles. */
static void parse_bad(const char *json, const char *n1, const char *n2) {
    dec_config c;
    zero_error err = {{0}};
    zero_status st = dec_config_from_json(&c, json, NULL, &err);
    ZT_CHECKF(st != ZERO_OK, "accepted: %s", json);
    ZT_CHECKF(strstr(err.msg, n1) && (!n2 || strstr(err.msg, n2)), "message for %s: %s", json, err.msg);
}

#define LLAMA "\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 96, " \
              "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 128"

static void test_parse(void) {
    /* transformers' defaults: no num_key_value_heads is MHA, head_dim = hidden / heads, untied,
     * rms_norm_eps 1e-6, rope_theta 10000, no biases */
    dec_config c = parse_ok("{" LLAMA "}");
    ZT_CHECK(c.arch == DEC_ARCH_LLAMA && c.n_kv_head == 8 && c.head_dim == 8 && !c.tied && c.norm_eps == 1e-6);
    ZT_CHECK(c.rope_theta == 10000.0 && c.rope_type == DEC_ROPE_DEFAULT && !c.qkv_bias && !c.o_bias && !c.mlp_bias);
    ZT_CHECK(c.n_ctx == 128 && c.vocab == 100 && c.n_inner == 96 && c.sliding_window == 0);
    c = parse_ok("{" LLAMA ", \"num_key_value_heads\": 1, \"head_dim\": 16, \"attention_bias\": true, \"mlp_bias\": true, "
                 "\"tie_word_embeddings\": true, \"rms_norm_eps\": 1e-5}");
    ZT_CHECK(c.n_kv_head == 1 && c.head_dim == 16 && c.qkv_bias && c.o_bias && c.mlp_bias && c.tied && c.norm_eps == 1e-5);
    /* model_type alone */
    c = parse_ok("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2}");
    ZT_CHECK(c.arch == DEC_ARCH_QWEN2 && c.qkv_bias && !c.o_bias && c.vocab == 151936 && c.n_inner == 22016);
    /* the published form and transformers 5's give the same RoPE */
    dec_config a = parse_ok("{" LLAMA ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                            "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}");
    dec_config b = parse_ok("{" LLAMA ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, \"factor\": 8.0, "
                            "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}");
    ZT_CHECK(dec_config_equal(&a, &b) && a.rope_type == DEC_ROPE_LLAMA3 && a.rope_orig_ctx == 8192 && a.rope_theta == 5e5);
    a = parse_ok("{" LLAMA ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}");
    b = parse_ok("{" LLAMA ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4, \"rope_theta\": 10000}}");
    ZT_CHECK(dec_config_equal(&a, &b) && a.rope_type == DEC_ROPE_LINEAR && a.rope_factor == 4.0);
    /* both forms in one file (written for transformers 4 and 5): read when they agree, rope_theta
     * inside one and at the top level alike */
    a = parse_ok("{" LLAMA ", \"rope_theta\": 500, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}, "
                 "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 500}}");
    ZT_CHECK(a.rope_type == DEC_ROPE_LINEAR && a.rope_factor == 2.0 && a.rope_theta == 500.0);
    a = parse_ok("{" LLAMA ", \"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 3}}");
    ZT_CHECK(a.rope_type == DEC_ROPE_LINEAR && a.rope_factor == 3.0);
    /* no type: only rope_theta (and partial_rotary_factor 1) may stand without one */
    a = parse_ok("{" LLAMA ", \"rope_parameters\": {\"rope_theta\": 1e6}}");
    ZT_CHECK(a.rope_type == DEC_ROPE_DEFAULT && a.rope_theta == 1e6);
    /* the stored dtype: one of the three, or null */
    parse_ok("{" LLAMA ", \"torch_dtype\": \"bfloat16\", \"dtype\": \"bfloat16\"}");
    parse_ok("{" LLAMA ", \"torch_dtype\": null, \"dtype\": \"float16\"}");
    a = parse_ok("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"default\"}, \"rope_theta\": 1e6}");
    ZT_CHECK(a.rope_type == DEC_ROPE_DEFAULT && a.rope_theta == 1e6);
    /* sliding windows: Mistral's default 4096, null none; Qwen's only with use_sliding_window,
     * on the layers past max_window_layers */
    c = parse_ok("{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 128, \"num_attention_heads\": 16}");
    ZT_CHECK(c.sliding_window == 4096 && c.n_kv_head == 8 && c.vocab == 32000); /* MistralConfig's defaults */
    parse_bad("{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4}",
              "num_key_value_heads (missing)", "divisor"); /* its default 8 key/value heads do not divide 4 */
    c = parse_ok("{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"sliding_window\": null}");
    ZT_CHECK(c.sliding_window == 0 && c.n_kv_head == 2);
    c = parse_ok("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"sliding_window\": 32, \"use_sliding_window\": false}");
    ZT_EQ_INT(c.sliding_window, 0);
    c = parse_ok("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"num_hidden_layers\": 4, \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 2}");
    ZT_EQ_INT(c.sliding_window, 32);
    c = parse_ok("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"num_hidden_layers\": 4, \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 4}");
    ZT_EQ_INT(c.sliding_window, 0);
    c = parse_ok("{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"num_hidden_layers\": 2, \"use_sliding_window\": true, \"sliding_window\": 16, "
                 "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}");
    ZT_CHECK(c.sliding_window == 16 && c.head_dim == 128 && c.qk_norm && !c.qkv_bias);
    zero_error err = {{0}};
    ZT_EQ_INT(dec_config_check_seq(&c, 17, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "17") && strstr(err.msg, "sliding_window 16") && strstr(err.msg, "not supported yet"),
              "message: %s", err.msg);
    ZT_OK(dec_config_check_seq(&c, 16, NULL));
    ZT_CHECK(dec_layer_window(&c, 0) == 0 && dec_layer_window(&c, 1) == 0); /* Qwen's: not computed */
    /* Mistral's window on every layer, computed at any length */
    c = parse_ok("{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"num_hidden_layers\": 3, \"sliding_window\": 5}");
    ZT_OK(dec_config_check_seq(&c, 64, NULL));
    ZT_CHECK(dec_layer_window(&c, 0) == 5 && dec_layer_window(&c, 2) == 5);
    { /* the step's FLOPs count the pairs the window leaves: 5*6/2 + (64 - 5)*5 of 64*65/2 a layer */
        dec_config full = c;
        full.sliding_window = 0;
        const double per_pair = 3.0 * 4.0 * 2 * c.n_head * c.head_dim * c.n_layer;
        const double d = dec_step_flops(&full, 2, 64) - dec_step_flops(&c, 2, 64);
        ZT_CHECKF(fabs(d - per_pair * (64.0 * 65 / 2 - (5.0 * 6 / 2 + 59.0 * 5))) <= 1e-9 * d, "flops %g", d);
    }
    c = parse_ok("{" LLAMA "}");
    ZT_CHECK(dec_layer_window(&c, 0) == 0);
    /* GPT-2: defaults and n_inner */
    c = parse_ok("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 48, \"n_head\": 4, \"n_layer\": 3, "
                 "\"vocab_size\": 99, \"n_positions\": 32}");
    ZT_CHECK(c.arch == DEC_ARCH_GPT2 && c.n_inner == 192 && c.head_dim == 12 && c.tied && c.norm_eps == 1e-5);
    c = parse_ok("{\"model_type\": \"gpt2\", \"n_inner\": 100}");
    ZT_CHECK(c.n_embd == 768 && c.n_inner == 100 && c.vocab == 50257);
    /* dropout: accepted, with a note */
    char *notes = NULL;
    ZT_OK(dec_config_from_json(&c, "{\"model_type\": \"gpt2\", \"resid_pdrop\": 0.1, \"attn_pdrop\": 0.05}", &notes, NULL));
    ZT_CHECKF(notes && strstr(notes, "resid_pdrop 0.1") && strstr(notes, "attn_pdrop 0.05") && strstr(notes, "without dropout"),
              "notes: %s", notes ? notes : "(none)");
    free(notes);
    notes = NULL;
    ZT_OK(dec_config_from_json(&c, "{" LLAMA "}", &notes, NULL));
    ZT_CHECK(notes == NULL);
}

static void test_refusals(void) {
    parse_bad("[1]", "not a JSON object", NULL);
    parse_bad("{\"architectures\": [\"PhiForCausalLM\"]}", "architectures [\"PhiForCausalLM\"]", "LlamaForCausalLM");
    parse_bad("{\"architectures\": [\"LlamaModel\"]}", "architectures [\"LlamaModel\"]", NULL);
    parse_bad("{\"model_type\": \"phi\"}", "model_type \"phi\"", NULL);
    parse_bad("{\"model_type\": \"gemma3\"}", "model_type \"gemma3\"", NULL); /* the multimodal wrapper */
    parse_bad("{}", "model_type (missing)", NULL);
    parse_bad("{" LLAMA ", \"hidden_act\": \"gelu\"}", "hidden_act \"gelu\"", "silu");
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}", "rope_scaling.rope_type \"yarn\"", NULL);
    parse_bad("{" LLAMA ", \"rope_parameters\": {\"rope_type\": \"longrope\"}}", "rope_parameters.rope_type \"longrope\"", NULL);
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}}", "rope_scaling.type \"dynamic\"", NULL);
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"linear\"}}", "rope_scaling.factor (missing)", NULL);
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
              "\"high_freq_factor\": 1, \"original_max_position_embeddings\": 16}}", "high_freq_factor 1", "low_freq_factor");
    /* a factor without a type: transformers 4 cannot build it, 5 drops the factor */
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"factor\": 8.0}}", "rope_scaling {\"factor\":8}", "\"rope_type\"");
    parse_bad("{" LLAMA ", \"rope_parameters\": {\"rope_type\": null, \"factor\": 2}}", "rope_parameters {", "\"linear\"");
    /* llama3 needs every key transformers' validation requires, original_max_position_embeddings too */
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
              "\"high_freq_factor\": 4}}", "rope_scaling.original_max_position_embeddings (missing)", "whole number");
    /* both forms that disagree: in the type, the factor, or the theta one of them holds */
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
              "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 16}, "
              "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2}}",
              "rope_parameters {\"rope_type\":\"linear\",\"factor\":2}", "rope_scaling {\"rope_type\":\"llama3\"");
    parse_bad("{" LLAMA ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}, "
              "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4}}", "rope_parameters", "rope_scaling");
    parse_bad("{" LLAMA ", \"rope_theta\": 500, \"rope_scaling\": {\"rope_type\": \"default\"}, "
              "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}", "rope_parameters", "rope_scaling");
    /* the stored dtype */
    parse_bad("{" LLAMA ", \"dtype\": \"float7\"}", "dtype \"float7\"", "\"float32\", \"bfloat16\" or \"float16\"");
    parse_bad("{" LLAMA ", \"torch_dtype\": 5}", "torch_dtype 5", "\"float16\"");
    parse_bad("{" LLAMA ", \"torch_dtype\": \"float64\"}", "torch_dtype \"float64\"", NULL);
    parse_bad("{" LLAMA ", \"torch_dtype\": \"auto\"}", "torch_dtype \"auto\"", NULL);
    parse_bad("{" LLAMA ", \"torch_dtype\": \"float32\", \"dtype\": \"bfloat16\"}", "dtype \"bfloat16\"",
              "torch_dtype's \"float32\"");
    parse_bad("{" LLAMA ", \"partial_rotary_factor\": 0.5}", "partial_rotary_factor 0.5", NULL);
    parse_bad("{" LLAMA ", \"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.25}}",
              "rope_parameters.partial_rotary_factor 0.25", NULL);
    parse_bad("{" LLAMA ", \"num_key_value_heads\": 3}", "num_key_value_heads 3", "divisor");
    parse_bad("{" LLAMA ", \"head_dim\": 7}", "head_dim 7", "even");
    parse_bad("{\"model_type\": \"llama\", \"hidden_size\": 60, \"num_attention_heads\": 8}", "hidden_size 60", "multiple");
    parse_bad("{\"model_type\": \"llama\", \"num_hidden_layers\": 2.5}", "num_hidden_layers 2.5", "integer");
    parse_bad("{\"model_type\": \"llama\", \"vocab_size\": \"100\"}", "vocab_size \"100\"", NULL);
    parse_bad("{" LLAMA ", \"tie_word_embeddings\": 1}", "tie_word_embeddings 1", "true or false");
    parse_bad("{" LLAMA ", \"quantization_config\": {\"quant_method\": \"bitsandbytes\"}}", "quant_method \"bitsandbytes\"",
              "--quantize-base");
    parse_bad("{" LLAMA ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}}", "quant_method \"gptq\"",
              "not read yet");
    parse_bad("{" LLAMA ", \"quantization_config\": {\"bits\": 4}}", "quantization_config {\"bits\":4}", "bf16");
    parse_bad("{\"model_type\": \"gpt2\", \"activation_function\": \"relu\"}", "activation_function \"relu\"", "gelu_new");
    parse_bad("{\"model_type\": \"gpt2\", \"scale_attn_by_inverse_layer_idx\": true}", "scale_attn_by_inverse_layer_idx true", NULL);
    parse_bad("{\"model_type\": \"gpt2\", \"add_cross_attention\": true}", "add_cross_attention true", NULL);
    parse_bad("{\"model_type\": \"gpt2\", \"n_embd\": 50, \"n_head\": 4}", "n_embd 50", "n_head");
    parse_bad("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, \"num_attention_heads\": 4, "
              "\"num_hidden_layers\": 2, \"layer_types\": [\"full_attention\", \"chunked_attention\"]}",
              "layer_types \"chunked_attention\"", NULL);
}

static void test_llama_table(void) {
    dec_config c;
    ZT_OK(dec_config_preset(&c, "qwen2.5-0.5b", NULL));
    char name[32];
    ZT_CHECK(!strcmp(dec_unit_name(&c, 0, name, sizeof name), "embed_tokens"));
    ZT_CHECK(!strcmp(dec_unit_name(&c, 3, name, sizeof name), "layers.2"));
    ZT_CHECK(!strcmp(dec_unit_name(&c, c.n_layer + 1, name, sizeof name), "norm"));
    int prev_unit = -1, found = 0;
    uint64_t next_off = 0, total = 0;
    for (int i = 0; i < dec_num_tensors(&c); i++) {
        dec_param_desc d;
        ZT_OK(dec_tensor_desc(&c, i, &d));
        if (d.unit != prev_unit) {
            if (prev_unit >= 0) ZT_EQ_INT(next_off, dec_unit_numel(&c, prev_unit));
            ZT_EQ_INT(d.unit, prev_unit + 1);
            prev_unit = d.unit;
            next_off = 0;
        }
        ZT_EQ_INT(d.offset, next_off);
        next_off += d.numel;
        total += d.numel;
        ZT_EQ_INT(!!(d.flags & ZERO_PARAM_NO_DECAY), d.ndim == 1);
        if (!strcmp(d.name, "model.layers.5.self_attn.k_proj.weight"))
            { found++; ZT_CHECK(d.shape[0] == 128 && d.shape[1] == 896 && d.unit == 6); } /* (KV, C): Linear (out, in) */
        if (!strcmp(d.name, "model.layers.5.self_attn.k_proj.bias")) { found++; ZT_CHECK(d.shape[0] == 128); }
        if (!strcmp(d.name, "model.layers.0.mlp.down_proj.weight")) { found++; ZT_CHECK(d.shape[0] == 896 && d.shape[1] == 4864); }
        if (!strcmp(d.name, "model.norm.weight")) { found++; ZT_CHECK(d.unit == c.n_layer + 1); }
        ZT_CHECK(strcmp(d.name, "lm_head.weight")); /* tied: no head of its own */
    }
    ZT_EQ_INT(found, 4);
    ZT_EQ_INT(total, dec_num_params(&c));
    /* init: weights N(0, initializer_range), norms 1, biases 0 */
    c.n_layer = 1, c.vocab = 512;
    float *u = malloc(dec_unit_numel(&c, 1) * sizeof(float));
    dec_init_unit(&c, 1, 9, u);
    dec_param_desc d;
    double s = 0, s2 = 0;
    for (int i = 0; i < dec_num_tensors(&c); i++) {
        dec_tensor_desc(&c, i, &d);
        if (d.unit != 1) continue;
        const float *p = u + d.offset;
        if (strstr(d.name, "layernorm")) ZT_CHECK(p[0] == 1.0f && p[d.numel - 1] == 1.0f);
        if (strstr(d.name, "bias")) ZT_CHECK(p[0] == 0.0f && p[d.numel - 1] == 0.0f);
        if (!strcmp(d.name, "model.layers.0.mlp.up_proj.weight"))
            for (uint64_t k = 0; k < d.numel; k++) s += p[k], s2 += (double)p[k] * p[k];
    }
    dec_tensor_desc(&c, 0, &d);
    const double n = 4864.0 * 896.0, sd = sqrt(s2 / n);
    ZT_CHECKF(fabs(sd - 0.02) < 2e-4 && fabs(s / n) < 1e-4, "up_proj init: mean %.3g std %.5f", s / n, sd);
    free(u);
}

static void test_activation_bytes(void) {
    const char *names[] = {"tiny", "qwen2.5-0.5b"};
    for (int i = 0; i < 2; i++) {
        dec_config c;
        dec_config_preset(&c, names[i], NULL);
        c.n_layer = 2;
        if (i) c.vocab = 1000, c.qk_norm = 1; /* every optional buffer */
        for (int ck = 0; ck < 2; ck++) {
            dec_model *m = NULL;
            ZT_OK(dec_create(&m, &c, 2, 24, ck, NULL));
            if (!m) continue;
            ZT_EQ_INT(dec_activation_bytes_allocated(m), dec_activation_bytes(&c, 2, 24, ck));
            dec_free(m);
        }
    }
}


#define GEMMA3 "\"model_type\": \"gemma3_text\", \"hidden_size\": 32, \"intermediate_size\": 48, " \
               "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, " \
               "\"vocab_size\": 64, \"max_position_embeddings\": 64"
#define PHI3 "\"model_type\": \"phi3\", \"hidden_size\": 96, \"intermediate_size\": 48, \"num_hidden_layers\": 2, " \
             "\"num_attention_heads\": 4, \"vocab_size\": 64, \"max_position_embeddings\": 64"

/* Gemma and Phi-3: transformers' defaults, both Gemma 3 RoPE forms alike, the Gemma 2 pattern, Phi-3's
 * partial RoPE and LongRoPE's attention factor; every sub-feature zero does not compute refused. */
static void test_gemma_phi3(void) {
    dec_config g = parse_ok("{\"model_type\": \"gemma2\", \"num_hidden_layers\": 4}");
    ZT_CHECK(g.arch == DEC_ARCH_GEMMA2 && g.gemma && g.sandwich && !g.qk_norm && g.tied && g.head_dim == 256);
    ZT_CHECK(g.attn_softcap == 50.0 && g.final_softcap == 30.0 && g.attn_scalar == 256 && g.sliding_pattern == 2);
    ZT_CHECK(g.sliding_window == 4096 && g.n_embd == 2304 && g.vocab == 256000 && g.norm_eps == 1e-6);
    g = parse_ok("{\"model_type\": \"gemma\", \"hidden_act\": \"gelu\"}"); /* Gemma 1's legacy name of the tanh GELU */
    ZT_CHECK(g.gemma && !g.sandwich && g.attn_scalar == 0 && g.attn_softcap == 0 && g.sliding_window == 0);
    /* Gemma 3: the published form (rope_theta, rope_local_base_freq, rope_scaling, sliding_window_pattern)
     * and transformers 5's (rope_parameters per layer type, layer_types) are one model */
    const dec_config a = parse_ok("{" GEMMA3 ", \"rope_theta\": 1e6, \"rope_local_base_freq\": 1e4, \"sliding_window\": 32, "
                                  "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}, \"sliding_window_pattern\": 2}");
    const dec_config b = parse_ok("{" GEMMA3 ", \"sliding_window\": 32, \"layer_types\": [\"sliding_attention\", "
                                  "\"full_attention\", \"sliding_attention\", \"full_attention\"], \"rope_parameters\": "
                                  "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, \"rope_theta\": 1e6}, "
                                  "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}}}");
    ZT_CHECK(dec_config_equal(&a, &b) && a.qk_norm && a.sliding_pattern == 2 && a.rope_local_theta == 1e4);
    ZT_CHECK(a.rope_type == DEC_ROPE_LINEAR && a.rope_factor == 8.0 && a.rope_theta == 1e6);
    /* which layers have the window (transformers' layer_types): Gemma 3 pattern 2 and Gemma 2 every
     * other layer, the n-th global; Gemma 3's default pattern 6; none with sliding_window null */
    ZT_CHECK(dec_layer_window(&a, 0) == 32 && dec_layer_window(&a, 1) == 0 && dec_layer_window(&a, 2) == 32 &&
             dec_layer_window(&a, 3) == 0);
    ZT_OK(dec_config_check_seq(&a, 64, NULL));
    g = parse_ok("{\"model_type\": \"gemma2\", \"num_hidden_layers\": 3, \"sliding_window\": 7}");
    ZT_CHECK(dec_layer_window(&g, 0) == 7 && dec_layer_window(&g, 1) == 0 && dec_layer_window(&g, 2) == 7);
    g = parse_ok("{" GEMMA3 ", \"num_hidden_layers\": 7, \"sliding_window\": 512}");
    for (int l = 0; l < 7; l++) ZT_EQ_INT(dec_layer_window(&g, l), l == 5 ? 0 : 512);
    g = parse_ok("{\"model_type\": \"gemma2\", \"sliding_window\": null}");
    ZT_CHECK(dec_layer_window(&g, 0) == 0);
    /* Phi-3 */
    dec_config p = parse_ok("{" PHI3 ", \"partial_rotary_factor\": 0.75}");
    ZT_CHECK(p.arch == DEC_ARCH_PHI3 && p.fused_names && p.head_dim == 24 && p.rotary_dim == 18 && !p.tied);
    p = parse_ok("{" PHI3 ", \"original_max_position_embeddings\": 16, \"rope_scaling\": {\"type\": \"longrope\", "
                 "\"short_factor\": [1,1,1,1,1,1,1,1,1,1,1,1], \"long_factor\": [2,2,2,2,2,2,2,2,2,2,2,2]}}");
    ZT_CHECK(p.rope_type == DEC_ROPE_LONGROPE && p.rope_orig_ctx == 16 && p.rope_n_factors == 12);
    ZT_CHECK(fabs(p.rope_attn_factor - sqrt(1.0 + log(4.0) / log(16.0))) < 1e-15 && p.rope_long[11] == 2.0);
    ZT_CHECK(dec_layer_window(&p, 0) == 0); /* Phi3Config's default: no window */
    dec_config pw = parse_ok("{" PHI3 ", \"sliding_window\": 2047}"); /* Phi-3-mini-4k's */
    ZT_CHECK(dec_layer_window(&pw, 0) == 2047 && dec_layer_window(&pw, 1) == 2047);
    char *out = dec_config_to_json(&p, NULL, NULL);
    dec_config q = parse_ok(out);
    ZT_CHECKF(dec_config_equal(&p, &q), "phi3 out and back: %s", out);
    free(out);
    out = dec_config_to_json(&a, NULL, NULL);
    q = parse_ok(out);
    ZT_CHECKF(dec_config_equal(&a, &q), "gemma3 out and back: %s", out);
    free(out);
    /* a base config.json whose float keys repeat (the grammar allows it): each number is written
     * back with its point, once, and the writer ends (it looped, replacing the first by name) */
    out = dec_config_to_json(&p, "{\"rope_theta\": 1, \"factor\": 2, \"rope_theta\": 3, \"factor\": [4]}", NULL);
    ZT_CHECKF(out && strstr(out, "\"rope_theta\": 1.0,") && strstr(out, "\"rope_theta\": 3.0,") &&
                  strstr(out, "\"factor\": 2.0,") && strstr(out, "4.0"),
              "repeated float keys: %s", out ? out : "(null)");
    free(out);
    /* a float past the double range (2e500: in the grammar, read as an infinity) in a key zero does
     * not use: written back as 1e999, which is JSON and reads back (it wrote "inf": the fuzzer's find) */
    out = dec_config_to_json(&p, "{\"rope_theta\": 1e4, \"factor\": 2e500, \"attention_factor\": -2e500}", NULL);
    ZT_CHECKF(out && strstr(out, "\"factor\": 1e999,") && strstr(out, "-1e999") && !strstr(out, "inf"),
              "an infinite float: %s", out ? out : "(null)");
    free(out);
    const char *inf_base = "{" PHI3 ", \"factor\": 2e500}";
    dec_config pi = parse_ok(inf_base);
    out = dec_config_to_json(&pi, inf_base, "bfloat16");
    q = parse_ok(out ? out : "");
    ZT_CHECKF(dec_config_equal(&pi, &q), "phi3 with an infinite float out and back: %s", out ? out : "(null)");
    free(out);
    /* refusals: what zero does not compute, named and never ignored */
    parse_bad("{" GEMMA3 ", \"layer_types\": [\"full_attention\", \"sliding_attention\", \"sliding_attention\", "
              "\"sliding_attention\"]}", "config.json layer_types", "is not supported yet");
    parse_bad("{" GEMMA3 ", \"use_bidirectional_attention\": true}", "use_bidirectional_attention true", "not supported yet");
    parse_bad("{" GEMMA3 ", \"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2, "
              "\"rope_theta\": 1e4}}}", "rope_parameters.sliding_attention", "not supported yet");
    parse_bad("{\"model_type\": \"gemma2\", \"hidden_activation\": \"gelu\"}", "hidden_activation \"gelu\"", "gelu_pytorch_tanh");
    parse_bad("{\"model_type\": \"gemma2\", \"attn_logit_softcapping\": -1}", "attn_logit_softcapping -1", NULL);
    parse_bad("{" PHI3 ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1], \"long_factor\": [1, 1]}}",
              "rope_scaling.short_factor", "12 positive numbers");
    parse_bad("{" PHI3 ", \"partial_rotary_factor\": 0.01}", "partial_rotary_factor 0.01", "even");
    parse_bad("{" LLAMA ", \"partial_rotary_factor\": 0.5}", "partial_rotary_factor 0.5", "whole head");
    parse_bad("{" PHI3 ", \"pad_token_id\": 64}", "pad_token_id 64", "[0, 64)");
}

int main(void) {
    test_presets();
    test_parse();
    test_refusals();
    test_gemma_phi3();
    test_llama_table();
    test_activation_bytes();
    return zt_finish("test_decoder_config");
}
