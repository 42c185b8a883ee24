// The report's HTML and SVG: escaping of everything from elsewhere, the charts' and heat
// maps' markup, and the page assembled from hostile inputs.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <regex>

#include "report/heat_map.h"
#include "report/html.h"
#include "report/line_chart.h"
#include "report/report.h"
#include "support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

size_t report_count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A chart with a log scale and no series yet.
report::LineChart small_chart() {
  report::LineChart c;
  c.id = "x";
  c.title = "chart";
  c.x_label = "step";
  c.y_label = "value";
  c.log_option = true;
  return c;
}

const std::string kHostile = "<script>alert('x')</script> & \"q\" <img src=x onerror=alert(1)>";

}  // namespace

// ------------------------------------------------------------------ report/html.h
TEST_CASE("html escape turns markup into text", "[report][html]") {
  REQUIRE(report::html::escape(kHostile) ==
          "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot; &lt;img src=x "
          "onerror=alert(1)&gt;");
  REQUIRE(report::html::escape("caf\xc3\xa9 \xe2\x86\xb5") ==
          "caf\xc3\xa9 \xe2\x86\xb5");  // UTF-8 stays
}

TEST_CASE("html escape shows control characters, bidi overrides and bad bytes as escapes",
          "[report][html]") {
  const std::string shown = report::html::escape(
      "a\x1b[31mb\xe2\x80\xae"
      "c\xff\nd");
  REQUIRE(shown == "a\\x1b[31mb\\u{202e}c\\xff\\nd");
  REQUIRE(report::html::escape("line 1\nline 2\t.", true) == "line 1\nline 2\t.");
}

TEST_CASE("script_json cannot end its script element and reads back exactly", "[report][html]") {
  const nlohmann::json value = {{"name", "</script><!-- \xe2\x80\xa8 \xe2\x80\xa9 & > <"},
                                {"x", {1.5, 2e-300, -0.0}}};
  const std::string embedded = report::html::script_json(value);
  for (const char* bad : {"<", ">", "&", "\xe2\x80\xa8", "\xe2\x80\xa9"})
    REQUIRE(embedded.find(bad) == std::string::npos);
  for (unsigned char c : embedded) REQUIRE(c < 0x80);
  REQUIRE(nlohmann::json::parse(embedded) == value);
  // bytes that are not UTF-8 become U+FFFD instead of failing
  REQUIRE_NOTHROW(report::html::script_json({{"t", "\xff\xfe"}}));
}

TEST_CASE("csp_hash is the base64 SHA-256 a Content-Security-Policy expects", "[report][html]") {
  REQUIRE(report::html::csp_hash("") == "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
  REQUIRE(report::html::csp_hash("abc") == "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
}

TEST_CASE("num writes short coordinates without trailing zeros or negative zero",
          "[report][html]") {
  REQUIRE(report::html::num(12.5) == "12.5");
  REQUIRE(report::html::num(3.0) == "3");
  REQUIRE(report::html::num(-0.04) == "0");
  REQUIRE(report::html::num(-0.25, 2) == "-0.25");
  REQUIRE(report::html::num(NAN) == "0");
}

// ------------------------------------------------------------------ report/line_chart.h
TEST_CASE("axis ticks are round numbers inside the range", "[report][chart]") {
  REQUIRE(report::linear_ticks(1, 2000, 6) == std::vector<double>{500, 1000, 1500, 2000});
  const std::vector<double> fifths = report::linear_ticks(0, 1, 5);
  REQUIRE(fifths.size() == 6);
  REQUIRE(fifths[3] == Approx(0.6));
  REQUIRE(report::log_ticks(0.5, 500) == std::vector<double>{1, 10, 100});
  REQUIRE(report::log_ticks(0.9, 30) == std::vector<double>{1, 2, 5, 10, 20});
}

TEST_CASE("any values from a metrics file make a chart, with a few ticks", "[report][chart]") {
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {1e15, 1e15 + 1}, {-1e308, 1e308}, {5e-324, 1e-300}, {3, 3}, {-0.0, 0.0}}) {
    INFO(lo << " to " << hi);
    REQUIRE(report::linear_ticks(lo, hi, 5).size() <= 24);
    if (lo > 0) REQUIRE(report::log_ticks(lo, hi).size() <= 2000);
    report::LineChart c = small_chart();
    c.series.push_back({"s", "#000000", true, {0, 1e18}, {lo, hi}});
    const report::RenderedChart r = report::render_line_chart(c);
    REQUIRE(r.svg.size() < 200000);
    REQUIRE(r.svg.find("nan") == std::string::npos);
  }
}

TEST_CASE("tick labels print the precision their spacing needs", "[report][chart]") {
  REQUIRE(report::tick_label(0.25, 0.05) == "0.25");
  REQUIRE(report::tick_label(2, 0.5) == "2.0");
  REQUIRE(report::tick_label(1500, 500) == "1500");
  REQUIRE(report::tick_label(45000, 5000) == "45k");
  REQUIRE(report::tick_label(2500000, 500000) == "2.5M");
  REQUIRE(report::tick_label(0.0003, 0.0001) == "3e-4");
  REQUIRE(report::tick_label(0.00025, 0.00005) == "2.5e-4");
  REQUIRE(report::tick_label(0, 0.1) == "0");
}

TEST_CASE("thinning keeps the first and last points and every spike", "[report][chart]") {
  std::vector<double> y(10000, 1.0);
  y[5003] = 50.0, y[7777] = -3.0;
  const std::vector<size_t> kept = report::thin_points(y, 1200);
  REQUIRE(kept.size() <= 1200);
  REQUIRE(kept.front() == 0);
  REQUIRE(kept.back() == 9999);
  REQUIRE(std::count(kept.begin(), kept.end(), 5003) == 1);
  REQUIRE(std::count(kept.begin(), kept.end(), 7777) == 1);
  REQUIRE(std::is_sorted(kept.begin(), kept.end()));
  REQUIRE(report::thin_points({1, 2, 3}, 1200).size() == 3);
}

TEST_CASE("a line chart has its title, description, axis labels and one path per series",
          "[report][chart]") {
  report::LineChart c;
  c.id = "loss", c.title = "Loss", c.x_label = "step", c.y_label = "loss (nats per token)";
  c.series.push_back({kHostile, "#0072b2", false, {1, 2, 3, 4}, {4.0, 3.0, NAN, 2.0}});
  c.series.push_back({"validation", "#0072b2", true, {2, 4}, {3.5, 2.5}});
  c.guides.push_back({"corpus floor (ideal)", 1.0});
  c.log_option = true;
  const report::RenderedChart r = report::render_line_chart(c);
  REQUIRE_THAT(r.svg, StartsWith("<svg class=\"chart\" id=\"chart-loss\""));
  REQUIRE_THAT(r.svg, Contains("<title id=\"chart-loss-t\">Loss</title>"));
  REQUIRE_THAT(r.svg, Contains(">step</text>") && Contains(">loss (nats per token)</text>"));
  REQUIRE_THAT(r.svg, Contains("lowest 2 at step 4"));  // the description in words
  REQUIRE(report_count(r.svg, "class=\"axis-label\"") == 2);
  REQUIRE(report_count(r.svg, "<path class=\"line") == 4);  // two series, linear and log
  REQUIRE(report_count(r.svg, "class=\"scale log\"") == 1);
  REQUIRE(r.svg.find("<script") == std::string::npos);
  REQUIRE(r.svg.find("<img") == std::string::npos);
  REQUIRE(r.svg.find("d=\"\"") == std::string::npos);
  // the NaN is a gap: the first series is two pieces
  const std::regex first_path("<path class=\"line\" stroke=\"#0072b2\" d=\"([^\"]*)\"");
  std::smatch m;
  REQUIRE(std::regex_search(r.svg, m, first_path));
  REQUIRE(report_count(m[1].str(), "M") == 2);
  REQUIRE(report_count(r.svg, "<circle") == 4);  // the validation points, on each scale
  REQUIRE(r.data["series"][0]["y"][2].is_null());
  REQUIRE(r.data["series"][1]["x"] == nlohmann::json({2.0, 4.0}));
}

// ------------------------------------------------------------------ report/heat_map.h
TEST_CASE("the colour scale runs from viridis's dark purple to its yellow", "[report][heat_map]") {
  REQUIRE(report::weight_colour(0) == "#440154");
  REQUIRE(report::weight_colour(1) == "#fde725");
  REQUIRE(report::weight_colour(7) == "#fde725");
  REQUIRE(report::weight_colour(NAN) == "#440154");
}

TEST_CASE("a heat map labels rows and columns, hatches the future and escapes tokens",
          "[report][heat_map]") {
  report::HeatMap m{"l0h1",
                    "Layer 0, head 1",
                    "",
                    {"<b>", "o", "u"},
                    {1.0f, 0, 0, 0.25f, 0.75f, 0, 0.2f, 0.3f, 0.5f}};
  const std::string svg = report::render_heat_map(m);
  const size_t labels = svg.find("<g class=\"tokens\"");
  REQUIRE(report_count(svg.substr(labels, svg.find("<g class=\"axes\"") - labels), "<text") == 6);
  REQUIRE_THAT(svg, Contains("&lt;b&gt;"));
  REQUIRE(svg.find("<b>") == std::string::npos);
  REQUIRE_THAT(svg, Contains("class=\"masked\""));
  REQUIRE_THAT(svg, Contains(">keys</text>") && Contains(">queries</text>"));
  REQUIRE_THAT(svg, Contains("data-grid="));
  REQUIRE(svg.find("xmlns") == std::string::npos);
  const std::string file = report::render_heat_map(m, true);
  REQUIRE_THAT(
      file,
      StartsWith("<svg class=\"heat-map\" id=\"map-l0h1\" xmlns=\"http://www.w3.org/2000/svg\""));
  REQUIRE_THAT(file, Contains(">attention weight</text>"));
  m.values.pop_back();
  REQUIRE_THROWS_WITH(report::render_heat_map(m), Contains("8 values for 3 labels"));
}

TEST_CASE("heat map data holds the lower triangle in units of 1e-4", "[report][heat_map]") {
  const report::HeatMap m{
      "x", "x", "", {"a", "b", "c"}, {1.0f, 0, 0, 0.25f, 0.75f, 0, 0.2f, 0.3f, 0.5f}};
  const nlohmann::json d = report::heat_map_data(m);
  REQUIRE(d["v"] == nlohmann::json({10000, 2500, 7500, 2000, 3000, 5000}));
  REQUIRE(d["n"] == 3);
}

TEST_CASE("the description names where attention goes", "[report][heat_map]") {
  // every query looks at the token before it
  const std::vector<float> previous{1, 0, 0, 1, 0, 0, 0, 1, 0};
  const std::string text = report::describe_attention(previous, {"a", "b", "c"});
  REQUIRE_THAT(text, Contains("itself 0.33") && Contains("previous token 1.00"));
  REQUIRE_THAT(text, Contains("query 1 'b' on key 0 'a', 1.0000"));
}

// ------------------------------------------------------------------ the page
namespace {

report::MetricsRun hostile_run() {
  report::MetricsRun run = report::parse_metrics(
      R"({"event": "start", "config": {"lr": 0.001, "d_model": 32, "data": "</script><script>alert(2)</script>"}, "parameters": 1234567, "baselines": {"unigram": 3.1, "bigram": 2.0, "corpus_floor": 0.9}})"
      "\n"
      R"({"step": 1, "loss": 3.5, "lr": 0.0001, "grad_norm": 2.0, "tokens_per_s": 1000, "elapsed_s": 1})"
      "\n"
      R"({"step": 2, "loss": 3.0, "lr": 0.0002, "grad_norm": 1.5, "tokens_per_s": 1100, "elapsed_s": 2, "val_loss": 3.1, "val_bits_per_byte": 4.4})"
      "\n",
      "x.jsonl");
  run.name = kHostile;
  return run;
}

report::ModelView hostile_model() {
  report::ModelView m;
  m.source = "<svg onload=alert(3)>.h5", m.step = 2, m.parameters = 10, m.vocab_size = 256;
  m.prompt = "<script>";
  m.sample_prompt = "<script>", m.sample = "</pre><script>alert(4)</script>";
  report::PromptView pv;
  pv.tokens = {"<", "s", ">"};
  pv.layers = 1, pv.heads = 2;
  pv.weights = {{1, 0, 0, .5f, .5f, 0, .2f, .3f, .5f}, {1, 0, 0, 1, 0, 0, 1, 0, 0}};
  pv.loss = {NAN, 1.5, 0.2};
  pv.predictions = {"", "'<' 50%", "'>' 80%"};
  m.prompt_view = pv;
  return m;
}

}  // namespace

TEST_CASE("the report page keeps hostile names, prompts and samples as text", "[report][page]") {
  report::ReportInputs in;
  in.runs = {hostile_run()};
  in.model = hostile_model();
  in.generated_by = "test";
  const std::string page = report::render_report(in);
  REQUIRE(report_count(page, "<script") == 2);  // the data and the page's own script
  REQUIRE(page.find("<img") == std::string::npos);
  REQUIRE(page.find("<svg onload") == std::string::npos);
  REQUIRE(page.find("alert(2)</script>") == std::string::npos);
  REQUIRE_THAT(page, Contains("&lt;img src=x onerror=alert(1)&gt;"));
  REQUIRE_THAT(page, Contains("&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;"));
  REQUIRE_THAT(page, Contains("<span class=\"prompt\">&lt;script&gt;</span>"));
  REQUIRE(report_count(page, "<svg class=\"chart\"") == 5);
  REQUIRE(report_count(page, "<svg class=\"heat-map\"") == 2);
  REQUIRE_THAT(page, Contains("1,234,567"));
}

TEST_CASE("the report page allows only its own script and style and no request", "[report][page]") {
  report::ReportInputs in;
  in.runs = {hostile_run()};
  const std::string page = report::render_report(in);
  REQUIRE_THAT(page, Contains("default-src 'none'"));
  REQUIRE_THAT(page,
               Contains("script-src '" + report::html::csp_hash(report::report_script()) + "'"));
  REQUIRE_THAT(page,
               Contains("style-src '" + report::html::csp_hash(report::report_style()) + "'"));
  REQUIRE_THAT(page, Contains("<script>" + report::report_script() + "</script>"));
  REQUIRE_THAT(page, Contains("<style>" + report::report_style() + "</style>"));
  for (const char* reference : {"src=\"http", "href=\"http", "url(http", "@import", "//fonts."})
    REQUIRE(page.find(reference) == std::string::npos);
  REQUIRE(page.find("http-equiv=\"refresh\"") == std::string::npos);
  in.refresh_seconds = 30;
  REQUIRE_THAT(report::render_report(in), Contains("<meta http-equiv=\"refresh\" content=\"30\">"));
}

TEST_CASE("the report overlays runs and names what differs in their configs", "[report][page]") {
  report::MetricsRun a = report::parse_metrics(
      "{\"event\": \"start\", \"config\": {\"lr\": 0.001, \"d_model\": 32}}\n"
      "{\"step\": 1, \"loss\": 2.0}\n",
      "a/run.jsonl");
  report::MetricsRun b = a;
  b.path = "b/run.jsonl";
  b.start["config"]["lr"] = 0.0003;
  std::vector<report::MetricsRun> runs{a, b};
  report::name_runs(runs);
  REQUIRE(runs[0].name == "a/run.jsonl");
  REQUIRE(runs[1].name == "b/run.jsonl");
  nlohmann::json data;
  const std::string html = report::charts_section(runs, data);
  REQUIRE_THAT(html, Contains("lr=0.001</span>") && Contains("lr=0.0003</span>"));
  REQUIRE(html.find("d_model=") == std::string::npos);  // the same in both
  REQUIRE(data["charts"][0]["series"].size() == 2);
  REQUIRE(data["charts"][0]["series"][1]["name"] == "b/run.jsonl: train loss");
}

TEST_CASE("model_view gives each token's loss and every head's weights", "[report][page]") {
  nn::GPT model(ag_test::gpt_config(256, 16, 16, 2, 2, 0.0), 3);
  model.eval();
  const data::ByteTokenizer bytes;
  report::ModelViewOptions o;
  o.source = "m.h5", o.prompt = "<script>", o.sample_tokens = 5;
  const report::ModelView v = report::model_view(model, bytes, o);
  REQUIRE(v.prompt_view);
  const report::PromptView& pv = *v.prompt_view;
  REQUIRE(pv.tokens.size() == 8);
  REQUIRE(pv.tokens[0] == "<");
  REQUIRE(pv.layers == 2);
  REQUIRE(pv.heads == 2);
  REQUIRE(pv.weights.size() == 4);
  REQUIRE(std::isnan(pv.loss[0]));
  // their mean is the cross-entropy GPT::forward computes for the prompt
  const std::vector<int64_t> ids{'<', 's', 'c', 'r', 'i', 'p', 't', '>'};
  ag::NoGradGuard no_grad;
  const ag::Tensor x = ag::from_vector(std::vector<int64_t>(ids.begin(), ids.end() - 1), {1, 7});
  const ag::Tensor y = ag::from_vector(std::vector<int64_t>(ids.begin() + 1, ids.end()), {1, 7});
  double mean = 0;
  for (size_t t = 1; t < 8; ++t) mean += pv.loss[t] / 7;
  REQUIRE_THAT(mean, Catch::Matchers::WithinAbs(model.forward(x, y).loss.item(), 1e-5));
  REQUIRE(v.sample.size() == 5);
  o.prompt = std::string(17, 'a');
  REQUIRE_THROWS_WITH(report::model_view(model, bytes, o), Contains("17 tokens") && Contains("16"));
}

TEST_CASE("model_view of a classifier shows attention maps but no token losses or sample",
          "[report][page]") {
  nn::GPTConfig cfg = ag_test::gpt_config(256, 16, 16, 2, 2, 0.0);
  cfg.num_classes = 3;
  nn::GPT model(cfg, 3);
  model.eval();
  const data::ByteTokenizer bytes;
  report::ModelViewOptions o;
  o.source = "c.h5", o.prompt = "a spam text", o.sample_tokens = 5;
  const report::ModelView v = report::model_view(model, bytes, o);
  REQUIRE(v.prompt_view);
  CHECK(v.prompt_view->loss.empty());
  CHECK(v.prompt_view->weights.size() == 4);
  CHECK(v.sample.empty());
  report::ReportInputs in;
  in.model = v;
  const std::string page = report::render_report(in);
  CHECK(page.find("Per-token loss") == std::string::npos);
}

TEST_CASE("token labels make spaces, newlines and escapes visible", "[report][page]") {
  REQUIRE(report::token_label(" ") == "\xe2\x90\xa3");
  REQUIRE(report::token_label("\n") == "\xe2\x86\xb5");
  REQUIRE(report::token_label("\x1b") == "\\x1b");
  REQUIRE(report::thousands(1234567) == "1,234,567");
  REQUIRE(report::thousands(-12) == "-12");
}

TEST_CASE("a live page before the first step has no empty charts", "[report][page]") {
  report::ReportInputs in;
  in.runs = {report::parse_metrics("{\"event\": \"start\", \"config\": {\"lr\": 0.001}}\n", "a")};
  in.refresh_seconds = 30;
  const std::string page = report::render_report(in);
  REQUIRE_THAT(page, Contains("No step has been reported yet."));
  REQUIRE(page.find("<svg class=\"chart\"") == std::string::npos);
  REQUIRE(page.find("d=\"\"") == std::string::npos);
  // a series with nothing drawable on the log scale gets no path there
  report::LineChart c = small_chart();
  c.series.push_back({"negative", "#000000", false, {1, 2}, {-1.0, -2.0}});
  const std::string svg = report::render_line_chart(c).svg;
  REQUIRE(report_count(svg, "<path class=\"line") == 1);
  REQUIRE(svg.find("d=\"\"") == std::string::npos);
}

TEST_CASE("the page holds every point for its controls, and each sample as text",
          "[report][page]") {
  report::MetricsRun run = hostile_run();
  run.samples = {{20, "<script>alert(5)</script>"}, {40, "\x1b[2J\u202e"}};
  report::ReportInputs in;
  in.runs = {run};
  const std::string page = report::render_report(in);
  REQUIRE_THAT(page, Contains("<div class=\"chart-controls\" id=\"chart-controls\""));
  REQUIRE_THAT(page, Contains("id=\"smoothing\" min=\"0\" max=\"0.99\""));
  REQUIRE_THAT(page, Contains("value=\"tokens\" disabled"));  // no batch_size in the record
  REQUIRE_THAT(page, Contains("id=\"zoom-in\"") && Contains("id=\"zoom-reset\""));
  REQUIRE_THAT(page, Contains("id=\"csv-download\" download=\"metrics.csv\""));
  REQUIRE_THAT(page, Contains("<a href=\"#samples\">Samples</a>"));
  REQUIRE_THAT(page, Contains("max=\"1\" step=\"1\" value=\"1\""));  // the last sample first
  REQUIRE_THAT(page, Contains("<pre class=\"sample\">&lt;script&gt;alert(5)&lt;/script&gt;</pre>"));
  REQUIRE_THAT(page, Contains("<pre class=\"sample\">\\x1b[2J\\u{202e}</pre>"));
  REQUIRE(page.find("alert(5)</script>") == std::string::npos);
  nlohmann::json data;
  report::charts_section(in.runs, data);
  const nlohmann::json& columns = data["runs"][0]["columns"];
  REQUIRE(columns["step"] == nlohmann::json({1, 2}));
  REQUIRE(columns["loss"] == nlohmann::json({3.5, 3.0}));
  REQUIRE(columns["val_loss"] == nlohmann::json({nullptr, 3.1}));
  REQUIRE(columns["wall_s"] == nlohmann::json({1.0, 2.0}));
  REQUIRE(data["runs"][0]["name"] == kHostile);
  REQUIRE(data["charts"][0]["series"][0]["field"] == "loss");
  REQUIRE_FALSE(data["charts"][0]["series"][0].contains("x"));  // the page's table has them
}

TEST_CASE("a run of many points puts an even share and every evaluation in the page's table",
          "[report][page]") {
  report::MetricsRun run;
  run.name = run.path = "long.jsonl";
  for (int64_t step = 1; step <= 50000; ++step) {
    report::MetricsPoint p;
    p.step = step, p.loss = 1.0 / static_cast<double>(step);
    if (step % 1000 == 7) p.val_loss = 2;
    run.points.push_back(p);
  }
  nlohmann::json data;
  const std::string charts = report::charts_section({run}, data);
  const nlohmann::json& columns = data["runs"][0]["columns"];
  const auto& steps = columns["step"];
  REQUIRE(steps.size() <= 20000 + 50 + 1);
  REQUIRE(steps.size() > 20000 / 2);  // an even share: every third point of 50,000
  REQUIRE(steps.back() == 50000);     // the last point
  size_t evaluations = 0;
  for (const auto& v : columns["val_loss"]) evaluations += v.is_number();
  REQUIRE(evaluations == 50);  // every one
  REQUIRE_THAT(charts, Contains("long.jsonl: " + std::to_string(steps.size()) +
                                " of its 50000 "
                                "points"));
}

TEST_CASE("the configuration table takes time linear in the number of config keys",
          "[report][page]") {
  // a config from a file may hold any number of keys: checking each new one against all
  // those before it took minutes for these 200,000
  nlohmann::json config = nlohmann::json::object();
  for (int i = 0; i < 200000; ++i) config["key_" + std::to_string(i)] = i;
  report::MetricsRun run;
  run.name = "run";
  run.start = {{"event", "start"}, {"config", config}};
  report::ReportInputs in;
  in.runs = {run, run};
  const auto start = std::chrono::steady_clock::now();
  const std::string html = report::config_section(in);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  REQUIRE(report_count(html, "<th scope=\"row\">key_") == 200000);
  REQUIRE(took.count() < 20);  // well under a second unloaded
}
