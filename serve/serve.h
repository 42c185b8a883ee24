#pragma once
// `attograd serve`, the map of serve/: a model behind an OpenAI-compatible local HTTP
// server (docs/serving.md). HTTP is cpp-httplib's; what is ours:
//   request.h    JSON from the network to a generation request, every field checked (a pure
//                function; fuzz target serve_request)
//   engine.h     the decoder: every request's choices decoded together, a key/value cache
//                row each (nn::CachedInference::step_slots), a bounded queue beyond them
//   reply_text.h a choice's text as tokens arrive: stop texts, whole UTF-8 characters
//   answer.h     OpenAI's response shapes, whole or as server-sent events
//   transport.h  the socket cpp-httplib reads: a deadline per request (slowloris), byte
//                bounds, a bounded worker pool, whether a client is still there
//   server.h     the endpoints, the drain on SIGTERM/SIGINT: serve::run
#include "serve/answer.h"
#include "serve/engine.h"
#include "serve/reply_text.h"
#include "serve/request.h"
#include "serve/server.h"
