// "Your journey starts with one step": the attention chapter's six 3-d token embeddings,
// a self-attention layer with trainable weights, and a few AdamW steps teaching it to map
// each token to the mean of the tokens up to it (what a causal average would give).
#include <attograd/autograd/autograd.h>
#include <attograd/nn/nn.h>
#include <attograd/optim/optim.h>

#include <cstdio>

int main() {
  // Your, journey, starts, with, one, step (x^1 .. x^6)
  const ag::Tensor inputs = ag::from_vector(
      std::vector<float>{0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f, 0.22f,
                         0.58f, 0.33f, 0.77f, 0.25f, 0.10f, 0.05f, 0.80f, 0.55f},
      {6, 3});
  // the target: token i's context is the mean of tokens 1..i
  std::vector<float> target(18);
  for (int i = 0; i < 6; ++i)
    for (int d = 0; d < 3; ++d) {
      float sum = 0;
      for (int j = 0; j <= i; ++j) sum += inputs.to_vector()[j * 3 + d];
      target[i * 3 + d] = sum / static_cast<float>(i + 1);
    }
  const ag::Tensor wanted = ag::from_vector(target, {6, 3});

  ag::Generator gen(123);
  nn::SelfAttention_v2 attention(/*d_in=*/3, /*d_out=*/3, /*qkv_bias=*/false, gen);
  optim::AdamW opt(optim::decay_groups(attention.named_parameters(), 0.0), /*lr=*/0.05);
  for (int step = 1; step <= 60; ++step) {
    opt.zero_grad();
    const ag::Tensor diff = attention.forward(inputs) - wanted;
    ag::Tensor loss = ag::mean(diff * diff);
    loss.backward();
    opt.step();
    if (step == 1 || step % 10 == 0) std::printf("step %2d  loss %.5f\n", step, loss.item());
  }
  return 0;
}
