//===- DivergenceTest.cpp - a diverged state is found in any dtype --------===//

#include "executor/Divergence.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {
/// Sets element `index` of the tensor called `name` to the raw `bits`.
template <typename Bits>
void poke(plan::TensorFile &file, const std::string &name, size_t index,
          Bits bits) {
  for (plan::NamedTensor &tensor : file.tensors)
    if (tensor.name == name) {
      REQUIRE(tensor.bytes.size() >= (index + 1) * sizeof(Bits));
      std::memcpy(tensor.bytes.data() + index * sizeof(Bits), &bits,
                  sizeof(Bits));
      return;
    }
  FAIL("no tensor " << name);
}
} // namespace

TEST_CASE("a non-finite moment or parameter is found, bf16 and f32",
          "[executor]") {
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO(dtypeName(dtype));
    auto runtime =
        Runtime::create(makeLinearPlan(LinearModel{}, 1, 2, dtype), {});
    REQUIRE(runtime);
    Runtime &rt = **runtime;
    REQUIRE(rt.initParams(5));
    auto clean = findDivergence(rt);
    REQUIRE(clean);
    REQUIRE_FALSE(clean->has_value());

    // +inf in the last element of v: its exponent bits alone.
    auto state = rt.gatherOptimizerState();
    REQUIRE(state);
    size_t last = 8 * 4 - 1; // head.weight is [8, 4]
    if (dtype == DType::BF16)
      poke<uint16_t>(*state, "head.weight.exp_avg_sq", last, 0x7f80);
    else
      poke<uint32_t>(*state, "head.weight.exp_avg_sq", last, 0x7f800000);
    REQUIRE(rt.loadOptimizerState(*state));
    auto moment = findDivergence(rt);
    REQUIRE(moment);
    REQUIRE(moment->value_or("") ==
            "the gradient norm is not finite (AdamW moment "
            "'head.weight.exp_avg_sq' holds inf)");

    // A NaN parameter with finite moments.
    REQUIRE(rt.initParams(5));
    auto params = rt.gatherParams();
    REQUIRE(params);
    if (dtype == DType::BF16)
      poke<uint16_t>(*params, "embed.weight", 3, 0x7fc1);
    else
      poke<uint32_t>(*params, "embed.weight", 3, 0x7fc00001);
    REQUIRE(rt.loadParams(*params));
    auto param = findDivergence(rt);
    REQUIRE(param);
    REQUIRE(param->value_or("") == "parameter 'embed.weight' holds nan");
  }
}

TEST_CASE("the watch names the first non-finite value past the first chunk",
          "[executor]") {
  // 10,000 elements: the scan tests chunks of 4096 without a branch each.
  // 12 million: a tensor past 16 MiB is cut into parts scanned on threads
  // at once (1, 3 and 6 parts here), of which the first holding one answers.
  auto tensorOf = [](DType dtype,
                     const std::vector<std::pair<size_t, double>> &values,
                     size_t count = 10000) {
    plan::NamedTensor tensor{.name = "w",
                             .dtype = dtype,
                             .shape = {static_cast<int64_t>(count)},
                             .bytes = {}};
    tensor.bytes.assign(count * dtypeSize(dtype), 0);
    for (auto [index, value] : values) {
      uint8_t *at = tensor.bytes.data() + index * dtypeSize(dtype);
      if (dtype == DType::F32) {
        float narrow = static_cast<float>(value);
        std::memcpy(at, &narrow, 4);
      } else if (dtype == DType::F64) {
        std::memcpy(at, &value, 8);
      } else {
        uint16_t bits = floatToBf16(static_cast<float>(value));
        std::memcpy(at, &bits, 2);
      }
    }
    return tensor;
  };
  double inf = INFINITY, nan = NAN;
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    INFO(dtypeName(dtype));
    DivergenceWatch finite;
    finite.see(tensorOf(dtype, {{9999, 3.5}, {4096, -1e30}}), false);
    REQUIRE_FALSE(finite.verdict());
    DivergenceWatch infFirst;
    infFirst.see(tensorOf(dtype, {{7000, nan}, {5000, -inf}}), false);
    REQUIRE(infFirst.verdict().value_or("") == "parameter 'w' holds inf");
    DivergenceWatch nanFirst;
    nanFirst.see(tensorOf(dtype, {{4097, nan}, {9999, inf}}), false);
    REQUIRE(nanFirst.verdict().value_or("") == "parameter 'w' holds nan");
    const size_t big = 12'000'000;
    DivergenceWatch bigFinite;
    bigFinite.see(tensorOf(dtype, {{big - 1, 2.0}}, big), false);
    REQUIRE_FALSE(bigFinite.verdict());
    DivergenceWatch bigInfFirst; // each in a later part than the one before
    bigInfFirst.see(
        tensorOf(dtype, {{big - 2, nan}, {7'000'000, inf}, {9'500'000, nan}},
                 big),
        false);
    REQUIRE(bigInfFirst.verdict().value_or("") == "parameter 'w' holds inf");
    DivergenceWatch bigNanLast;
    bigNanLast.see(tensorOf(dtype, {{big - 1, nan}}, big), false);
    REQUIRE(bigNanLast.verdict().value_or("") == "parameter 'w' holds nan");
    // A moment outranks a parameter seen before it.
    nanFirst.see(tensorOf(dtype, {{8191, inf}}), true);
    REQUIRE(nanFirst.verdict().value_or("") ==
            "the gradient norm is not finite (AdamW moment 'w' holds inf)");
  }
}
