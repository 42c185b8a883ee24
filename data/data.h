#pragma once
// Text in, token ids out: the map of data/.
//   utf8.h       strict UTF-8 decoding (errors name the byte offset)
//   tokenizer.h  the spec's char tokenizer and a byte tokenizer
//   pretokenize.h  cutting text into pieces with a PCRE2 split pattern (GPT-4's), streamed
//   bpe.h        the byte-level BPE tokenizer: training, encoding, a stream encoder
//   dataset.h    the train/val split, random-window batches, evaluation windows, baselines
//   corpus.h     the built-in corpus, whose ideal loss is known exactly
//   identity.h   a hash naming the data a run trained on
#include "data/bpe.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/identity.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
