//===- Divergence.cpp - find a diverged training state --------------------===//

#include "executor/Divergence.h"

#include <cmath>

namespace sharc::exec {
namespace {

/// The first tensor with a value that is not finite, as "WHAT 'name' holds
/// nan" (or inf).
std::optional<std::string> firstNonFinite(const plan::TensorFile &file,
                                          const std::string &what) {
  for (const plan::NamedTensor &tensor : file.tensors)
    for (double value : plan::tensorAsDoubles(tensor))
      if (!std::isfinite(value))
        return what + " '" + tensor.name + "' holds " +
               (std::isnan(value) ? "nan" : "inf");
  return std::nullopt;
}

} // namespace

Result<std::optional<std::string>> findDivergence(const Runtime &runtime) {
  auto state = runtime.gatherOptimizerState();
  if (!state)
    return state.status();
  if (auto found = firstNonFinite(*state, "AdamW moment"))
    return std::optional<std::string>("the gradient norm is not finite (" +
                                      *found + ")");
  auto params = runtime.gatherParams();
  if (!params)
    return params.status();
  return firstNonFinite(*params, "parameter");
}

} // namespace sharc::exec
