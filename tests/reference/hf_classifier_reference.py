#!/usr/bin/env python3
"""Holds `attograd export --format hf` of a classifier against transformers' sequence classifiers.

usage: hf_classifier_reference.py ATTOGRAD

A classifier trained by `attograd train --task classify` (GPT-2's architecture, and the Llama,
Qwen2 and Qwen3 families') is exported with `attograd export --format hf`; the folder is read
here as transformers' GPT2ForSequenceClassification, LlamaForSequenceClassification,
Qwen2ForSequenceClassification and Qwen3ForSequenceClassification read it, written from their
modeling code in plain PyTorch: the backbone is the causal LM's twin of hf_gpt2_reference.py
(modeling_gpt2) or hf_llama_reference.py (modeling_llama, _qwen2, _qwen3), its weights under
"transformer." or "model."; the head is `score`, a Linear [num_labels, hidden] without a bias,
applied to the hidden state of the last token that is not config.pad_token_id (with no
pad_token_id, the last token; one text at a time). Checked:

  config.json   architectures, num_labels, id2label and label2id in the checkpoint's label
                order, problem_type, pad_token_id (null: a char tokenizer has no end-of-text)
  weights       score.weight [num_labels, hidden], no score.bias, no lm_head.weight
  probabilities softmax of the twin's logits against `attograd classify --json` for the same
                texts (ids from `attograd encode`): max |ours - torch| <= 1e-5

then `attograd import` of the folder is a classifier again, with the same probabilities bit
for bit; and the refusals: a classifier exported as gguf or llmc, one pooling the mean of its tokens,
one whose logits have a bias, each exit 2 with the reason and nothing written.

Exit status 0 when all agree, 1 otherwise, 77 when torch or numpy is unavailable.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import numpy as np
    import torch
    import torch.nn as tnn
except Exception as e:  # not only ImportError: a half-installed torch raises others
    print(f"skipped: torch/numpy unavailable for {sys.executable}: {e!r}")
    sys.exit(SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_gpt2_reference as gpt2_twin  # noqa: E402 (the causal LMs' twins, reused)
import hf_llama_reference as llama_twin  # noqa: E402

PROB_TOL = 1e-5
TEXTS = ["we see a prize at the mat", "the cat sat on a mat", "it is a big prize",
         "go to the sun", "a red prize", "the dog ran under the blue mat"]
WORDS = "the a cat dog sat ran on under mat sun big red blue we go to see it is at".split()

# attograd's model options for each architecture, and the class transformers reads it as
SMALL = ["--context-length", "32", "--d-model", "32", "--n-heads", "4", "--n-layers", "2"]
CASES = {
    "GPT2ForSequenceClassification": [],
    "LlamaForSequenceClassification": ["--position", "rope", "--norm", "rmsnorm", "--mlp", "swiglu",
                                       "--n-kv-heads", "2", "--qkv-bias", "false", "--linear-bias",
                                       "false"],
    "Qwen2ForSequenceClassification": ["--position", "rope", "--norm", "rmsnorm", "--mlp", "swiglu",
                                       "--n-kv-heads", "2", "--qkv-bias", "true", "--linear-bias",
                                       "false"],
    "Qwen3ForSequenceClassification": ["--position", "rope", "--norm", "rmsnorm", "--mlp", "swiglu",
                                       "--n-kv-heads", "1", "--qk-norm", "true", "--qkv-bias", "false",
                                       "--linear-bias", "false"],
}


def run(args, stdin=None, expect=0):
    proc = subprocess.run(args, capture_output=True, text=True, input=stdin)
    if proc.returncode != expect:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}, not {expect}:\n"
                           f"{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def write_set(path, seed):
    """Texts of 3 to 6 words, labelled spam when they hold "prize" (classify_set.awk's rule),
    in the SMS Spam Collection's layout: label<TAB>text, no header."""
    gen = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(200):
            words = list(gen.choice(WORDS, size=int(gen.integers(3, 7))))
            spam = gen.random() < 0.5
            if spam:
                words[int(gen.integers(len(words)))] = "prize"
            f.write(("spam" if spam else "ham") + "\t" + " ".join(words) + "\n")


def read_f32(path):
    out = {}
    for name, (dtype, shape, raw) in llama_twin.read_safetensors_raw(path).items():
        assert dtype == "F32", f"{name} is {dtype}"
        out[name] = torch.from_numpy(np.frombuffer(raw, dtype=np.float32).copy()).view(shape).double()
    return out


class ForSequenceClassification(tnn.Module):
    """transformers' *ForSequenceClassification: the backbone's last hidden states, `score`
    (no bias) at the last token that is not pad_token_id."""

    def __init__(self, backbone_name, backbone, cfg):
        super().__init__()
        setattr(self, backbone_name, backbone)
        self.backbone_name = backbone_name
        self.score = tnn.Linear(backbone_width(cfg), cfg["num_labels"], bias=False)
        self.pad = cfg.get("pad_token_id")

    def forward(self, ids):
        logits = self.score(getattr(self, self.backbone_name)(ids))
        if self.pad is None:
            assert ids.size(0) == 1, "transformers handles one text at a time without pad_token_id"
            last = torch.full((ids.size(0),), ids.size(1) - 1)
        else:
            non_pad = (ids != self.pad).int()
            last = (torch.arange(ids.size(1)) * non_pad).argmax(-1)
        return logits[torch.arange(ids.size(0)), last]


def backbone_width(cfg):
    return cfg.get("n_embd") or cfg["hidden_size"]


def twin_of(cfg):
    arch = cfg["architectures"][0]
    if arch == "GPT2ForSequenceClassification":
        return ForSequenceClassification("transformer", gpt2_twin.Transformer(cfg), cfg)
    family = cfg["model_type"]
    return ForSequenceClassification("model", llama_twin.Model(cfg, family), cfg)


def check_config(case, cfg, labels, failures):
    want = {"architectures": [case], "num_labels": len(labels),
            "id2label": {str(i): l for i, l in enumerate(labels)},
            "label2id": {l: i for i, l in enumerate(labels)},
            "problem_type": "single_label_classification", "pad_token_id": None}
    for key, value in want.items():
        if cfg.get(key, "absent") != value:
            failures.append(f"{case}: config.json {key} is {cfg.get(key, 'absent')!r}, not {value!r}")


def check_weights(case, weights, cfg, failures):
    shape = list(weights["score.weight"].shape) if "score.weight" in weights else None
    if shape != [cfg["num_labels"], backbone_width(cfg)]:
        failures.append(f"{case}: score.weight has shape {shape}")
    for absent in ("score.bias", "lm_head.weight"):
        if absent in weights:
            failures.append(f"{case}: the folder holds {absent}")


def attograd_probabilities(attograd, ckpt, labels):
    lines = run([attograd, "classify", "--checkpoint", ckpt, "--json", "--threads", "1"],
                stdin="\n".join(TEXTS) + "\n").strip().splitlines()
    rows = [json.loads(l) for l in lines if l.startswith("{")]
    return torch.tensor([[r["probabilities"][l] for l in labels] for r in rows], dtype=torch.float64)


def twin_probabilities(attograd, ckpt, model):
    out = []
    for text in TEXTS:
        ids = [int(t) for t in run([attograd, "encode", "--tokenizer", ckpt], stdin=text).split()]
        with torch.no_grad():
            out.append(torch.softmax(model(torch.tensor([ids])), -1)[0])
    return torch.stack(out)


def run_case(tmp, attograd, data, case, options, failures):
    ckpt, out = os.path.join(tmp, case + ".h5"), os.path.join(tmp, case)
    run([attograd, "train", "--task", "classify", "--data", data, "--tokenizer", "char", *SMALL, *options,
         "--steps", "40", "--batch-size", "16", "--lr", "3e-3", "--warmup-steps", "5", "--threads", "1",
         "--sample-tokens", "0", "--eval-interval", "0", "--dropout", "0", "--out", ckpt])
    run([attograd, "export", "--checkpoint", ckpt, "--format", "hf", "--out", out])
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    labels = ["ham", "spam"]  # sorted: the checkpoint's order
    check_config(case, cfg, labels, failures)
    weights = read_f32(os.path.join(out, "model.safetensors"))
    check_weights(case, weights, cfg, failures)
    model = twin_of(cfg).double()
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        failures.append(f"{case}: the folder's tensors do not fit transformers' layout: missing "
                        f"{missing}, unexpected {unexpected}")
        return
    ours, torch_p = attograd_probabilities(attograd, ckpt, labels), twin_probabilities(attograd, ckpt, model)
    err = (ours - torch_p).abs().max().item()
    print(f"{case}: max |p_attograd - p_torch| = {err:.2e} over {len(TEXTS)} texts")
    if not err <= PROB_TOL:
        failures.append(f"{case}: probabilities differ by {err:.2e} (> {PROB_TOL})\n{ours}\n{torch_p}")
    back = os.path.join(tmp, case + "_imported.h5")
    run([attograd, "import", out, "--out", back])
    again = attograd_probabilities(attograd, back, labels)
    if not torch.equal(again, ours):
        failures.append(f"{case}: imported back, the classifier gives other probabilities "
                        f"({(again - ours).abs().max().item():.2e})")


def check_refusals(tmp, attograd, data, failures):
    base = [attograd, "train", "--task", "classify", "--data", data, "--tokenizer", "char", *SMALL,
            "--steps", "2", "--threads", "1", "--sample-tokens", "0", "--eval-interval", "0"]
    run(base + ["--out", os.path.join(tmp, "plain.h5")])
    run(base + ["--pool", "mean", "--out", os.path.join(tmp, "mean.h5")])
    run(base + ["--classifier-bias", "true", "--out", os.path.join(tmp, "bias.h5")])
    refusals = [("plain.h5", "gguf", "GGUF's architectures (llama.cpp's) are language models"),
                ("plain.h5", "llmc", "llm.c's file holds GPT-2's language model"),
                ("mean.h5", "hf", "reads the mean of its tokens' states (pool mean)"),
                ("bias.h5", "hf", "adds a bias to its logits (classifier.bias)")]
    for ckpt, fmt, reason in refusals:
        out = os.path.join(tmp, f"refused_{ckpt}.{fmt}")
        said = run([attograd, "export", "--checkpoint", os.path.join(tmp, ckpt), "--format", fmt,
                    "--out", out], expect=2)
        if reason not in said or os.path.exists(out):
            failures.append(f"export of {ckpt} as {fmt}: not refused with '{reason}' or left {out}: {said}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    attograd = sys.argv[1]
    failures = []
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "SMSSpamCollection")
        write_set(data, 7)
        for case, options in CASES.items():
            run_case(tmp, attograd, data, case, options, failures)
        check_refusals(tmp, attograd, data, failures)
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
