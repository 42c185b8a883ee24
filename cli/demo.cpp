// `attograd demo`: the attention chapter's worked numbers, then a small network trained
// by gradient descent with every gradient from backward().
#include <fmt/format.h>

#include "autograd/autograd.h"
#include "base/error_text.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "train/console.h"

namespace cli {

using ag::Tensor;

namespace {

void attention_walkthrough() {
  Tensor inputs = ag::tensor({{0.43, 0.15, 0.89},    // Your
                              {0.55, 0.87, 0.66},    // journey
                              {0.57, 0.85, 0.64},    // starts
                              {0.22, 0.58, 0.33},    // with
                              {0.77, 0.25, 0.10},    // one
                              {0.05, 0.80, 0.55}});  // step
  Tensor scores = ag::matmul(inputs, inputs.t());
  Tensor weights = ag::softmax(scores, -1);
  fmt::print("Self-attention over \"Your journey starts with one step\" (d = 3)\n");
  fmt::print("attention scores = inputs @ inputs.T\n{}\n", scores.str());
  fmt::print("attention weights = softmax(scores, dim=-1)\n{}\n", weights.str());
  fmt::print("context vectors = weights @ inputs\n{}\n\n", ag::matmul(weights, inputs).str());
}

// A two-layer tanh network fitted to y = x0 * x1 + 0.5 x0^2 by full-batch gradient
// descent; every gradient comes from backward().
void fit_mlp(uint64_t seed, int steps, double lr) {
  ag::Generator gen(seed);
  const int64_t n = 256, hidden = 32;
  Tensor x = ag::uniform({n, 2}, -1, 1, gen);
  Tensor x0 = x.narrow(1, 0, 1), x1 = x.narrow(1, 1, 1);
  Tensor y = x0 * x1 + ag::pow(x0, 2.0) * 0.5;
  std::vector<Tensor> params = {
      ag::normal({2, hidden}, 0, 0.5, gen).requires_grad_(), ag::zeros({hidden}).requires_grad_(),
      ag::normal({hidden, 1}, 0, 0.5, gen).requires_grad_(), ag::zeros({1}).requires_grad_()};
  fmt::print(
      "Fitting y = x0*x1 + x0^2/2 with a 2-32-1 tanh network, {} steps of gradient "
      "descent (lr {})\n",
      steps, lr);
  for (int step = 1; step <= steps; ++step) {
    Tensor h = ag::tanh(ag::matmul(x, params[0]) + params[1]);
    Tensor pred = ag::matmul(h, params[2]) + params[3];
    Tensor loss = ag::mean(ag::pow(pred - y, 2.0));
    for (auto& p : params) p.zero_grad();
    loss.backward();
    {
      ag::NoGradGuard no_grad;
      for (auto& p : params) ag::add_(p, p.grad() * -lr);
    }
    if (step == 1 || step % (steps / 10 > 0 ? steps / 10 : 1) == 0)
      fmt::print("step {:5d}  loss {:.6f}\n", step, loss.item());
  }
}

}  // namespace

int demo_command(const Args& args) {
  uint64_t seed = 0;
  int steps = 300;
  double lr = 0.1;
  po::options_description desc("demo options");
  desc.add_options()("help,h", "show this help")("seed", po::value(&seed)->default_value(0),
                                                 "random seed")(
      "steps", po::value(&steps)->default_value(300), "gradient descent steps")(
      "lr", value_with_default(&lr, 0.1), "learning rate");
  try {
    auto vm = parse_options(args, desc);
    if (vm.count("help")) {
      fmt::print("usage: attograd demo [options]\n");
      return 0;
    }
  } catch (const UsageError& e) {
    train::noticef("attograd demo: error: {}\n",
                   base::printable(base::without_error_prefix(e.what())));
    return 2;
  }
  attention_walkthrough();
  fit_mlp(seed, steps, lr);
  return 0;
}

}  // namespace cli
