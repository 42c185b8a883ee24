#pragma once
// attograd's layers: the map of nn/.
//   module.h     Module (named parameters, train/eval, state_dict), ModuleList
//   layers.h     Linear, Embedding, LayerNorm, Dropout, GELU, MLP
//   attention.h  the chapter's attention classes, v1 to MultiHeadAttention
//   gpt.h        GPTConfig, TransformerBlock, GPT (forward, loss, generate)
//   attention_maps.h  every layer's and head's attention weights for one sequence
#include "nn/attention.h"
#include "nn/attention_maps.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/module.h"
