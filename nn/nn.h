#pragma once
// attograd's layers: the map of nn/.
//   module.h          Module (named parameters, train/eval, state_dict), ModuleList
//   layers.h          Linear, Embedding, LayerNorm, Dropout, GELU, MLP
//   attention.h       the chapter's attention classes, v1 to MultiHeadAttention
//   gpt.h             GPTConfig, TransformerBlock, GPT (forward, loss, generate)
//   attention_maps.h  every layer's and head's attention weights for one sequence
//   sampling.h        the next token from logits: greedy, temperature, top-k, top-p
//   decode.h          Decoder: inference with a key/value cache, one position per token
//   generation.h      generate(): N samples of a prompt, cached or full-window, streamed
#include "nn/attention.h"
#include "nn/attention_maps.h"
#include "nn/decode.h"
#include "nn/generation.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/sampling.h"
