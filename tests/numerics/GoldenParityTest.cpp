//===- GoldenParityTest.cpp - the CPU backend against PyTorch -------------===//
//
// tests/golden/make_golden.py computed, with PyTorch in fp32, the loss,
// logits and every gradient of the tiny model at fixed weights and tokens,
// and the parameters after 3 AdamW steps. The same model file compiled by
// sharc and run on the CPU backend must reproduce them.
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::testing;

namespace {

plan::TensorFile readFixture(const std::string &name) {
  auto file = plan::readSafeTensors(fixturePath(name));
  if (!file.isOk())
    FAIL(file.status().message());
  return std::move(file.value());
}

/// The tensors named "<prefix><param>", renamed to "<param>".
plan::TensorFile withPrefix(const plan::TensorFile &file,
                            const std::string &prefix) {
  plan::TensorFile result;
  for (const plan::NamedTensor &tensor : file.tensors)
    if (tensor.name.rfind(prefix, 0) == 0) {
      plan::NamedTensor renamed = tensor;
      renamed.name = tensor.name.substr(prefix.size());
      result.tensors.push_back(std::move(renamed));
    }
  return result;
}

std::vector<int32_t> tokensOf(const plan::TensorFile &fixture) {
  const plan::NamedTensor *tokens = fixture.find("tokens");
  REQUIRE(tokens != nullptr);
  std::vector<int32_t> ids;
  for (double id : plan::tensorAsDoubles(*tokens))
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

/// [S, B, V] sequence-first logits to the fixture's [B, S, V].
std::vector<double> toBatchFirst(const std::vector<double> &logits, int64_t s,
                                 int64_t b, int64_t v) {
  std::vector<double> result(logits.size());
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t vi = 0; vi < v; ++vi)
        result[(bi * s + si) * v + vi] = logits[(si * b + bi) * v + vi];
  return result;
}

/// Per tensor: max |a - b| <= 1e-5 * max |b| (fp32 noise measured by the
/// fixture script against float64 is below 1.5e-6 of that scale).
void requireClose(const std::string &what, const std::vector<double> &actual,
                  const std::vector<double> &expected) {
  double error = maxAbsError(actual, expected);
  double scale = maxAbs(expected);
  INFO(what << ": max |error| " << error << ", max |reference| " << scale
            << ", relative L2 " << relativeL2(actual, expected));
  REQUIRE(error <= 1e-5 * scale);
}

void checkForwardAndGradients(const std::string &modelFile,
                              const std::string &fixtureFile) {
  plan::TensorFile fixture = readFixture(fixtureFile);
  plan::Plan plan = compilePlan(modelFile, /*emitLogits=*/true,
                                /*withOptimizer=*/false);
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->loadParams(withPrefix(fixture, "param:")).isOk());
  REQUIRE(runtime->setBatch(tokensOf(fixture)).isOk());
  auto stats = runtime->step();
  REQUIRE(stats.isOk());

  double expectedLoss = plan::tensorAsDoubles(*fixture.find("loss"))[0];
  INFO("loss " << stats->loss << " vs PyTorch " << expectedLoss);
  REQUIRE(std::fabs(stats->loss - expectedLoss) <= 1e-5 * expectedLoss);

  auto logits = runtime->gatherOutput("logits");
  REQUIRE(logits.isOk());
  requireClose("logits",
               toBatchFirst(plan::tensorAsDoubles(*logits), plan.seqLen,
                            plan.batchSize, plan.vocabSize),
               plan::tensorAsDoubles(*fixture.find("logits")));

  plan::TensorFile grads = withPrefix(fixture, "grad:");
  REQUIRE(grads.tensors.size() == plan.params.size());
  for (const plan::NamedTensor &expected : grads.tensors) {
    auto actual = runtime->gatherOutput("grad:" + expected.name);
    REQUIRE(actual.isOk());
    REQUIRE(actual->shape == expected.shape);
    requireClose("grad:" + expected.name, plan::tensorAsDoubles(*actual),
                 plan::tensorAsDoubles(expected));
  }
}

void checkAdamWSteps(const std::string &modelFile,
                     const std::string &fixtureFile) {
  plan::TensorFile fixture = readFixture(fixtureFile);
  plan::Plan plan = compilePlan(modelFile, false, /*withOptimizer=*/true);
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->loadParams(withPrefix(fixture, "param:")).isOk());
  REQUIRE(runtime->setBatch(tokensOf(fixture)).isOk());
  std::vector<double> losses = plan::tensorAsDoubles(*fixture.find("losses"));
  for (int step = 0; step < 3; ++step) {
    auto stats = runtime->step();
    REQUIRE(stats.isOk());
    INFO("step " << step + 1 << ": loss " << stats->loss << " vs PyTorch "
                 << losses[step]);
    REQUIRE(std::fabs(stats->loss - losses[step]) <= 1e-5 * losses[step]);
  }

  auto params = runtime->gatherParams();
  REQUIRE(params.isOk());
  plan::TensorFile grads = withPrefix(fixture, "grad:");
  for (const plan::NamedTensor &expected :
       withPrefix(fixture, "step3:").tensors) {
    const plan::NamedTensor *actual = params->find(expected.name);
    REQUIRE(actual != nullptr);
    std::vector<double> a = plan::tensorAsDoubles(*actual);
    std::vector<double> b = plan::tensorAsDoubles(expected);
    std::vector<double> g = plan::tensorAsDoubles(*grads.find(expected.name));
    // Adam's first update is lr * g / (|g| + eps): where 0 < |g| < 1e-6 it
    // is nearly a sign, and fp32 noise in g moves it by up to 6.4e-5
    // (measured against float64 by make_golden.py), so those few elements
    // get lr * 3 of slack. Everywhere else the bound is 5e-6 + 1e-6 |b|.
    int64_t tinyGradients = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      bool tiny = g[i] != 0.0 && std::fabs(g[i]) < 1e-6;
      tinyGradients += tiny;
      double bound = tiny ? 3e-3 : 5e-6 + 1e-6 * std::fabs(b[i]);
      INFO(expected.name << "[" << i << "]: " << a[i] << " vs PyTorch " << b[i]
                         << " (grad " << g[i] << ")");
      REQUIRE(std::fabs(a[i] - b[i]) <= bound);
    }
    // The slack must stay an exception (45 elements in the whole model).
    REQUIRE(tinyGradients * 100 <= static_cast<int64_t>(a.size()) + 100);
  }
}

} // namespace

TEST_CASE("untied tiny model: loss, logits and gradients match PyTorch",
          "[numerics][golden]") {
  checkForwardAndGradients("tiny.yaml", "tiny-untied.safetensors");
}

TEST_CASE("tied tiny model: loss, logits and gradients match PyTorch",
          "[numerics][golden]") {
  checkForwardAndGradients("tiny-tied.yaml", "tiny-tied.safetensors");
}

TEST_CASE("untied tiny model: 3 AdamW steps match PyTorch",
          "[numerics][golden]") {
  checkAdamWSteps("tiny.yaml", "tiny-untied.safetensors");
}

TEST_CASE("tied tiny model: 3 AdamW steps match PyTorch",
          "[numerics][golden]") {
  checkAdamWSteps("tiny-tied.yaml", "tiny-tied.safetensors");
}
