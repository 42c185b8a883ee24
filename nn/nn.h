#pragma once
// attograd's layers: the map of nn/. The model is described once (block.h, gpt.h); the
// training forward, the KV-cached inference step, the attention maps (a forward with an
// observer), the parameter list and the footprint (FLOPs and saved tensors per token) are
// that description run different ways.
//   module.h          Module (named parameters, freezing, train/eval, state_dict, shape-only
//                     descriptions), ModuleList
//   config.h          GPTConfig and its one table of keys (bounds, choices, variants, the
//                     LoRA adapters GPT(cfg) adds)
//   layers.h          Linear (with an optional LoRA adapter), Embedding, LayerNorm, RMSNorm,
//                     Dropout, GELU, MLP
//   attention.h       MultiHeadAttention: the model's attention (fused qkv, one kernel)
//   chapter/attention.h  the chapter's teaching classes: SelfAttention_v1 and _v2,
//                     CausalAttention, MultiHeadAttentionWrapper
//   block.h           TransformerBlock: the one definition of a block
//   head.h            Head: the LM head (tied or not) or a ClassificationHead
//   gpt.h             GPT (forward, inference step, generate, replace_head)
//   footprint.h       what a forward keeps for backward and computes, per token
//   observer.h        watching a forward (attention weights); InferenceScope
//   attention_maps.h  every layer's and head's attention weights for one sequence
//   sampling.h        the next token from logits: greedy, temperature, top-k, top-p
//   inference_context.h  what a layer's inference step works on: the cache and scratch
//   inference.h       CachedInference: inference with a key/value cache, one position per token,
//                     sized by the window it holds
//   generation.h      generate(): the one generation loop, cached or full-window, streamed;
//                     generation_memory_bytes(): what it will allocate
#include "nn/attention.h"
#include "nn/attention_maps.h"
#include "nn/block.h"
#include "nn/chapter/attention.h"
#include "nn/config.h"
#include "nn/footprint.h"
#include "nn/generation.h"
#include "nn/gpt.h"
#include "nn/head.h"
#include "nn/inference.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/observer.h"
#include "nn/sampling.h"
