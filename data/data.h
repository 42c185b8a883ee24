#pragma once
// Text in, token ids out: the map of data/. UTF-8 is decoded by base/utf8.h.
//   tokenizer.h  the char tokenizer of docs/model.md and a byte tokenizer
//   pretokenize.h  cutting text into pieces with a PCRE2 split pattern (GPT-4's), streamed;
//                a pattern that would make it slower than linear is refused
//   bpe.h        the byte-level BPE tokenizer: training, encoding, a stream encoder
//   gpt2_tokenizer.h  GPT-2's tokenizer (byte tokens in GPT-2's order, special tokens), the
//                byte-level form other tools' files use, GPT-2's files and tokenizer.json
//   hf_bpe.h     Hugging Face tokenizers' byte-level BPE as a tokenizer.json states it (Llama 3,
//                Qwen2/3, SmolLM2): its vocabulary in any order, added tokens matched in the
//                text (added_tokens.h), NFC (normalize.h, by utf8proc), the template's ids
//   dataset.h    the train/val split, random-window batches, evaluation windows, baselines
//   token_store.h  token ids as uint16/uint32, loaded, read or mapped from a file, or owned
//   prepared.h   prepare(): text files to a prepared folder in bounded memory; open_prepared()
//                and prepare_text() for training; data identities; the token files' hashes
//                (token_hashes.cpp)
//   tokenizer_file.h  a tokenizer as a JSON file (a prepared folder's tokenizer.json)
//   examples.h   fine-tuning data: classify and instruct files as examples, split, padded
//                batches
//   choice_items.h  multiple-choice items (HellaSwag's shape, or question and choices) from
//                a JSON Lines file, a line at a time
//   instructions.h  instruction records: the prompt template (Alpaca's, or a template file's)
//                and the masked example of a formatted record
// Internal to the library: byte_level_error.h (where a byte-level vocabulary is wrong),
// text_scan.h (the fast UTF-8 loops), posix_io.h (files, folders,
// locks, SHA-256, over base/posix_file.h), strict_json.h (fields of JSON files read by
// base/json.h), prepare_passes.h (prepare's passes).
//   data_error.h the error of data files: every message names the file
//   corpus.h     the built-in corpus, whose ideal loss is known exactly
//   identity.h   a hash naming the data a run trained on
#include "data/bpe.h"
#include "data/choice_items.h"
#include "data/corpus.h"
#include "data/data_error.h"
#include "data/dataset.h"
#include "data/examples.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "data/identity.h"
#include "data/instructions.h"
#include "data/prepared.h"
#include "data/pretokenize.h"
#include "data/token_store.h"
#include "data/tokenizer.h"
#include "data/tokenizer_file.h"
