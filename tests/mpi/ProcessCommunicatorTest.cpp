//===- ProcessCommunicatorTest.cpp - the cpu's collectives over processes -===//
//
// Run alone (one process holding all 8 ranks of a dp2 x cp2 x tp2 mesh, its
// messages to itself) and under `mpirun -np 2` (4 ranks each; ctest runs
// both). The reference is LocalCommunicator: every process also runs all 8
// ranks in one CommWorld and the ranks it holds must get the same bytes
// from ProcessCommunicator, on two channels (streams) at once. Inputs are
// pseudo-random and differ per rank, so a sum in another order, a missed
// member or a misrouted message changes them.
//
//===----------------------------------------------------------------------===//

#include "executor/ProcessCommunicator.h"

#include "kernels/TensorView.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

using namespace sharc;
using namespace sharc::exec;

namespace {

const std::vector<plan::MeshAxis> kMesh{{"dp", 2}, {"cp", 2}, {"tp", 2}};
constexpr int64_t kWorld = 8;

std::shared_ptr<Processes> join() {
  auto processes = joinProcesses();
  REQUIRE(processes.status().isOk());
  return *processes;
}

/// A rank's results, in the order the body produced them.
using Outputs = std::vector<std::vector<std::byte>>;
using Body = std::function<Status(int64_t rank, Communicator &, Outputs &)>;

/// `count` values drawn from (rank, salt), stored as `dtype`.
std::vector<std::byte> randomInput(int64_t rank, int64_t salt, DType dtype,
                                   int64_t count) {
  std::vector<std::byte> bytes(static_cast<size_t>(count * dtypeSize(dtype)));
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1) +
                   static_cast<uint64_t>(salt);
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double value = static_cast<double>(state >> 40) / (1 << 24) * 8.0 - 4.0;
    kernels::storeElement({bytes.data(), dtype}, i, value);
  }
  return bytes;
}

/// Every collective the cpu backend runs, over each kind of group, and
/// pipeline transfers received out of their send order.
Status everyCollective(int64_t rank, Communicator &comm, Outputs &out) {
  auto keep = [&](std::vector<std::byte> bytes) {
    out.push_back(std::move(bytes));
  };
  int64_t salt = 0;
  for (const char *axis : {"tp", "dp", "world", "dp,tp", "dp,cp,tp"})
    for (DType dtype : {DType::F32, DType::BF16}) {
      auto x = randomInput(rank, ++salt, dtype, 1000);
      std::vector<std::byte> sum(x.size()), max(x.size());
      SHARC_TRY(comm.allReduce(x.data(), sum.data(), dtype, 1000, ReduceOp::Sum,
                               axis));
      SHARC_TRY(comm.allReduce(x.data(), max.data(), dtype, 1000, ReduceOp::Max,
                               axis));
      keep(sum);
      keep(max);
      // In place, as the runtime reduces gradients.
      SHARC_TRY(
          comm.allReduce(x.data(), x.data(), dtype, 1000, ReduceOp::Sum, axis));
      keep(x);
    }
  auto gatherIn = randomInput(rank, ++salt, DType::BF16, 3 * 5 * 4);
  std::vector<std::byte> gathered(gatherIn.size() * 2);
  SHARC_TRY(comm.allGather(gatherIn.data(), gathered.data(), DType::BF16,
                           {3, 5, 4}, 1, "tp"));
  keep(gathered);
  auto scatterIn = randomInput(rank, ++salt, DType::F32, 3 * 4 * 2);
  std::vector<std::byte> scattered(scatterIn.size() / 2);
  SHARC_TRY(comm.reduceScatter(scatterIn.data(), scattered.data(), DType::F32,
                               {3, 4, 2}, 1, "dp"));
  keep(scattered);
  auto a2aIn = randomInput(rank, ++salt, DType::F32, 4 * 6);
  std::vector<std::byte> exchanged(a2aIn.size());
  SHARC_TRY(comm.allToAll(a2aIn.data(), exchanged.data(), DType::F32, {4, 6},
                          /*splitDim=*/1, /*concatDim=*/0, "cp"));
  keep(exchanged);
  // Three transfers to the cp peer, taken in another order; a ring's tags
  // use high bits.
  int64_t peer = 1 - comm.groupIndex("cp");
  const int64_t ringTag = (int64_t{1} << 40) + 8;
  auto first = randomInput(rank, ++salt, DType::F32, 17);
  auto second = randomInput(rank, ++salt, DType::F32, 5);
  auto third = randomInput(rank, ++salt, DType::F32, 2);
  SHARC_TRY(comm.send(first.data(), 68, peer, /*tag=*/3, "cp"));
  SHARC_TRY(comm.send(second.data(), 20, peer, ringTag, "cp"));
  SHARC_TRY(comm.send(third.data(), 8, peer, /*tag=*/3, "cp"));
  std::vector<std::byte> ring(20), early(68), late(8);
  SHARC_TRY(comm.recv(ring.data(), 20, peer, ringTag, "cp"));
  SHARC_TRY(comm.recv(early.data(), 68, peer, 3, "cp"));
  SHARC_TRY(comm.recv(late.data(), 8, peer, 3, "cp"));
  keep(ring);
  keep(early);
  keep(late);
  return Status::ok();
}

/// Runs `body` on every rank of one in-process CommWorld.
std::vector<Outputs> referenceRun(const Body &body) {
  CommWorld world(kMesh);
  std::vector<Outputs> outputs(kWorld);
  std::vector<Status> statuses(kWorld);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm = world.communicator(r);
      statuses[r] = body(r, comm, outputs[r]);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (const Status &status : statuses) {
    INFO(status.message());
    REQUIRE(status.isOk());
  }
  return outputs;
}

/// Runs `body` on this process's ranks, once per channel at the same time
/// (a rank's streams); statuses and outputs per channel, then rank.
struct ProcessRun {
  RankSpan span;
  std::vector<std::vector<Status>> statuses;
  std::vector<std::vector<Outputs>> outputs;
};

ProcessRun processRun(Processes &processes, int64_t channels, const Body &body,
                      double timeoutSeconds = 60.0,
                      std::atomic<bool> *abortFlag = nullptr) {
  auto span = processes.span(kWorld);
  REQUIRE(span.status().isOk());
  std::vector<std::unique_ptr<ProcessChannel>> opened;
  for (int64_t c = 0; c < channels; ++c) {
    auto channel = processes.openChannel();
    REQUIRE(channel.status().isOk());
    opened.push_back(std::move(*channel));
  }
  std::atomic<bool> notAborted{false};
  std::atomic<bool> &aborted = abortFlag ? *abortFlag : notAborted;
  ProcessRun run{*span,
                 std::vector<std::vector<Status>>(
                     channels, std::vector<Status>(span->count)),
                 std::vector<std::vector<Outputs>>(
                     channels, std::vector<Outputs>(span->count))};
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < span->count; ++i)
      threads.emplace_back([&, c, i] {
        ProcessCommunicator comm(kMesh, span->first + i, span->count,
                                 opened[c].get(), timeoutSeconds, &aborted);
        run.statuses[c][i] = body(span->first + i, comm, run.outputs[c][i]);
      });
  for (std::thread &thread : threads)
    thread.join();
  return run;
}

} // namespace

TEST_CASE("ProcessCommunicator: the groups of LocalCommunicator") {
  CommWorld world(kMesh);
  std::atomic<bool> aborted{false};
  auto processes = join();
  auto channel = processes->openChannel();
  REQUIRE(channel.status().isOk());
  for (int64_t r = 0; r < kWorld; ++r) {
    LocalCommunicator local = world.communicator(r);
    ProcessCommunicator remote(kMesh, r, kWorld, channel->get(), 1.0, &aborted);
    for (const char *axis : {"dp", "cp", "tp", "world", "dp,tp", "pp"}) {
      INFO("rank " << r << " axis " << axis);
      CHECK(remote.groupSize(axis) == local.groupSize(axis));
      CHECK(remote.groupIndex(axis) == local.groupIndex(axis));
      CHECK(remote.hasGroup(axis) == local.hasGroup(axis));
    }
  }
}

TEST_CASE("ProcessCommunicator: every collective gives LocalCommunicator's "
          "bytes, on two streams at once") {
  auto processes = join();
  std::vector<Outputs> expected = referenceRun(everyCollective);
  ProcessRun run = processRun(*processes, 2, everyCollective);
  for (size_t c = 0; c < run.outputs.size(); ++c)
    for (int64_t i = 0; i < run.span.count; ++i) {
      int64_t rank = run.span.first + i;
      INFO("stream " << c << " rank " << rank);
      INFO(run.statuses[c][i].message());
      REQUIRE(run.statuses[c][i].isOk());
      REQUIRE(run.outputs[c][i].size() == expected[rank].size());
      for (size_t k = 0; k < expected[rank].size(); ++k) {
        INFO("result " << k);
        CHECK(run.outputs[c][i][k] == expected[rank][k]);
      }
    }
}

TEST_CASE("ProcessCommunicator: members that disagree are named") {
  auto processes = join();
  // Rank 1 reduces 8 elements where its tp partner, rank 0, reduces 4.
  ProcessRun run = processRun(
      *processes, 1, [](int64_t rank, Communicator &comm, Outputs &) {
        if (rank > 1)
          return Status::ok();
        std::vector<float> x(rank == 0 ? 4 : 8, 1.f);
        return comm.allReduce(x.data(), x.data(), DType::F32,
                              static_cast<int64_t>(x.size()), ReduceOp::Sum,
                              "tp");
      });
  if (run.span.holds(0))
    CHECK_THAT(run.statuses[0][0].message(),
               Catch::Contains("all_reduce over tp: member 1 called "
                               "all_reduce sum f32[8] but this rank called "
                               "all_reduce sum f32[4]"));
}

TEST_CASE("ProcessCommunicator: a member that never comes times out, an "
          "abort stops the wait") {
  auto processes = join();
  // Only rank 0 reduces: its partner's message never comes. Under mpirun
  // -np 2 its tp partner (rank 1) is in its process (a message queued in
  // it) and its dp partner (rank 4) in the other (an MPI message).
  for (auto [axis, partner] : {std::pair{"tp", 1}, std::pair{"dp", 4}}) {
    auto lonely = [axis = axis](int64_t rank, Communicator &comm, Outputs &) {
      if (rank != 0)
        return Status::ok();
      float x = 1.f;
      return comm.allReduce(&x, &x, DType::F32, 1, ReduceOp::Sum, axis);
    };
    ProcessRun run = processRun(*processes, 1, lonely, /*timeoutSeconds=*/0.3);
    if (run.span.holds(0))
      CHECK_THAT(run.statuses[0][0].message(),
                 Catch::Contains(std::string("all_reduce over ") + axis +
                                 ": from member 1 (rank " +
                                 std::to_string(partner) +
                                 "): timed out, nothing was sent"));
    std::atomic<bool> aborted{true};
    run = processRun(*processes, 1, lonely, /*timeoutSeconds=*/60.0, &aborted);
    if (run.span.holds(0))
      CHECK_THAT(run.statuses[0][0].message(),
                 Catch::Contains("aborted, another rank failed"));
  }
}

TEST_CASE("ProcessCommunicator: more ranks per process than tags carry "
          "is refused") {
  auto processes = join();
  auto channel = processes->openChannel();
  REQUIRE(channel.status().isOk());
  std::atomic<bool> aborted{false};
  // 2^16 ranks per process need tags up to 2^33: no MPI carries them.
  ProcessCommunicator comm(kMesh, 0, int64_t{1} << 16, channel->get(), 1.0,
                           &aborted);
  float x = 0.f;
  CHECK_THAT(
      comm.allReduce(&x, &x, DType::F32, 1, ReduceOp::Sum, "tp").message(),
      Catch::Contains("65536 ranks per process need tags up to 8589934591"));
  CHECK_THAT(comm.send(&x, 4, 1, 0, "tp").message(),
             Catch::Contains("launch more processes"));
}

TEST_CASE("ProcessChannel: a message of exactly one MPI piece, then the "
          "next under the same tag") {
  auto processes = join();
  if (processes->count() == 1)
    return; // pieces are MPI's; one process sends to itself whole
  auto channel = processes->openChannel();
  REQUIRE(channel.status().isOk());
  std::atomic<bool> aborted{false};
  int64_t peer = 1 - processes->index() % 2;
  if (peer >= processes->count())
    return;
  // 1 GiB is MPI's piece: the message ends in an empty piece, which the
  // receiver must not take as the next message.
  const size_t big = size_t{1} << 30;
  std::vector<std::byte> message(big);
  for (size_t i = 0; i < big; i += 4093)
    message[i] = static_cast<std::byte>(i / 4093 + processes->index());
  REQUIRE((*channel)->send(peer, 7, std::move(message)).status().isOk());
  REQUIRE((*channel)
              ->send(peer, 7, std::vector<std::byte>(3, std::byte{9}))
              .status()
              .isOk());
  auto got = (*channel)->receive(peer, 7, 120.0, aborted);
  REQUIRE(got.status().isOk());
  REQUIRE(got->size() == big);
  for (size_t i = 0; i < big; i += 4093)
    REQUIRE((*got)[i] == static_cast<std::byte>(i / 4093 + peer));
  auto next = (*channel)->receive(peer, 7, 120.0, aborted);
  REQUIRE(next.status().isOk());
  CHECK(*next == std::vector<std::byte>(3, std::byte{9}));
}

TEST_CASE("ProcessChannel: waitSent returns once the receiver took the "
          "message, and times out while it has not") {
  auto processes = join();
  auto channel = processes->openChannel();
  REQUIRE(channel.status().isOk());
  std::atomic<bool> aborted{false};
  if (processes->count() == 1) {
    // To itself a message is sent once queued.
    auto ticket = (*channel)->send(0, 1, std::vector<std::byte>(16));
    REQUIRE(ticket.status().isOk());
    CHECK((*channel)->waitSent(*ticket, 0.1, aborted).isOk());
    return;
  }
  if (processes->count() != 2)
    return;
  // 8 MiB goes by rendezvous: it leaves only once the receiver takes it,
  // which process 1 does a second after the timed-out wait below.
  const size_t size = size_t{8} << 20;
  if (processes->index() == 0) {
    auto ticket = (*channel)->send(1, 5, std::vector<std::byte>(size));
    REQUIRE(ticket.status().isOk());
    CHECK_THAT((*channel)->waitSent(*ticket, 0.2, aborted).message(),
               Catch::Contains("timed out, the receiver never took it"));
    CHECK((*channel)->waitSent(*ticket, 60.0, aborted).isOk());
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    auto got = (*channel)->receive(0, 5, 60.0, aborted);
    REQUIRE(got.status().isOk());
    CHECK(got->size() == size);
  }
}
