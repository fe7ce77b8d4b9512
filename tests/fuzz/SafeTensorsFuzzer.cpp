//===- SafeTensorsFuzzer.cpp - fuzz the safetensors reader ----------------===//
//
// The input is a whole .safetensors file (checkpoints, --dump-outputs,
// golden fixtures). An accepted file must hold tensors whose bytes match
// their shapes and lie inside the input, sorted by unique name, so that
// tensorAsDoubles and the checkpoint loader may trust them.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/SafeTensors.h"
#include "tests/fuzz/FuzzCheck.h"

#include <cstdint>
#include <string_view>

using namespace sharc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  Result<plan::TensorFile> file = plan::parseSafeTensors(bytes, "fuzz.st");
  if (!file) {
    SHARC_FUZZ_CHECK(file.status().exitCode() == 2,
                     "a bad safetensors file is bad input");
    return 0;
  }
  size_t totalBytes = 0;
  for (size_t i = 0; i < file->tensors.size(); ++i) {
    const plan::NamedTensor &tensor = file->tensors[i];
    if (i > 0)
      SHARC_FUZZ_CHECK(file->tensors[i - 1].name < tensor.name,
                       "tensors sorted by unique name");
    int64_t elements = 1;
    for (int64_t dim : tensor.shape) {
      SHARC_FUZZ_CHECK(dim >= 0, "dimensions are non-negative");
      elements *= dim; // bounded: the reader checked the byte count
    }
    SHARC_FUZZ_CHECK(static_cast<int64_t>(tensor.bytes.size()) ==
                         elements * dtypeSize(tensor.dtype),
                     "a tensor's bytes match its shape");
    totalBytes += tensor.bytes.size();
    SHARC_FUZZ_CHECK(plan::tensorAsDoubles(tensor).size() ==
                         static_cast<size_t>(elements),
                     "one double per element");
  }
  SHARC_FUZZ_CHECK(totalBytes <= size, "tensors never overlap or run past "
                                       "the file");
  return 0;
}
