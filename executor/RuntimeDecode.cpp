//===- RuntimeDecode.cpp - a decode plan's tokens and positions -----------===//
//
// The inputs of generation with a key/value cache: a decode step's token
// and position per sample, a prefill's T of each. The kernels index the
// caches by the positions unchecked, so every value is checked here
// against the vocabulary and the shortest cache before it is uploaded.
//
//===----------------------------------------------------------------------===//

#include "executor/Runtime.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace sharc::exec {

using plan::NamedTensor;

Status Runtime::setDecodeStep(const std::vector<int32_t> &tokens,
                              const std::vector<int32_t> &positions) {
  return setPositionedTokens("tokens", "positions", tokens, positions);
}

Status Runtime::setPrefillStep(const std::vector<int32_t> &tokens,
                               const std::vector<int32_t> &positions) {
  if (!plan_.findInput("prefill_positions"))
    return Status::invalidInput("the plan has no prefill (no "
                                "'prefill_positions' input): compile it with "
                                "`sharc compile --decode --prefill-rows T`");
  // cuDNN's prefill path sees a sample's rows as one run of positions
  // with its padding after (kernels/DecodeAttention.h); the cpu is held to
  // the same, so that a step runs alike on both.
  const plan::IoEntry *prefill = plan_.findInput("prefill_positions");
  int64_t batch = plan_.batchSize, rows = prefill->globalShape.front();
  if (static_cast<int64_t>(positions.size()) == rows * batch)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 1; t < rows; ++t) {
        int32_t before = positions[(t - 1) * batch + b];
        int32_t at = positions[t * batch + b];
        bool padding = t > 1 && positions[(t - 2) * batch + b] == before;
        if (at == before || (!padding && at == before + 1))
          continue;
        return Status::invalidInput(
            "prefill row " + std::to_string(t) + " of sample " +
            std::to_string(b) + " has position " + std::to_string(at) +
            " after " + std::to_string(before) +
            ": a sample's rows are consecutive positions, the rows after "
            "its last repeating it");
      }
  return setPositionedTokens("prefill_tokens", "prefill_positions", tokens,
                             positions);
}

Status Runtime::setPositionedTokens(const char *tokensName,
                                    const char *positionsName,
                                    const std::vector<int32_t> &tokens,
                                    const std::vector<int32_t> &positions) {
  const plan::IoEntry *tokensIn = plan_.findInput(tokensName);
  const plan::IoEntry *positionsIn = plan_.findInput(positionsName);
  if (!tokensIn || !positionsIn)
    return Status::invalidInput("the plan is no decode step (it has no "
                                "'positions' input): compile it with "
                                "`sharc compile --decode`");
  int64_t batch = plan_.batchSize, rows = tokensIn->globalShape.front();
  // Every cache holds seq_len positions in a compiled plan; a hand-edited
  // one is held to its shortest, which the kernels index unchecked.
  int64_t cacheLen = plan_.seqLen;
  for (const plan::Instruction &instr : plan_.instructions)
    if (instr.op == "decode_attention" && instr.operands.size() > 4)
      for (int64_t cache : {instr.operands[3], instr.operands[4]})
        if (!plan_.buffers[cache].shape.empty())
          cacheLen = std::min(cacheLen, plan_.buffers[cache].shape.front());
  int64_t count = rows * batch;
  for (const auto &[what, values, limit] :
       {std::tuple{"token", &tokens, plan_.vocabSize},
        std::tuple{"position", &positions, cacheLen}}) {
    if (static_cast<int64_t>(values->size()) != count)
      return Status::invalidInput(std::string("a decode step needs ") +
                                  std::to_string(count) + " " + what +
                                  "s, got " + std::to_string(values->size()));
    for (int64_t n = 0; n < count; ++n)
      if ((*values)[n] < 0 || (*values)[n] >= limit)
        return Status::invalidInput(
            std::string(what) + " " + std::to_string((*values)[n]) +
            " of sample " + std::to_string(n % batch) + " is outside [0, " +
            std::to_string(limit) + ")");
  }
  // Two rows of a sample at one position write the same cache row: only
  // the same token does so with the same bytes.
  for (int64_t n = 0; n < count; ++n)
    for (int64_t m = n % batch; m < n; m += batch)
      if (positions[m] == positions[n] && tokens[m] != tokens[n])
        return Status::invalidInput(
            "sample " + std::to_string(n % batch) + " has position " +
            std::to_string(positions[n]) +
            " twice with different tokens (a repeated row must repeat its "
            "token)");
  for (const auto &[entry, values] :
       {std::pair{tokensIn, &tokens}, std::pair{positionsIn, &positions}}) {
    const auto *begin = reinterpret_cast<const uint8_t *>(values->data());
    NamedTensor tensor{entry->name,
                       DType::I32,
                       {rows, batch},
                       ByteVector(begin, begin + values->size() * 4)};
    SHARC_TRY(scatterTensor(tensor, entry->buffer, entry->sharding));
  }
  return Status::ok();
}

} // namespace sharc::exec
