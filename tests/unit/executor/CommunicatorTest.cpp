//===- CommunicatorTest.cpp - in-process collectives on a 2x2 mesh --------===//
//
// Ranks of the [dp=2, tp=2] mesh: rank = 2*dp + tp, so the tp groups are
// {0,1} and {2,3}, the dp groups {0,2} and {1,3}.

#include "executor/Communicator.h"
#include "executor/OpTable.h"

#include <catch2/catch.hpp>

#include <functional>
#include <thread>

using namespace sharc;
using namespace sharc::exec;

namespace {
std::vector<plan::MeshAxis> mesh2x2() { return {{"dp", 2}, {"tp", 2}}; }

/// Runs body on one thread per rank and returns every rank's status.
std::vector<Status>
onRanks(CommWorld &world,
        const std::function<Status(int64_t, Communicator &)> &body) {
  std::vector<Status> statuses(world.worldSize());
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world.worldSize(); ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm = world.communicator(r);
      statuses[r] = body(r, comm);
    });
  for (std::thread &thread : threads)
    thread.join();
  return statuses;
}

void requireAllOk(const std::vector<Status> &statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    INFO("rank " << r << ": " << statuses[r].message());
    REQUIRE(statuses[r].isOk());
  }
}
} // namespace

TEST_CASE("sub-communicators group ranks sharing the other coordinates",
          "[executor]") {
  CommWorld world(mesh2x2());
  std::vector<int64_t> expectTp{0, 1, 0, 1}, expectDp{0, 0, 1, 1};
  for (int64_t r = 0; r < 4; ++r) {
    LocalCommunicator comm = world.communicator(r);
    REQUIRE(comm.groupSize("tp") == 2);
    REQUIRE(comm.groupSize("dp") == 2);
    REQUIRE(comm.groupSize("world") == 4);
    REQUIRE(comm.groupSize("pp") == 1); // absent axis: a group of one
    REQUIRE(comm.groupIndex("tp") == expectTp[r]);
    REQUIRE(comm.groupIndex("dp") == expectDp[r]);
    REQUIRE(comm.groupIndex("world") == r);
  }
}

TEST_CASE("all_reduce sums and maxes within each group", "[executor]") {
  CommWorld world(mesh2x2());
  std::vector<std::vector<float>> world_(4), tp(4), dpMax(4);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    std::vector<float> x{10.f * r, 10.f * r + 1, 10.f * r + 2};
    world_[r].resize(3);
    SHARC_TRY(comm.allReduce(x.data(), world_[r].data(), DType::F32, 3,
                             ReduceOp::Sum, "world"));
    tp[r] = x; // in place
    SHARC_TRY(comm.allReduce(tp[r].data(), tp[r].data(), DType::F32, 3,
                             ReduceOp::Sum, "tp"));
    std::vector<float> y{static_cast<float>(r % 2 ? -r : r), 1.f - r};
    dpMax[r].resize(2);
    return comm.allReduce(y.data(), dpMax[r].data(), DType::F32, 2,
                          ReduceOp::Max, "dp");
  }));
  for (int64_t r = 0; r < 4; ++r) {
    // 0 + 10 + 20 + 30 = 60 plus 4 i.
    REQUIRE(world_[r] == std::vector<float>{60, 64, 68});
    // tp group {0,1}: 0 + 10; {2,3}: 20 + 30; plus 2 i.
    REQUIRE(tp[r] == (r < 2 ? std::vector<float>{10, 12, 14}
                            : std::vector<float>{50, 52, 54}));
  }
  // dp group {0,2}: y = {0,1}, {2,-1}; {1,3}: {-1,0}, {-3,-2}.
  REQUIRE(dpMax[0] == std::vector<float>{2, 1});
  REQUIRE(dpMax[2] == std::vector<float>{2, 1});
  REQUIRE(dpMax[1] == std::vector<float>{-1, 0});
  REQUIRE(dpMax[3] == std::vector<float>{-1, 0});
}

TEST_CASE("all_reduce of bf16 rounds once per partial sum", "[executor]") {
  CommWorld world({{"tp", 4}});
  std::vector<uint16_t> out(4 * 1);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    uint16_t x = floatToBf16(r == 0 ? 256.f : 1.f);
    uint16_t y = 0;
    SHARC_TRY(comm.allReduce(&x, &y, DType::BF16, 1, ReduceOp::Sum, "tp"));
    out[r] = y;
    return Status::ok();
  }));
  // fp32 partial sums 257, 258, 259 are exact; 259 rounds to bf16 260.
  for (int64_t r = 0; r < 4; ++r)
    REQUIRE(bf16ToFloat(out[r]) == 260.f);
}

TEST_CASE("all_gather concatenates along the chosen dim", "[executor]") {
  CommWorld world(mesh2x2());
  std::vector<std::vector<float>> rows(4), cols(4);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    // A [2, 1] tensor per rank: {100 r, 100 r + 1}.
    std::vector<float> x{100.f * r, 100.f * r + 1};
    rows[r].resize(4);
    cols[r].resize(4);
    SHARC_TRY(
        comm.allGather(x.data(), rows[r].data(), DType::F32, {2, 1}, 0, "tp"));
    return comm.allGather(x.data(), cols[r].data(), DType::F32, {2, 1}, 1,
                          "dp");
  }));
  // tp group {2,3}, dim 0: [4,1] = rank 2's rows then rank 3's.
  REQUIRE(rows[2] == std::vector<float>{200, 201, 300, 301});
  REQUIRE(rows[0] == std::vector<float>{0, 1, 100, 101});
  // dp group {1,3}, dim 1: [2,2] row i = {rank1[i], rank3[i]}.
  REQUIRE(cols[1] == std::vector<float>{100, 300, 101, 301});
  REQUIRE(cols[3] == cols[1]);
}

TEST_CASE("reduce_scatter sums and hands each member its piece", "[executor]") {
  CommWorld world(mesh2x2());
  std::vector<std::vector<float>> out(4), byRow(4);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    // A [2, 4] tensor per rank: x[i][j] = r + 10 i + 100 j.
    std::vector<float> x(8);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        x[i * 4 + j] = r + 10.f * i + 100.f * j;
    out[r].resize(4);
    byRow[r].resize(4);
    SHARC_TRY(comm.reduceScatter(x.data(), out[r].data(), DType::F32, {2, 4}, 1,
                                 "dp"));
    return comm.reduceScatter(x.data(), byRow[r].data(), DType::F32, {2, 4}, 0,
                              "tp");
  }));
  // dp group {0,2}: sum = 2 + 20 i + 200 j; dp index 0 takes j in {0,1}.
  REQUIRE(out[0] == std::vector<float>{2, 202, 22, 222});
  REQUIRE(out[2] == std::vector<float>{402, 602, 422, 622});
  // dp group {1,3}: sum = 4 + 20 i + 200 j.
  REQUIRE(out[3] == std::vector<float>{404, 604, 424, 624});
  // tp group {2,3}, dim 0: sum = 5 + 20 i + 200 j; tp index 1 takes row 1.
  REQUIRE(byRow[3] == std::vector<float>{25, 225, 425, 625});
  REQUIRE(byRow[0] == std::vector<float>{1, 201, 401, 601});
}

TEST_CASE("collectives fail with a named error instead of hanging",
          "[executor]") {
  SECTION("a rank that never arrives times out") {
    CommWorld world({{"tp", 2}}, /*timeoutSeconds=*/0.2);
    LocalCommunicator comm = world.communicator(0);
    float x = 1;
    Status status = comm.allReduce(&x, &x, DType::F32, 1, ReduceOp::Sum, "tp");
    REQUIRE(status.code() == Status::Code::RuntimeError);
    REQUIRE(status.message().find("all_reduce over tp") != std::string::npos);
    REQUIRE(status.message().find("timed out") != std::string::npos);
  }
  SECTION("abort wakes the waiting ranks") {
    CommWorld world({{"tp", 2}}, /*timeoutSeconds=*/30);
    auto statuses = onRanks(world, [&](int64_t r, Communicator &comm) {
      if (r == 1) {
        world.abort();
        return Status::runtimeError("rank 1 failed");
      }
      std::vector<float> x(2), y(4);
      return comm.allGather(x.data(), y.data(), DType::F32, {2}, 0, "tp");
    });
    REQUIRE(statuses[0].message().find("all_gather over tp: aborted") !=
            std::string::npos);
  }
  SECTION("members disagreeing on the call is an error") {
    CommWorld world({{"tp", 2}}, /*timeoutSeconds=*/5);
    auto statuses = onRanks(world, [&](int64_t r, Communicator &comm) {
      std::vector<float> x(4, 1.f);
      return comm.allReduce(x.data(), x.data(), DType::F32, r == 0 ? 4 : 3,
                            ReduceOp::Sum, "tp");
    });
    for (const Status &status : statuses)
      REQUIRE(status.message().find("f32[3]") != std::string::npos);
  }
}

TEST_CASE("many collectives in a row stay in step", "[executor]") {
  CommWorld world(mesh2x2());
  std::vector<float> final(4);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    float value = static_cast<float>(r);
    for (int i = 0; i < 200; ++i) {
      SHARC_TRY(comm.allReduce(&value, &value, DType::F32, 1, ReduceOp::Max,
                               i % 2 ? "tp" : "dp"));
      value += static_cast<float>(r);
    }
    final[r] = value;
    return Status::ok();
  }));
  // After both axes every rank holds the global max, and the max keeps
  // rising by 3 (rank 3's increment) per round from then on.
  REQUIRE(final[3] == Approx(3.f + 199 * 3.f + 3.f));
}

TEST_CASE("all_to_all moves a split from one dim to another, any axis",
          "[executor]") {
  // dp2 x cp2 x tp2: rank = 4 dp + 2 cp + tp. Over cp, a global [8, 4]
  // tensor g[s][h] = 10 s + h (the same on every dp and tp coordinate)
  // goes from rows split (S(0): [4, 4] per rank) to columns split (S(1):
  // [8, 2]); the reference is the global tensor's slice, and the inverse
  // exchange gives the input back.
  CommWorld world({{"dp", 2}, {"cp", 2}, {"tp", 2}});
  std::vector<std::vector<float>> columns(8), back(8);
  requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
    int64_t cp = r / 2 % 2;
    std::vector<float> rows;
    for (int64_t s = 4 * cp; s < 4 * cp + 4; ++s)
      for (int64_t h = 0; h < 4; ++h)
        rows.push_back(10.f * s + h);
    columns[r].resize(16);
    back[r].resize(16);
    SHARC_TRY(comm.allToAll(rows.data(), columns[r].data(), DType::F32, {4, 4},
                            /*splitDim=*/1, /*concatDim=*/0, "cp"));
    SHARC_TRY(comm.allToAll(columns[r].data(), back[r].data(), DType::F32,
                            {8, 2}, /*splitDim=*/0, /*concatDim=*/1, "cp"));
    if (back[r] != rows)
      return Status::runtimeError("the inverse exchange changed the input");
    return Status::ok();
  }));
  for (int64_t r = 0; r < 8; ++r) {
    int64_t cp = r / 2 % 2;
    std::vector<float> expected;
    for (int64_t s = 0; s < 8; ++s)
      for (int64_t h = 2 * cp; h < 2 * cp + 2; ++h)
        expected.push_back(10.f * s + h);
    INFO("rank " << r);
    REQUIRE(columns[r] == expected);
  }
}

TEST_CASE("all_to_all refuses a dim that does not split", "[executor]") {
  CommWorld world(mesh2x2());
  auto statuses = onRanks(world, [&](int64_t, Communicator &comm) {
    std::vector<float> x(3), y(3);
    return comm.allToAll(x.data(), y.data(), DType::F32, {3, 1}, 0, 1, "tp");
  });
  REQUIRE(statuses[0].message().find("does not split over 2 ranks") !=
          std::string::npos);
}

namespace {

/// A communicator with groups of one axis only, as a backend without
/// groups over several axes (NCCL today) is: it forwards to the
/// in-process one and records the axes it was asked for.
class SingleAxisComm final : public Communicator {
public:
  SingleAxisComm(Communicator &inner, std::vector<std::string> &calls)
      : inner(inner), calls(calls) {}
  int64_t groupSize(const std::string &axis) const override {
    return inner.groupSize(axis);
  }
  int64_t groupIndex(const std::string &axis) const override {
    return inner.groupIndex(axis);
  }
  Status allReduce(const void *send, void *recv, DType dtype, int64_t numel,
                   ReduceOp op, const std::string &axis) override {
    calls.push_back(axis);
    return inner.allReduce(send, recv, dtype, numel, op, axis);
  }
  Status allGather(const void *, void *, DType, const std::vector<int64_t> &,
                   int64_t, const std::string &) override {
    return Status::runtimeError("unused");
  }
  Status reduceScatter(const void *, void *, DType,
                       const std::vector<int64_t> &, int64_t,
                       const std::string &) override {
    return Status::runtimeError("unused");
  }

private:
  Communicator &inner;
  std::vector<std::string> &calls;
};

} // namespace

TEST_CASE("an all_reduce over two axes sums over both, with or without a "
          "group for them",
          "[executor]") {
  // dp2 x cp2 x tp2, rank = 4 dp + 2 cp + tp; rank r holds {r + 1, 10 r}.
  // Over "dp,tp" the group of cp coordinate c is {2c, 2c+1, 2c+4, 2c+5}.
  std::vector<plan::MeshAxis> mesh{{"dp", 2}, {"cp", 2}, {"tp", 2}};
  auto expected = [](int64_t r) {
    int64_t c = r / 2 % 2;
    std::vector<float> sum{0, 0};
    for (int64_t member : {2 * c, 2 * c + 1, 2 * c + 4, 2 * c + 5}) {
      sum[0] += static_cast<float>(member + 1);
      sum[1] += 10.f * static_cast<float>(member);
    }
    return sum;
  };
  plan::Buffer buffer;
  buffer.dtype = DType::F32;
  buffer.shape = {2};
  plan::Instruction instr;
  instr.op = "all_reduce";
  instr.attrs["axis"] = std::string("dp,tp");
  instr.attrs["reduce"] = std::string("sum");
  std::unordered_map<std::string, OpDef> table;
  addCollectiveOps(table);
  for (bool grouped : {true, false}) {
    CommWorld world(mesh);
    std::vector<std::vector<float>> out(8, std::vector<float>(2));
    std::vector<std::vector<std::string>> calls(8);
    requireAllOk(onRanks(world, [&](int64_t r, Communicator &comm) {
      std::vector<float> x{static_cast<float>(r + 1), 10.f * r};
      OpCall call{&instr, {{&buffer, x.data()}}, {{&buffer, out[r].data()}}};
      OpEnv env;
      env.mesh = &mesh;
      auto launch = table["all_reduce"].bind(call, env);
      if (!launch.isOk())
        return launch.status();
      SingleAxisComm single(comm, calls[r]);
      LaunchContext context;
      context.comm = grouped ? &comm : static_cast<Communicator *>(&single);
      return (*launch)(context);
    }));
    for (int64_t r = 0; r < 8; ++r) {
      INFO("rank " << r << (grouped ? ", one group" : ", axis by axis"));
      REQUIRE(out[r] == expected(r));
      if (!grouped)
        REQUIRE(calls[r] == std::vector<std::string>{"dp", "tp"});
    }
  }
}
