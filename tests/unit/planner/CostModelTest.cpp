//===- CostModelTest.cpp - machine files and node times -------------------===//

#include "planner/CostModel.h"

#include <catch2/catch.hpp>

#include <string>

using namespace sharc;

namespace {

/// A machine with round numbers, so times are checked by hand.
Machine roundMachine() {
  Machine machine;
  machine.name = "round";
  machine.peakFlops = {{"bf16", 1.0e12}, {"f32", 1.0e11}};
  machine.memoryBandwidth = 1.0e9;
  machine.launchOverhead = 1.0e-6;
  machine.links = {{"tp", {2.0e-6, 1.0e9}}};
  return machine;
}

ScheduleNode computeNode(int64_t flops, int64_t memBytes,
                         std::string dtype = "bf16") {
  ScheduleNode node;
  node.op = "matmul";
  node.flops = flops;
  node.memBytes = memBytes;
  node.dtype = std::move(dtype);
  return node;
}

ScheduleNode collectiveNode(std::string op, std::string axis,
                            int64_t commBytes) {
  ScheduleNode node;
  node.op = std::move(op);
  node.kind = NodeKind::Collective;
  node.axis = std::move(axis);
  node.commBytes = commBytes;
  return node;
}

std::string errorOf(const std::string &text) {
  Result<Machine> machine = parseMachine(text, "m.yaml");
  REQUIRE(!machine.isOk());
  REQUIRE(machine.status().exitCode() == 2);
  return machine.status().message();
}

const char *kValid = "name: m\n"
                     "peak_flops: {bf16: 1.0e12}\n"
                     "memory_bandwidth: 1.0e9\n"
                     "launch_overhead: 0\n"
                     "links: {tp: {alpha: 1.0e-5, beta: 3.0e11}}\n";

} // namespace

TEST_CASE("the default machine file reads back its numbers", "[planner]") {
  Result<Machine> machine =
      readMachineFile(SHARC_SOURCE_DIR "/models/machines/h200-nvlink.yaml");
  INFO(machine.status().message());
  REQUIRE(machine.isOk());
  REQUIRE(machine->name == "h200-nvlink");
  REQUIRE(machine->peakFlops.at("bf16") == 7.875e14);
  REQUIRE(machine->peakFlops.at("f32") == 5.06e13);
  REQUIRE(machine->memoryBandwidth == 4.233e12);
  REQUIRE(machine->launchOverhead == 2.0e-6);
  REQUIRE(machine->gpuMemoryBytes == 143771.0 * (1 << 20));
  REQUIRE(machine->links.size() == 2);
  REQUIRE(machine->links.at("tp").alpha == 1.0e-5);
  REQUIRE(machine->links.at("dp").beta == 3.0e11);
  REQUIRE(machine->opEfficiency.size() == 22);
  REQUIRE(machine->opEfficiency.at("matmul") == 0.8516);
  REQUIRE(machine->opOverhead.size() == 15);
  REQUIRE(machine->opOverhead.at("attention_grad") == 5.828e-05);
}

TEST_CASE("compute time is launch plus the slower of math and memory",
          "[planner]") {
  Machine machine = roundMachine();
  // Math-bound: 2e9 flops at 1e12/s = 2 ms; 1e3 bytes at 1e9/s = 1 us.
  REQUIRE(nodeSeconds(machine, computeNode(2'000'000'000, 1'000)) ==
          Approx(1e-6 + 2e-3));
  // Memory-bound: 3e6 bytes = 3 ms beats 1e6 flops = 1 us.
  REQUIRE(nodeSeconds(machine, computeNode(1'000'000, 3'000'000)) ==
          Approx(1e-6 + 3e-3));
  // The dtype picks the rate: f32 is ten times slower here.
  REQUIRE(nodeSeconds(machine, computeNode(2'000'000'000, 0, "f32")) ==
          Approx(1e-6 + 2e-2));
  // An unlisted dtype falls back to the slowest listed rate.
  REQUIRE(nodeSeconds(machine, computeNode(2'000'000'000, 0, "f64")) ==
          Approx(1e-6 + 2e-2));
  REQUIRE(nodeSeconds(machine, computeNode(0, 0)) == Approx(1e-6));
}

TEST_CASE("an op's efficiency divides its roofline, not its launch",
          "[planner]") {
  Machine machine = roundMachine();
  machine.opEfficiency = {{"matmul", 0.5}};
  // 2 ms of math at half the peak: 4 ms, plus the launch as it was.
  REQUIRE(nodeSeconds(machine, computeNode(2'000'000'000, 1'000)) ==
          Approx(1e-6 + 4e-3));
  ScheduleNode add = computeNode(0, 3'000'000);
  add.op = "add";
  REQUIRE(nodeSeconds(machine, add) == Approx(1e-6 + 3e-3));
  Result<Machine> parsed = parseMachine(
      std::string(kValid) + "op_efficiency: {matmul: 0.8, add: 1.25}\n",
      "m.yaml");
  REQUIRE(parsed.isOk());
  REQUIRE(parsed->opEfficiency.at("matmul") == 0.8);
  REQUIRE(parsed->opEfficiency.at("add") == 1.25);
}

TEST_CASE("an op's overhead comes once a launch, beside its roofline",
          "[planner]") {
  Machine machine = roundMachine();
  machine.opEfficiency = {{"matmul", 0.5}};
  machine.opOverhead = {{"matmul", 3e-6}};
  // The launch, the matmul's 3 us, then 2 ms of math at half the peak.
  REQUIRE(nodeSeconds(machine, computeNode(2'000'000'000, 1'000)) ==
          Approx(1e-6 + 3e-6 + 4e-3));
  REQUIRE(launchSeconds(machine, "matmul") == Approx(4e-6));
  // Ops without an overhead pay the launch alone.
  REQUIRE(launchSeconds(machine, "add") == Approx(1e-6));
  Result<Machine> parsed = parseMachine(
      std::string(kValid) + "op_overhead: {matmul: 2.5e-6, add: 0}\n",
      "m.yaml");
  INFO(parsed.status().message());
  REQUIRE(parsed.isOk());
  REQUIRE(parsed->opOverhead.at("matmul") == 2.5e-6);
  REQUIRE(parsed->opOverhead.at("add") == 0.0);
}

TEST_CASE("ring attention's blocks take attention's figures unless they "
          "have their own",
          "[planner]") {
  Machine machine = roundMachine();
  machine.opEfficiency = {{"attention", 0.5}, {"attention_grad", 0.25}};
  machine.opOverhead = {{"attention_grad", 3e-6}};
  ScheduleNode block = computeNode(2'000'000'000, 1'000);
  block.op = "attention_block";
  // 2 ms of math at half the peak, the launch alone.
  REQUIRE(nodeSeconds(machine, block) == Approx(1e-6 + 4e-3));
  block.op = "attention_block_grad";
  REQUIRE(nodeSeconds(machine, block) == Approx(1e-6 + 3e-6 + 8e-3));
  // A figure of the block's own wins.
  machine.opEfficiency["attention_block_grad"] = 1.0;
  REQUIRE(nodeSeconds(machine, block) == Approx(1e-6 + 3e-6 + 2e-3));
}

TEST_CASE("collective time is alpha plus bytes over beta", "[planner]") {
  Machine machine = roundMachine();
  REQUIRE(nodeSeconds(machine, collectiveNode("all_reduce", "tp", 4'000'000)) ==
          Approx(2e-6 + 4e-3));
  REQUIRE(nodeSeconds(machine, collectiveNode("all_gather", "tp", 0)) ==
          Approx(2e-6));
  // No link for the axis: a local copy such as slice_to_rank.
  REQUIRE(nodeSeconds(machine, collectiveNode("slice_to_rank", "", 0)) ==
          Approx(1e-6));
}

TEST_CASE("a machine must cover the graph's dtypes and axes", "[planner]") {
  Machine machine = roundMachine();
  ScheduleGraph graph = {computeNode(10, 10),
                         collectiveNode("all_reduce", "tp", 100),
                         collectiveNode("replicate", "dp", 0)};
  REQUIRE(checkMachineCovers(machine, graph).isOk());
  graph.push_back(collectiveNode("all_reduce", "dp", 100));
  Status status = checkMachineCovers(machine, graph);
  REQUIRE(status.message() ==
          "node 3 (all_reduce): machine 'round' has no link for axis 'dp'");
  graph.back() = computeNode(10, 0, "i32");
  REQUIRE(checkMachineCovers(machine, graph).message() ==
          "node 3 (matmul): machine 'round' has no peak_flops for dtype "
          "'i32'");
}

TEST_CASE("machine files report errors at their line and column", "[planner]") {
  REQUIRE(parseMachine(kValid, "m.yaml").isOk());
  REQUIRE(errorOf("name: m\n") == "m.yaml:1:1: missing key 'peak_flops' in "
                                  "the machine");
  REQUIRE(errorOf(std::string(kValid) + "speed: 3\n") ==
          "m.yaml:6:1: unknown key 'speed' in the machine (expected one of: "
          "name, peak_flops, memory_bandwidth, launch_overhead, links, "
          "op_efficiency, op_overhead, gpu_memory)");
  REQUIRE(errorOf(std::string(kValid) + "gpu_memory: 0\n") ==
          "m.yaml:6:13: gpu_memory must be positive, got 0");
  REQUIRE(parseMachine(kValid, "m.yaml")->gpuMemoryBytes == 0.0);
  REQUIRE(errorOf(std::string(kValid) + "op_overhead: {matmul: -1}\n") ==
          "m.yaml:6:23: op_overhead.matmul must be non-negative, got -1");
  REQUIRE(errorOf(std::string(kValid) + "op_efficiency: {matmul: 0}\n") ==
          "m.yaml:6:25: op_efficiency.matmul must be positive, got 0");
  REQUIRE(errorOf(std::string(kValid) + "op_efficiency: {add: 9}\n") ==
          "m.yaml:6:22: op_efficiency.add must be at most 4, got 9");
  REQUIRE(errorOf("name: m\n"
                  "peak_flops: {bf16: fast}\n") ==
          "m.yaml:2:20: expected a number for peak_flops.bf16, got 'fast'");
  REQUIRE(errorOf("name: m\n"
                  "peak_flops: {fp8: 1.0}\n") ==
          "m.yaml:2:14: unknown dtype 'fp8' in peak_flops (expected f32, "
          "bf16, i32 or f64)");
  REQUIRE(errorOf("name: m\n"
                  "peak_flops: {bf16: 1.0}\n"
                  "memory_bandwidth: -4\n") ==
          "m.yaml:3:19: memory_bandwidth must be positive, got -4");
  REQUIRE(errorOf("name: m\n"
                  "peak_flops: {bf16: 1.0}\n"
                  "memory_bandwidth: 1\n"
                  "launch_overhead: 0\n"
                  "links: {tp: {alpha: 1.0}}\n") ==
          "m.yaml:5:13: missing key 'beta' in link 'tp'");
  REQUIRE(errorOf("name: m\n"
                  "peak_flops: [1, 2\n")
              .rfind("m.yaml:", 0) == 0);
  REQUIRE(errorOf("") ==
          "m.yaml:1:1: expected a map for the machine, got nothing");
}

TEST_CASE("a missing machine file is invalid input", "[planner]") {
  Result<Machine> machine = readMachineFile("/nonexistent/machine.yaml");
  REQUIRE(!machine.isOk());
  REQUIRE(machine.status().exitCode() == 2);
  REQUIRE(machine.status().message().rfind(
              "cannot open machine file '/nonexistent/machine.yaml'", 0) == 0);
}
