// The report's model section: the sample, the prompt's per-token loss coloured over its
// text, and the attention heat maps of every layer and head.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/utf8.h"
#include "nn/attention_maps.h"
#include "report/heat_map.h"
#include "report/html.h"
#include "report/report.h"

namespace report {

namespace {

using html::escape;

constexpr int kLossClasses = 9;  // .l0 to .l8 in report.css

std::vector<int64_t> encode_prompt(const nn::GPT& model, const data::Tokenizer& tok,
                                   const std::string& prompt) {
  std::vector<int64_t> ids;
  try {
    ids = tok.encode(prompt);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--prompt: {}", e.what()));
  }
  const int64_t context = model.config().context_length;
  if (ids.empty() || static_cast<int64_t>(ids.size()) > context)
    throw std::invalid_argument(fmt::format(
        "--prompt is {} tokens; attention maps need 1 to the model's context_length, {}",
        ids.size(), context));
  return ids;
}

// "'a' 41%, 'e' 12%, 'o' 5%": the likeliest next tokens after a row of logits.
std::string likeliest(const std::vector<double>& logits, const data::Tokenizer& tok) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (double l : logits) total += std::exp(l - top);
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min<size_t>(3, order.size());
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  std::string out;
  for (size_t i = 0; i < k; ++i)
    out += fmt::format("{}'{}' {:.0f}%", i ? ", " : "",
                       token_label(tok.decode({static_cast<int64_t>(order[i])})),
                       100 * std::exp(logits[order[i]] - top) / total);
  return out;
}

void add_losses(PromptView& pv, const ag::Tensor& logits, const std::vector<int64_t>& ids,
                const data::Tokenizer& tok) {
  const int64_t V = logits.shape()[1];
  const std::vector<double> all = logits.to_vector();
  pv.loss.assign(ids.size(), NAN);
  pv.predictions.assign(ids.size(), "");
  for (size_t t = 1; t < ids.size(); ++t) {
    const std::vector<double> row(all.begin() + (t - 1) * V, all.begin() + t * V);
    const double top = *std::max_element(row.begin(), row.end());
    double total = 0;
    for (double l : row) total += std::exp(l - top);
    pv.loss[t] = top + std::log(total) - row[ids[t]];
    pv.predictions[t] = likeliest(row, tok);
  }
}

PromptView prompt_view(const nn::GPT& model, const data::Tokenizer& tok,
                       const std::vector<int64_t>& ids) {
  const nn::AttentionMaps maps = nn::attention_maps(model, ids);
  PromptView pv;
  pv.ids = ids;
  for (int64_t id : ids) pv.tokens.push_back(tok.decode({id}));
  pv.layers = static_cast<int64_t>(maps.weights.size());
  pv.heads = maps.weights.empty() ? 0 : maps.weights[0].shape()[0];
  for (const ag::Tensor& w : maps.weights) {
    const std::vector<double> flat = w.to_vector();
    const size_t per_head = ids.size() * ids.size();
    for (int64_t h = 0; h < pv.heads; ++h)
      pv.weights.emplace_back(flat.begin() + h * per_head, flat.begin() + (h + 1) * per_head);
  }
  if (model.config().num_classes == 0)  // a classifier's logits are labels, not next tokens
    add_losses(pv, maps.logits, ids, tok);
  return pv;
}

std::string sample_text(const nn::GPT& model, const data::Tokenizer& tok, std::vector<int64_t> ids,
                        const ModelViewOptions& o) {
  if (ids.empty()) {
    try {
      ids = tok.encode("\n");
    } catch (const std::invalid_argument&) {  // a vocabulary without newlines
      ids = {0};
    }
  }
  const int64_t context = model.config().context_length;
  if (static_cast<int64_t>(ids.size()) > context) ids.erase(ids.begin(), ids.end() - context);
  ag::Generator gen(o.seed);
  const int64_t T = static_cast<int64_t>(ids.size());
  const ag::Tensor out =
      model.generate(ag::from_vector(ids, {1, T}), o.sample_tokens, o.temperature, 0, gen);
  std::vector<int64_t> fresh;
  for (int64_t t = T; t < out.shape()[1]; ++t)
    fresh.push_back(static_cast<int64_t>(out.at({0, t})));
  return tok.decode(fresh);
}

}  // namespace

std::string token_label(const std::string& token) {
  std::string shown;
  for (const char c : token) {
    if (c == ' ')
      shown += "\u2423";  // ␣
    else if (c == '\n')
      shown += "\u21b5";  // ↵
    else if (c == '\t')
      shown += "\u21e5";  // ⇥
    else
      shown += c;
  }
  return base::printable(shown);
}

ModelView model_view(const nn::GPT& model, const data::Tokenizer& tokenizer,
                     const ModelViewOptions& o) {
  ModelView v;
  v.source = o.source, v.step = o.step, v.config = o.config, v.prompt = o.prompt;
  v.parameters = model.config().num_parameters();
  v.vocab_size = model.config().vocab_size;
  std::vector<int64_t> ids;
  if (!o.prompt.empty()) {
    ids = encode_prompt(model, tokenizer, o.prompt);
    v.prompt_view = prompt_view(model, tokenizer, ids);
  }
  if (o.sample_tokens > 0 && model.config().num_classes == 0) {  // a classifier writes no text
    v.sample_prompt = o.prompt;
    v.sample = sample_text(model, tokenizer, ids, o);
    v.sample_note = fmt::format(
        "{} tokens continuing {}, temperature {:g}, seed {}.", o.sample_tokens,
        o.prompt.empty() ? "a newline" : "the prompt (highlighted)", o.temperature, o.seed);
  }
  return v;
}

namespace {

// ------------------------------------------------------------------ the section
std::string sample_part(const ModelView& m) {
  if (m.sample.empty()) return "";
  return fmt::format(
      "<h3>Sample</h3><p class=\"note\">{}</p><pre class=\"sample\"><span "
      "class=\"prompt\">{}</span>{}</pre>",
      escape(m.sample_note), escape(m.sample_prompt, true), escape(m.sample, true));
}

std::string loss_title(const PromptView& pv, size_t t) {
  if (t == 0)
    return fmt::format("'{}' (token 0): the first token, nothing predicts it",
                       token_label(pv.tokens[0]));
  return fmt::format("'{}' (token {}): loss {:.3f} nats ({:.2f} bits); likeliest here: {}",
                     token_label(pv.tokens[t]), t, pv.loss[t], pv.loss[t] / std::log(2.0),
                     pv.predictions[t]);
}

std::string loss_legend(double top) {
  std::string out = "<div class=\"loss-legend\" aria-hidden=\"true\"><span>0 nats</span>";
  for (int k = 0; k < kLossClasses; ++k)
    out += fmt::format("<span class=\"swatch l{}\"></span>", k);
  return out + fmt::format("<span>{:.2f} nats (a uniform guess) and above</span></div>", top);
}

std::string loss_table(const PromptView& pv) {
  std::string rows;
  for (size_t t = 0; t < pv.tokens.size(); ++t)
    rows += fmt::format("<tr><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td>{}</td></tr>", t,
                        escape(token_label(pv.tokens[t])),
                        t ? fmt::format("{:.4f}", pv.loss[t]) : "", escape(pv.predictions[t]));
  return "<details><summary>Every token's loss as a table</summary><table class=\"data\">"
         "<thead><tr><th scope=\"col\">#</th><th scope=\"col\">token</th><th scope=\"col\">loss "
         "(nats)</th><th scope=\"col\">the model's likeliest tokens "
         "there</th></tr></thead><tbody>" +
         rows + "</tbody></table></details>";
}

std::string loss_part(const PromptView& pv, int64_t vocab) {
  const double top = std::log(static_cast<double>(std::max<int64_t>(vocab, 2)));
  std::string spans;
  double sum = 0;
  for (size_t t = 0; t < pv.tokens.size(); ++t) {
    const int k =
        t == 0 ? -1
               : std::clamp(static_cast<int>(pv.loss[t] / top * kLossClasses), 0, kLossClasses - 1);
    if (t) sum += pv.loss[t];
    spans += fmt::format("<span class=\"tok {}\" tabindex=\"0\" title=\"{}\">{}</span>",
                         k < 0 ? "first" : fmt::format("l{}", k), escape(loss_title(pv, t)),
                         escape(pv.tokens[t], true));
  }
  const size_t predicted = pv.tokens.size() - 1;
  return fmt::format(
      "<h3>Per-token loss of the prompt</h3><p class=\"note\">Each token coloured by how "
      "surprised the model was to see it (its cross-entropy, given the tokens before it){}. "
      "Hover or focus a token for its loss and the model's likeliest tokens there.</p>"
      "<p class=\"loss-text\" id=\"loss-text\">{}</p>{}<output class=\"readout\" "
      "id=\"loss-readout\" aria-live=\"polite\"></output>{}",
      predicted
          ? fmt::format("; mean {:.3f} nats over {} predicted tokens", sum / predicted, predicted)
          : "",
      spans, loss_legend(top), loss_table(pv));
}

std::string attention_part(const PromptView& pv, nlohmann::json& data) {
  const size_t T = pv.tokens.size();
  std::vector<std::string> labels;
  for (const auto& t : pv.tokens) labels.push_back(token_label(t));
  std::string out = fmt::format(
      "<h3 id=\"attention\">Attention</h3><p class=\"note\">Each map is one head's attention "
      "weights over the prompt's {} tokens: row i is query i, column j is key j; a row sums to "
      "1 over the keys up to it, and the hatched triangle is the future, which the causal "
      "mask hides. Layers and heads count from 0 (<code>blocks.0.attn</code>). Hover a cell for "
      "its weight; click or press Enter on a map to enlarge it.</p><div "
      "class=\"legend-bar\">{}</div>",
      T, heat_map_legend());
  for (int64_t l = 0; l < pv.layers; ++l) {
    out += fmt::format("<h4>Layer {}</h4><div class=\"maps{}\">", l,
                       T > 40   ? " long"
                       : T > 16 ? " medium"
                                : "");
    for (int64_t h = 0; h < pv.heads; ++h) {
      HeatMap map{fmt::format("l{}h{}", l, h), fmt::format("Layer {}, head {}", l, h), "", labels,
                  pv.weights[l * pv.heads + h]};
      data["maps"].push_back(heat_map_data(map));
      out += fmt::format(
          "<figure class=\"map-figure\">{}<figcaption>head {}</figcaption><output "
          "class=\"readout\" aria-live=\"polite\"></output></figure>",
          render_heat_map(map), h);
    }
    out += "</div>";
  }
  return out;
}

}  // namespace

std::string model_section(const ModelView& m, nlohmann::json& data) {
  std::string out = fmt::format(
      "<section id=\"model\" aria-labelledby=\"model-h\"><h2 id=\"model-h\">The model</h2><p>{} "
      "at step {}: {} parameters.</p>",
      escape(m.source), m.step, thousands(m.parameters));
  out += sample_part(m);
  if (m.prompt_view) {
    if (!m.prompt_view->loss.empty()) out += loss_part(*m.prompt_view, m.vocab_size);  // an LM's
    out += attention_part(*m.prompt_view, data);
  } else if (!m.prompt_problem.empty()) {
    out += "<p class=\"notes\">No attention maps: " + escape(m.prompt_problem) + "</p>";
  } else {
    out +=
        "<p class=\"note\">No prompt was given: with <code>--prompt TEXT</code> the report "
        "shows each token's loss and every head's attention over it.</p>";
  }
  return out + "</section>";
}

}  // namespace report
