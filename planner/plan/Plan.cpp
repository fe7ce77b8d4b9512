//===- Plan.cpp - out-of-line helpers of the plan structs -----------------===//

#include "planner/plan/Plan.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sharc::plan {

const char *regionName(Region region) {
  switch (region) {
  case Region::Param:
    return "param";
  case Region::OptState:
    return "opt_state";
  case Region::Input:
    return "input";
  case Region::Output:
    return "output";
  case Region::Activation:
    return "activation";
  case Region::Gradient:
    return "gradient";
  case Region::Cache:
    return "cache";
  }
  return "?";
}

std::optional<int64_t> Buffer::extentBytes() const {
  int64_t numel = 1;
  for (int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(numel, dim, &numel))
      return std::nullopt;
  int64_t elements = numel;
  if (isStrided() && numel > 0) {
    int64_t rows = numel / shape.back(), span = 0;
    if (__builtin_mul_overflow(rows - 1, rowStride, &span) ||
        __builtin_add_overflow(span, shape.back(), &elements))
      return std::nullopt;
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, dtypeSize(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

bool Sharding::isReplicated() const {
  for (const auto &[axis, dim] : dimOfAxis)
    if (dim >= 0)
      return false;
  return true;
}

int64_t Instruction::getInt(const std::string &key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return fallback;
  if (const auto *value = std::get_if<int64_t>(&it->second))
    return *value;
  return fallback;
}

double Instruction::getFloat(const std::string &key, double fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return fallback;
  if (const auto *value = std::get_if<double>(&it->second))
    return *value;
  // A float attribute that happens to be integral (eps: 1) is still a float.
  if (const auto *value = std::get_if<int64_t>(&it->second))
    return static_cast<double>(*value);
  return fallback;
}

std::string Instruction::getString(const std::string &key,
                                   const std::string &fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return fallback;
  if (const auto *value = std::get_if<std::string>(&it->second))
    return *value;
  return fallback;
}

std::vector<int64_t> Instruction::getInts(const std::string &key) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return {};
  if (const auto *value = std::get_if<std::vector<int64_t>>(&it->second))
    return *value;
  return {};
}

double LrSchedule::factor(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (decay == "constant")
    return 1.0;
  double progress = static_cast<double>(step - warmupSteps) /
                    static_cast<double>(totalSteps - warmupSteps);
  progress = std::clamp(progress, 0.0, 1.0);
  if (decay == "cosine")
    return minFactor + (1.0 - minFactor) * 0.5 *
                           (1.0 + std::cos(std::numbers::pi * progress));
  return 1.0 - (1.0 - minFactor) * progress; // linear
}

int64_t Plan::worldSize() const {
  int64_t size = 1;
  for (const MeshAxis &axis : mesh)
    size *= axis.size;
  return size;
}

int64_t Plan::axisSize(const std::string &axis) const {
  // A plan without an axis behaves as if the axis had size 1, so a kernel
  // may ask for "tp" in a dense plan. A reduction over several axes at
  // once names them joined by ',' ("dp,tp") and spans their product.
  int64_t size = 1;
  size_t start = 0;
  while (start <= axis.size()) {
    size_t end = std::min(axis.find(',', start), axis.size());
    std::string name = axis.substr(start, end - start);
    for (const MeshAxis &meshAxis : mesh)
      if (meshAxis.name == name)
        size *= meshAxis.size;
    start = end + 1;
  }
  return size;
}

namespace {
template <typename Entry>
const Entry *findByName(const std::vector<Entry> &entries,
                        const std::string &name) {
  for (const Entry &entry : entries)
    if (entry.name == name)
      return &entry;
  return nullptr;
}
} // namespace

const IoEntry *Plan::findInput(const std::string &name) const {
  return findByName(inputs, name);
}

const IoEntry *Plan::findOutput(const std::string &name) const {
  return findByName(outputs, name);
}

const ParamEntry *Plan::findParam(const std::string &name) const {
  return findByName(params, name);
}

} // namespace sharc::plan
