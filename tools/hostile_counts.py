#!/usr/bin/env python3
"""How many hostile inputs of each class the suite and the fuzzers try, counted from the
tests and the fuzz seeds themselves, so that docs/reliability.md's table stays true.

    tools/hostile_counts.py            print the table
    tools/hostile_counts.py --write    put it into docs/reliability.md (between its markers)
    tools/hostile_counts.py --check    exit 1 when docs/reliability.md's table is not this one

What is counted, per class (CLASSES below: which test cases, scenarios and fuzz targets
belong to it):
  - refusal checks in the Catch2 suite (tests/test_*.cpp): assertions that a hostile input is
    refused, i.e. a REQUIRE/CHECK of a THROWS, or of a helper that returns a refusal's message
    (a name holding refus, reject, error or bad_); a TEST_CASE belongs to the first class
    whose (file, name) rule matches it;
  - refusal checks in the command-line scenarios (tests/cli/*_test.sh): expect_error and
    expect_usage_error calls (one line on stderr, the exit code asserted); a scenario belongs
    to the first class whose (script, scenario) rule matches it;
  - scenarios: those of the class (each runs the real binary on a hostile input or event:
    a signal, a kill, a full disk, a planted link);
  - fuzz seeds: files of fuzz/corpus/TARGET for the class's targets, and findings kept in
    fuzz/regressions/TARGET (replayed by tests/test_fuzz_regressions.cpp).
A check inside a loop over a list of inputs (a list written in the test case, in the loop or
by name) counts once for each of them; one over inputs made otherwise counts once.
Standard library only.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
BEGIN = "<!-- hostile_counts.py: begin -->"
END = "<!-- hostile_counts.py: end -->"

ANY = r""  # a name rule that matches every test case or scenario


# (class, where it is handled, Catch2 rules [(file glob, name regex)], scenario rules
# [(script, scenario regex)], fuzz targets). Order matters: the first matching rule wins.
CLASSES = [
    ("JSON of every reader (depth, duplicate keys, sizes, NUL, trailing bytes; linear time)",
     "`base/json.h`, `interop/json_stream.h`",
     [("test_json.cpp", ANY), ("test_*.cpp", r"\bJSON\b")], [], []),
    ("split patterns (lookaheads, backreferences, backtracking, run scans)",
     "`data/pretokenize.h`",
     [("test_bpe*.cpp", r"(?i)pattern")], [], []),
    ("tokenizer files and text (vocabularies, merges, tokenizer.json, UTF-8)",
     "`data/bpe.h`, `data/gpt2_files.cpp`, `interop/tokenizer_json.cpp`, `base/utf8.h`",
     [("test_bpe*.cpp", ANY), ("test_gpt2_tokenizer.cpp", ANY), ("test_hf_bpe.cpp", ANY),
      ("test_hf_tokenizer_json.cpp", ANY), ("test_special_tokens.cpp", ANY),
      ("test_end_of_text.cpp", ANY),
      ("test_utf8.cpp", ANY), ("test_data.cpp", r"(?i)tokeni|character|vocabular|decod")],
     [("data_test.sh", r"encode|bpe_checkpoint"), ("interop_test.sh", r"tokenizer")],
     ["tokenizer", "tokenizer_file", "gpt2_files", "hf_tokenizer_json"]),
    ("memory: plans that cannot fit, files that amplify memory, ulimit -v",
     "`train/memory_plan.h` (`memory_shortfall`), `interop/import_memory.h`",
     [("test_hostile_input.cpp", r"(?i)memory|cgroup"), ("test_*.cpp", r"(?i)bounded memory")],
     [("interop_test.sh", r"hostile_memory"), ("cli_test.sh", r"memory_refused"),
      ("data_test.sh", r"address_space|bounded"), ("sample_test.sh", r"huge_context|bounded"),
      ("choice_test.sh", r"bounded_memory")], []),
    ("checkpoints (links, external storage, sizes, sections, history, optimiser state, libhdf5)",
     "`io/checkpoint_reader.cpp`",
     [("test_checkpoint*.cpp", ANY), ("test_hostile_checkpoint.cpp", ANY),
      ("test_run_history.cpp", ANY), ("test_packed_checkpoints.cpp", ANY),
      ("test_optim.cpp", r"(?i)state"),
      ("test_hostile_input.cpp", r"(?i)checkpoint")],
     [("edges_test.sh", r"gradient_dump|optimizer_state|packed_blocks"), ("cli_test.sh", r"sample_eval_inspect")],
     ["checkpoint"]),
    ("safetensors files and Hugging Face folders (config.json, index, shards, hub cache, links)",
     "`interop/safetensors.cpp`, `interop/hf_folder.cpp`, `interop/hf_gpt2.cpp`, "
     "`interop/hf_llama.cpp`",
     [("test_safetensors.cpp", ANY), ("test_hf_import.cpp", ANY), ("test_hf_llama.cpp", ANY),
      ("test_llama_family.cpp", ANY)],
     [("interop_test.sh", r"import_errors|hub_cache|links")], ["safetensors", "hf_llama_config"]),
    ("GGUF files", "`interop/gguf_format.cpp`, `interop/gguf.cpp`",
     [("test_interop_gguf*.cpp", ANY)], [("interop_test.sh", r"gguf")], ["gguf"]),
    ("LoRA adapters (peft folders, GGUF adapters) and the base they are put on",
     "`interop/lora_adapter.cpp`, `interop/peft.cpp`, `interop/gguf_lora.cpp`",
     [("test_lora_adapters.cpp", ANY)], [("interop_test.sh", r"adapter")], ["gguf_lora"]),
    ("llm.c files", "`interop/llmc.cpp`, `interop/input_bytes.cpp`",
     [("test_interop_llmc.cpp", ANY)], [("interop_test.sh", r"llmc")], ["llmc"]),
    ("prepared folders and token files (meta.json, hashes, ids, damage under a run)",
     "`data/prepared.cpp`, `data/token_store.cpp`, `data/token_hashes.cpp`",
     [("test_prepared*.cpp", ANY), ("test_data.cpp", ANY)],
     [("data_test.sh", r"prepare_errors|damaged|verify"), ("mpi_test.sh", r"damaged")],
     ["prepared_meta"]),
    ("task data (instruction, chat, classification and multiple-choice files)",
     "`data/json_records.cpp`, `data/chat_data.cpp`, `data/classification_data.cpp`, "
     "`data/choice_items.cpp`",
     [("test_instruction_data.cpp", ANY), ("test_chat.cpp", ANY),
      ("test_classification.cpp", ANY), ("test_multiple_choice.cpp", ANY)],
     [("instruct_test.sh", r"errors"), ("chat_test.sh", r"errors"),
      ("classify_test.sh", r"errors"), ("choice_test.sh", r"errors")],
     ["instruction_data", "classification_data", "choice_items"]),
    ("configs and the command line (options, config files, values out of range)",
     "`cli/options.cpp`, `nn/config.cpp`, `train/config.cpp`",
     [("test_config_file.cpp", ANY), ("test_cli_forgiving.cpp", ANY),
      ("test_hostile_input.cpp", r"(?i)config|hyperparameter|misspelt"),
      ("test_optim.cpp", r"(?i)hyperparameter"), ("test_lora.cpp", r"(?i)refused"),
      ("test_fine_tuning_controls.cpp", ANY), ("test_safetensors_shards.cpp", ANY)],
     [("cli_test.sh", r"usage_errors|bad_values|exit_codes|init_from"),
      ("forgiving_test.sh", ANY), ("edges_test.sh", ANY), ("lora_test.sh", r"errors"),
      ("finetune_test.sh", ANY), ("sample_test.sh", r"options"), ("report_test.sh", r"errors")],
     ["config"]),
    ("metrics files", "`report/metrics_log.cpp`", [("test_metrics_log.cpp", ANY)], [], []),
    ("the GEMM kernel cache (foreign, stale or lying entries)", "`autograd/ops/gemm_tuning.cpp`",
     [("test_gemm_tuning.cpp", ANY), ("test_bf16_fallback.cpp", ANY)],
     [("cli_test.sh", r"kernel_cache|bf16_fallback"), ("mpi_test.sh", r"kernels_agree")], []),
    ("locks (a second writer, lock files planted or left behind)",
     "`io/files.h`, `base/posix_file.h`",
     [("test_files.cpp", r"(?i)lock|second writer"), ("test_output_rule.cpp", r"(?i)being written")],
     [("cli_test.sh", r"one_writer|lock")], []),
    ("outputs (inputs as outputs, replaced files, links, partial files, full disks)",
     "`io/output_rule.h`, `io/files.h`, `base/atomic_file.h`, `base/partial_outputs.h`",
     [("test_files.cpp", ANY), ("test_output_rule.cpp", ANY)],
     [("cli_test.sh", r"outputs|partial|unwritable|folder|disk_full|kill9|hostile_folder|escapes"),
      ("rerun_test.sh", r"holds_another")], []),
    ("signals, kills and MPI launches (Ctrl-C to mpirun, a killed rank, ranks that disagree)",
     "`train/stop_signals.cpp`, `train/launcher_stop.cpp`, `train/world.cpp`",
     [("test_hostile_input.cpp", r"(?i)signal"), ("test_launcher_stop.cpp", ANY),
      ("test_output_rule.cpp", r"(?i)signal")],
     [("cli_test.sh", r"sig|stop_whatever|closed_stdout|nan_stops"),
      ("mpi_test.sh", r"sig|ctrl_c|killed|options_disagree|errors_once")], []),
]


def string_literals(text):
    """The C++ string literals at the start of text, joined (a TEST_CASE's name)."""
    name, pos = "", 0
    while True:
        m = re.compile(r'\s*"((?:[^"\\]|\\.)*)"').match(text, pos)
        if not m:
            return name
        name, pos = name + m.group(1), m.end()


# a string literal, or a character literal (one character or one escape: an apostrophe in a
# comment is not one)
LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\[^\n][0-9a-fA-F]{0,3})\'')


def balanced(text, start):
    """text[start:] up to the parenthesis that closes the one at or after start."""
    depth, i = 0, text.index("(", start)
    while i < len(text):
        c = text[i]
        if c in "\"'" and LITERAL.match(text, i):
            i = LITERAL.match(text, i).end()
            continue
        depth += c == "("
        depth -= c == ")"
        if depth == 0:
            return text[start:i + 1]
        i += 1
    return text[start:]


ASSERTION = re.compile(r"\b(?:REQUIRE|CHECK)(?:_[A-Z_]+)?\s*\(")
REFUSAL = re.compile(r"THROWS|\b\w*(?:refus|reject|error|bad_)\w*\s*\(", re.I)
RANGE_FOR = re.compile(r"\bfor\s*\(")


def skip_literal(text, i):
    """The index after the string or character literal at text[i], or i + 1."""
    m = LITERAL.match(text, i)
    return m.end() if m else i + 1


def closing(text, i):
    """The index after the bracket that closes the one at text[i]."""
    pairs, depth = {"(": ")", "{": "}", "[": "]"}, []
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = skip_literal(text, i)
            continue
        if c in pairs:
            depth.append(pairs[c])
        elif depth and c == depth[-1]:
            depth.pop()
            if not depth:
                return i + 1
        i += 1
    return len(text)


def elements(braced):
    """How many top-level items a {...} list holds."""
    inner, n, i, depth = braced[1:-1], 0, 0, 0
    seen = False
    while i < len(inner):
        c = inner[i]
        if c in "\"'":
            i, seen = skip_literal(inner, i), True
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            n += 1
        elif not c.isspace():
            seen = True
        i += 1
    return n + 1 if seen and inner.strip() else n


def list_loops(block):
    """(body start, body end, items) of each range-for over a list literal, or over a name
    the test case defines as one (NAME = {...} or NAME{...})."""
    for m in RANGE_FOR.finditer(block):
        head_end = closing(block, m.end() - 1)
        head = block[m.end():head_end - 1]
        if ":" not in head or ";" in head:
            continue
        source = head.split(":", 1)[1].strip()
        if source.startswith("{"):
            items = elements(source)
        else:
            found = re.search(r"\b" + re.escape(source) + r"(?:\[\])?\s*=?\s*\{", block)
            if not re.fullmatch(r"\w+", source) or not found:
                continue
            items = elements(block[found.end() - 1:closing(block, found.end() - 1)])
        start = len(block) - len(block[head_end:].lstrip())
        end = closing(block, start) if block.startswith("{", start) else block.find(";", start) + 1
        yield start, end, items


def refusal_checks(block):
    """Refusal assertions, each as many times as the lists it loops over hold inputs."""
    loops = list(list_loops(block))
    total = 0
    for m in ASSERTION.finditer(block):
        if not REFUSAL.search(balanced(block, m.start())):
            continue
        times = 1
        for start, end, items in loops:
            times *= items if start <= m.start() < end else 1
        total += times
    return total


def test_cases(path):
    """(name, body) of each TEST_CASE of a Catch2 file."""
    text = path.read_text(encoding="utf-8")
    starts = [m for m in re.finditer(r"\bTEST_CASE\s*\(", text)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        yield string_literals(text[m.end():]), text[m.start():end]


def scenarios(path):
    """(name, body) of each scenario (a case label NAME) at the start of a line)."""
    text = path.read_text(encoding="utf-8")
    labels = list(re.finditer(r"^([a-z0-9_|]+)\)\s*$", text, re.M))
    for i, m in enumerate(labels):
        end = labels[i + 1].start() if i + 1 < len(labels) else len(text)
        yield m.group(1), text[m.end():end]


def first_class(rules_of, path, name):
    for index, rules in enumerate(rules_of):
        for glob, pattern in rules:
            if path.match(glob) and re.search(pattern, name):
                return index
    return None


def count():
    rows = [{"catch": 0, "cli": 0, "scenarios": 0, "seeds": 0, "kept": 0} for _ in CLASSES]
    other = 0
    for path in sorted((ROOT / "tests").glob("test_*.cpp")):
        for name, body in test_cases(path):
            n = refusal_checks(body)
            index = first_class([c[2] for c in CLASSES], path, name)
            if index is None:
                other += n
            else:
                rows[index]["catch"] += n
    for path in sorted((ROOT / "tests" / "cli").glob("*_test.sh")):
        for name, body in scenarios(path):
            index = first_class([c[3] for c in CLASSES], path, name)
            if index is None:
                continue
            rows[index]["scenarios"] += 1
            rows[index]["cli"] += len(re.findall(r"^\s*expect_(?:usage_)?error\b", body, re.M))
    for row, spec in zip(rows, CLASSES):
        for target in spec[4]:
            row["seeds"] += sum(1 for f in (ROOT / "fuzz" / "corpus" / target).glob("*") if f.is_file())
            kept = ROOT / "fuzz" / "regressions" / target
            row["kept"] += sum(1 for f in kept.glob("*") if f.is_file()) if kept.is_dir() else 0
    return rows, other


def table():
    rows, other = count()
    lines = ["| class | where | refusal checks: Catch2 | command line | scenarios | fuzz targets: "
             "seeds (findings kept) |",
             "|---|---|---:|---:|---:|---|"]
    for row, (name, where, _, _, targets) in zip(rows, CLASSES):
        fuzz = ", ".join(targets) if targets else "none"
        if targets:
            fuzz += f": {row['seeds']}" + (f" ({row['kept']})" if row["kept"] else "")
        lines.append(f"| {name} | {where} | {row['catch']} | {row['cli']} | {row['scenarios']} "
                     f"| {fuzz} |")
    total = sum(r["catch"] for r in rows)
    lines.append(f"| (the suite's other refusal checks: tensor operations, modules, generation "
                 f"given wrong shapes, dtypes or indices) | `autograd/`, `nn/` | {other} | | | |")
    lines.append("")
    lines.append(f"Counted by `tools/hostile_counts.py` ({total + other} Catch2 refusal checks in "
                 f"all; `.ci/run` fails when this table is not what it counts).")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="update docs/reliability.md")
    mode.add_argument("--check", action="store_true", help="fail when docs/reliability.md differs")
    args = parser.parse_args()
    counted = table()
    if not (args.write or args.check):
        sys.stdout.write(counted)
        return 0
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        print(f"hostile_counts.py: {DOC} has no '{BEGIN}' ... '{END}' markers", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    updated = head + BEGIN + "\n" + counted + END + tail
    if args.write:
        DOC.write_text(updated, encoding="utf-8")
        return 0
    if updated != doc:
        print("hostile_counts.py: docs/reliability.md's table of hostile inputs is not what the "
              "tests count; run tools/hostile_counts.py --write", file=sys.stderr)
        return 1
    print("hostile counts: docs/reliability.md's table is what the tests count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
