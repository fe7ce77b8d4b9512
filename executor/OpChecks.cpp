//===- OpChecks.cpp - operand checks shared by the op functions -----------===//
//
// Each check returns invalidInput naming the operand's role, buffer, dtype
// and shape, so a plan error reads like "x (buffer 3 'h', f32[4,8]) must
// have rank 2".
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

namespace sharc::exec::opcheck {
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

namespace {
std::string describe(const TensorRef &ref, const char *role) {
  return std::string(role) + " (buffer " + std::to_string(ref.buffer->id) +
         " '" + ref.buffer->name + "', " + dtypeName(ref.dtype()) +
         shapeText(ref.shape()) + ")";
}
} // namespace

Status dtypeIs(const TensorRef &ref, DType dtype, const char *role) {
  if (ref.dtype() == dtype)
    return Status::ok();
  return Status::invalidInput(describe(ref, role) + " must be " +
                              dtypeName(dtype));
}

Status isFloat(const TensorRef &ref, const char *role) {
  if (ref.dtype() == DType::F32 || ref.dtype() == DType::BF16)
    return Status::ok();
  return Status::invalidInput(describe(ref, role) + " must be f32 or bf16");
}

Status rankIs(const TensorRef &ref, size_t rank, const char *role) {
  if (ref.shape().size() == rank)
    return Status::ok();
  return Status::invalidInput(describe(ref, role) + " must have rank " +
                              std::to_string(rank));
}

Status numelIs(const TensorRef &ref, int64_t numel, const char *role) {
  if (ref.numel() == numel)
    return Status::ok();
  return Status::invalidInput(describe(ref, role) + " must have " +
                              std::to_string(numel) + " elements");
}

Status sameShape(const TensorRef &ref, const TensorRef &like,
                 const char *role) {
  if (ref.shape() == like.shape())
    return Status::ok();
  return Status::invalidInput(describe(ref, role) + " must have shape " +
                              shapeText(like.shape()));
}
Status positiveAttr(const char *name, int64_t value) {
  if (value > 0)
    return Status::ok();
  return Status::invalidInput(std::string("attribute '") + name +
                              "' must be positive, got " +
                              std::to_string(value));
}

} // namespace sharc::exec::opcheck
