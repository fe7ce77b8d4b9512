//===- AttentionWorkspaceTest.cpp - where cuDNN's backward works ----------===//
//
// attention_grad's bind on a device backend, with a stand-in for the
// attention library: the launch hands the library the plan's workspace
// buffer when the instruction has one of the size the library asks, and
// otherwise asks the stream's scratch for it and hands that over.
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace sharc;
using namespace sharc::exec;

namespace {

/// Asks `need` bytes for every backward and remembers where it was run.
class RecordingAttention : public AttentionEngine {
public:
  explicit RecordingAttention(int64_t need) : need_(need) {}
  bool accepts(DType, int64_t) const override { return true; }
  Result<int64_t> prepare(const kernels::AttentionArgs &) override {
    return need_;
  }
  Result<int64_t> prepare(const kernels::AttentionGradArgs &) override {
    return need_;
  }
  Status run(const kernels::AttentionArgs &, void *) override {
    return Status::runtimeError("the test binds no forward");
  }
  Status run(const kernels::AttentionGradArgs &, void *workspace) override {
    ranIn = workspace;
    return Status::ok();
  }
  void *ranIn = nullptr;

private:
  int64_t need_;
};

plan::Buffer buffer(int64_t id, DType dtype, std::vector<int64_t> shape) {
  plan::Buffer b;
  b.id = id;
  b.region = plan::Region::Activation;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.numBytes = b.extentBytes().value_or(0);
  return b;
}

/// One bf16 head of 16 over 4 positions: q, k, v, out, lse, dout; dq, dk,
/// dv; and a 1,024-byte workspace (buffer 9).
struct AttentionGradCall {
  std::vector<plan::Buffer> buffers;
  std::vector<std::vector<uint8_t>> memory;
  plan::Instruction instr;
  OpCall call;

  explicit AttentionGradCall(bool withWorkspace) {
    for (int64_t id = 0; id < 9; ++id)
      buffers.push_back(id == 4 ? buffer(id, DType::F32, {1, 1, 4})
                                : buffer(id, DType::BF16, {4, 1, 16}));
    buffers.push_back(buffer(9, DType::F32, {256}));
    for (const plan::Buffer &b : buffers)
      memory.emplace_back(static_cast<size_t>(b.numBytes));
    instr.op = "attention_grad";
    instr.operands = {0, 1, 2, 3, 4, 5};
    instr.results = {6, 7, 8};
    if (withWorkspace)
      instr.results.push_back(9);
    instr.attrs["head_dim"] = int64_t{16};
    call.instr = &instr;
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t id : *ids)
        (ids == &instr.operands ? call.operands : call.results)
            .push_back({&buffers[id], memory[id].data()});
  }
  void *workspace() { return memory[9].data(); }
};

/// Binds the call on a device-like env whose one stream has `engine`, then
/// launches it with a scratch of its own; the scratch bytes bind asked for.
int64_t bindAndLaunch(AttentionGradCall &grad, RecordingAttention &engine,
                      void *scratch) {
  std::vector<plan::MeshAxis> mesh = {{"dp", 1}};
  std::vector<int64_t> scratchBytes(1, 0);
  OpEnv env;
  env.mesh = &mesh;
  env.coords = {0};
  env.onDevice = true;
  env.scratchBytes = &scratchBytes;
  env.attentions = {&engine};
  const OpDef *def = OpTable::get().find("attention_grad");
  REQUIRE(def);
  Result<Launch> launch = def->bind(grad.call, env);
  INFO(launch.status().message());
  REQUIRE(launch);
  LaunchContext context;
  context.attention = &engine;
  context.scratch = scratch;
  context.scratchBytes = scratchBytes[0];
  Status ran = (*launch)(context);
  INFO(ran.message());
  REQUIRE(ran);
  return scratchBytes[0];
}

} // namespace

TEST_CASE("attention_grad works in the plan's workspace when it is large "
          "enough, else in the stream's scratch",
          "[executor]") {
  std::vector<uint8_t> scratch(4096);
  SECTION("a workspace of the size asked: no scratch") {
    AttentionGradCall grad(/*withWorkspace=*/true);
    RecordingAttention engine(1024);
    CHECK(bindAndLaunch(grad, engine, scratch.data()) == 0);
    CHECK(engine.ranIn == grad.workspace());
  }
  SECTION("a workspace too small (another cuDNN, or its deterministic "
          "backward): the scratch") {
    AttentionGradCall grad(/*withWorkspace=*/true);
    RecordingAttention engine(1025);
    CHECK(bindAndLaunch(grad, engine, scratch.data()) == 1025);
    CHECK(engine.ranIn == scratch.data());
  }
  SECTION("no workspace result: the scratch") {
    AttentionGradCall grad(/*withWorkspace=*/false);
    RecordingAttention engine(1024);
    CHECK(bindAndLaunch(grad, engine, scratch.data()) == 1024);
    CHECK(engine.ranIn == scratch.data());
  }
}
