// serve/'s own layers without a socket: the request parser (serve/request.h), a choice's
// text (serve/reply_text.h) and the answer's shapes (serve/answer.h).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "serve/serve.h"

using nlohmann::json;
using serve::Endpoint;

namespace {

serve::GenerationRequest request_parse(const std::string& body,
                                       Endpoint e = Endpoint::completions) {
  return serve::parse_request(body, e, serve::RequestLimits{});
}

// The refusal of a body: its status and the parameter it names.
std::pair<int, std::string> request_refusal(const std::string& body,
                                            Endpoint e = Endpoint::completions) {
  try {
    request_parse(body, e);
  } catch (const serve::ApiError& error) {
    return {error.status, error.param};
  }
  return {0, "accepted"};
}

}  // namespace

TEST_CASE("a completions request is read field by field", "[serve]") {
  const auto r =
      request_parse(R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0,
      "top_p": 0.5, "top_k": 3, "stop": "\n", "seed": 42, "n": 2, "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": 2, "echo": true})");
  CHECK(r.model == "m");
  CHECK(r.prompt == "Hello");
  CHECK(r.max_tokens == 7);
  CHECK(r.temperature == 0.0);
  CHECK(r.top_p == 0.5);
  CHECK(r.top_k == 3);
  CHECK(r.stop == std::vector<std::string>{"\n"});
  CHECK(r.seed == 42u);
  CHECK(r.n == 2);
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.logprobs == 2);
  CHECK(r.echo);
  const auto defaults = request_parse(R"({"prompt": ["one"]})");
  CHECK(defaults.prompt == "one");
  CHECK_FALSE(defaults.max_tokens);
  CHECK(defaults.temperature == 1.0);
  CHECK(defaults.n == 1);
  CHECK_FALSE(defaults.seed);
}

TEST_CASE("a chat request's messages are read with their roles and text parts", "[serve]") {
  const auto r = request_parse(R"({"messages": [{"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}], "max_completion_tokens": 9, "top_k": -1})",
                               Endpoint::chat);
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == data::ChatRole::system);
  CHECK(r.messages[1].content == "Hi there");
  CHECK(r.messages[2].role == data::ChatRole::assistant);
  CHECK(r.messages[2].content.empty());
  CHECK(r.max_tokens == 9);
  CHECK(r.top_k == 0);  // -1: every token, as vLLM takes it
}

TEST_CASE("unknown fields are ignored, as OpenAI ignores them", "[serve]") {
  const auto r =
      request_parse(R"({"prompt": "a", "user": "x", "metadata": {"k": [1, 2, {"v": null}]},
      "presence_penalty": 0, "logit_bias": {}, "n": null})");
  CHECK(r.prompt == "a");
  CHECK(r.n == 1);
}

TEST_CASE("hostile bodies are refused with a 400 naming the field", "[serve]") {
  using P = std::pair<int, std::string>;
  CHECK(request_refusal("{\"prompt\": ") == P{400, ""});                      // malformed JSON
  CHECK(request_refusal("[1, 2]") == P{400, ""});                             // not an object
  CHECK(request_refusal(R"({"prompt": "a", "prompt": "b"})") == P{400, ""});  // a key twice
  CHECK(request_refusal(std::string(50, '[') + std::string(50, ']')) == P{400, ""});  // too deep
  CHECK(request_refusal(R"({})") == P{400, "prompt"});
  CHECK(request_refusal(R"({"prompt": [1, 2]})") == P{400, "prompt"});
  CHECK(request_refusal(R"({"prompt": "a", "temperature": -0.5})") == P{400, "temperature"});
  // a number past double's range: not JSON base/json.h takes
  CHECK(request_refusal(R"({"prompt": "a", "temperature": 1e400})").first == 400);
  CHECK(request_refusal(R"({"prompt": "a", "temperature": "hot"})") == P{400, "temperature"});
  CHECK(request_refusal(R"({"prompt": "a", "top_p": 0})") == P{400, "top_p"});
  CHECK(request_refusal(R"({"prompt": "a", "max_tokens": 0})") == P{400, "max_tokens"});
  CHECK(request_refusal(R"({"prompt": "a", "max_tokens": 1e30})") == P{400, "max_tokens"});
  CHECK(request_refusal(R"({"prompt": "a", "max_tokens": 18446744073709551616})") ==
        P{400, "max_tokens"});
  CHECK(request_refusal(R"({"prompt": "a", "max_tokens": 2.5})") == P{400, "max_tokens"});
  CHECK(request_refusal(R"({"prompt": "a", "max_tokens": 5000})") == P{400, "max_tokens"});
  CHECK(request_refusal(R"({"prompt": "a", "n": 9})") == P{400, "n"});
  CHECK(request_refusal(R"({"prompt": "a", "stop": ["1", "2", "3", "4", "5"]})") == P{400, "stop"});
  CHECK(request_refusal(R"({"prompt": "a", "stop": [""]})") == P{400, "stop"});
  CHECK(request_refusal(R"({"prompt": "a", "logprobs": 6})") == P{400, "logprobs"});
  CHECK(request_refusal(R"({"prompt": "a", "stream": "yes"})") == P{400, "stream"});
  CHECK(request_refusal(R"({"prompt": "a", "frequency_penalty": 0.5})") ==
        P{400, "frequency_penalty"});
  CHECK(request_refusal(R"({"prompt": "a", "logit_bias": {"1": 5}})") == P{400, "logit_bias"});
  CHECK(request_refusal(R"({"messages": []})", Endpoint::chat) == P{400, "messages"});
  CHECK(request_refusal(R"({"messages": [{"role": "tool", "content": "x"}]})", Endpoint::chat) ==
        P{400, "messages[0].role"});
  CHECK(request_refusal(R"({"messages": [{"role": "user"}]})", Endpoint::chat) ==
        P{400, "messages[0].content"});
  CHECK(request_refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                        Endpoint::chat) == P{400, "messages[0].content"});
  CHECK(request_refusal(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})",
                        Endpoint::chat) == P{400, "logprobs"});
}

TEST_CASE("an error body has OpenAI's shape", "[serve]") {
  const json j = json::parse(
      serve::error_body(serve::bad_request("messages", "too long", "context_length_exceeded")));
  CHECK(j["error"]["message"] == "too long");
  CHECK(j["error"]["type"] == "invalid_request_error");
  CHECK(j["error"]["param"] == "messages");
  CHECK(j["error"]["code"] == "context_length_exceeded");
  CHECK(json::parse(serve::error_body(serve::bad_request("", "x")))["error"]["param"].is_null());
}

TEST_CASE("a choice's text holds back a possible stop text and split characters", "[serve]") {
  serve::ReplyText text({"END"});
  CHECK(text.add("abc E") == "abc ");  // "E" may begin END
  CHECK(text.add("x") == "Ex");        // it did not
  CHECK(text.add("\xe2\x82") == "");   // half of the euro sign
  CHECK(text.add("\xac!EN") == "\xe2\x82\xac!");
  CHECK(text.add("D and more") == "");  // END reached across tokens: nothing after it
  CHECK(text.stopped());
  CHECK(text.add("later") == "");
  serve::ReplyText plain({});
  CHECK(plain.add("a\xe2") == "a");
  CHECK(plain.finish() == "\xe2");  // the end: what was held, even half a character
}

TEST_CASE("a streamed chat answer is the role, the deltas, the finish, the usage and DONE",
          "[serve]") {
  const data::ByteTokenizer tokenizer;
  serve::Prepared p{
      request_parse(R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
      "stream_options": {"include_usage": true}})",
                    Endpoint::chat),
      {1, 2, 3},
      8};
  serve::Answer answer(p, tokenizer, "chatcmpl-1", "m", 5);
  CHECK(answer.opening().find(R"("delta":{"content":"","role":"assistant"})") != std::string::npos);
  CHECK(answer.take(serve::TokenEvent::token(0, 'h')).find(R"("delta":{"content":"h"})") !=
        std::string::npos);
  const std::string end = answer.take(serve::TokenEvent::end(0, serve::Finish::length));
  CHECK(end.find(R"("finish_reason":"length")") != std::string::npos);
  CHECK(answer.done());
  const std::string tail = answer.stream_end();
  CHECK(tail.find(R"("completion_tokens":1,"prompt_tokens":3,"total_tokens":4)") !=
        std::string::npos);
  CHECK(tail.substr(tail.size() - 14) == "data: [DONE]\n\n");
}

// A stream's token chunks are written without json (Answer::token_chunk); they must be the
// bytes json writes for the same fields: every ASCII byte (quotes, backslashes, control
// characters), a character of two bytes, a byte that is not UTF-8, names that need escapes.
TEST_CASE("a streamed token's chunk is the JSON of its fields byte for byte", "[serve]") {
  const data::ByteTokenizer tokenizer;
  for (const Endpoint endpoint : {Endpoint::completions, Endpoint::chat}) {
    const bool chat = endpoint == Endpoint::chat;
    const std::string body = chat ? R"({"messages": [{"role": "user", "content": "x"}],
                                        "stream": true, "n": 2})"
                                  : R"({"prompt": "x", "stream": true, "n": 2})";
    serve::Prepared p{request_parse(body, endpoint), {1}, 300};
    serve::Answer answer(p, tokenizer, "id-\"7\"", "m\\x\n", 5);
    auto expected = [&](const std::string& text) {
      json choice = {{"index", 1}, {"finish_reason", nullptr}};
      if (chat) choice["delta"] = {{"content", text}};
      if (!chat) choice["text"] = text, choice["logprobs"] = nullptr;
      const json j = {{"id", "id-\"7\""},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", 5},
                      {"model", "m\\x\n"},
                      {"choices", json::array({choice})}};
      return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
    };
    for (int64_t id = 0; id < 128; ++id) {
      INFO("endpoint " << (chat ? "chat" : "completions") << ", byte " << id);
      CHECK(answer.take(serve::TokenEvent::token(1, id)) ==
            expected(std::string(1, static_cast<char>(id))));
    }
    CHECK(answer.take(serve::TokenEvent::token(1, 0xC3)).empty());  // half of an e acute
    CHECK(answer.take(serve::TokenEvent::token(1, 0xA9)) == expected("\xc3\xa9"));
    CHECK(answer.take(serve::TokenEvent::token(1, 0xFF)) == expected("\xff"));  // U+FFFD
    CHECK(expected("\xff").find("\xef\xbf\xbd") != std::string::npos);
  }
}

TEST_CASE("a completion's logprobs name each token, its alternatives and its offset", "[serve]") {
  const data::ByteTokenizer tokenizer;
  serve::Prepared p{request_parse(R"({"prompt": "ab", "logprobs": 1, "echo": true})"), {97, 98}, 4};
  serve::Answer answer(p, tokenizer, "cmpl-1", "m", 5);
  serve::TokenEvent e = serve::TokenEvent::token(0, 'c');
  e.logprob = -0.25;
  e.top = {{'c', -0.25}};
  answer.take(e);
  answer.take(serve::TokenEvent::end(0, serve::Finish::stop));
  const json j = json::parse(answer.whole());
  CHECK(j["choices"][0]["text"] == "abc");
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  CHECK(j["choices"][0]["logprobs"]["tokens"] == json::array({"c"}));
  CHECK(j["choices"][0]["logprobs"]["token_logprobs"][0] == -0.25);
  CHECK(j["choices"][0]["logprobs"]["top_logprobs"][0]["c"] == -0.25);
  CHECK(j["choices"][0]["logprobs"]["text_offset"][0] == 2);
  CHECK(j["usage"]["completion_tokens"] == 1);
}
