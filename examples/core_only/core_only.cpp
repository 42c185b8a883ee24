// Tensors and autograd alone (attograd::core): a two-layer network learns XOR by plain
// gradient descent. It links BLAS, oneDNN and OpenMP, and nothing of checkpoints or MPI.
#include <attograd/autograd/autograd.h>

#include <cstdio>
#include <vector>

int main() {
  ag::Generator gen(7);
  const ag::Tensor x = ag::from_vector(std::vector<float>{0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  const ag::Tensor y = ag::from_vector(std::vector<float>{0, 1, 1, 0}, {4, 1});
  std::vector<ag::Tensor> params = {ag::randn({2, 8}, gen), ag::zeros({8}), ag::randn({8, 1}, gen),
                                    ag::zeros({1})};
  for (auto& p : params) p.requires_grad_();
  double loss = 0;
  for (int step = 1; step <= 2000; ++step) {
    const ag::Tensor h = ag::tanh(ag::matmul(x, params[0]) + params[1]);
    const ag::Tensor diff = ag::matmul(h, params[2]) + params[3] - y;
    ag::Tensor mse = ag::mean(diff * diff);
    for (auto& p : params) p.zero_grad();
    mse.backward();
    ag::NoGradGuard no_grad;
    for (auto& p : params) ag::add_(p, p.grad() * -0.2);
    loss = mse.item();
    if (step % 500 == 0) std::printf("step %4d  loss %.5f\n", step, loss);
  }
  return loss < 0.01 ? 0 : 1;  // XOR learnt
}
