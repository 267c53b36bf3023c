// With varsync::cuda linked, cuda:0 reaches the CUDA backend: on a machine
// without a GPU, strategy creation fails with the backend's device error,
// not with "needs the CUDA backend". Exit 0 when the backend answered.
#include <cstdio>
#include <string>

#include <varsync/varsync.hpp>

int main() {
  varsync::strategy_options options;
  options.devices = {"cuda:0"};
  auto s = varsync::strategy::create(options);
  if (s) {
    std::printf("cuda:0 strategy: %s\n", s->description().c_str());
    return 0;
  }
  auto msg = varsync::describe(s.error());
  std::printf("cuda:0 without a usable GPU: %s\n", msg.c_str());
  return msg.find("needs the CUDA backend") == std::string::npos ? 0 : 1;
}
