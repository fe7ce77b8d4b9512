//===- TraceTest.cpp - Chrome traces of the steps the runtime ran ---------===//
//
// Runs the two-stream linear plan on a 1x2 mesh with tracing on and reads
// the trace back with yaml-cpp (JSON is YAML), checking it against the plan:
// every instruction once per rank on its stream's thread, spans in stream
// order without overlap, and every wait honoured in time.

#include "executor/Runtime.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {

struct Span {
  int64_t instr = 0;
  double ts = 0.0, dur = 0.0;
};

std::vector<int32_t> someTokens(const LinearModel &model) {
  std::vector<int32_t> tokens(model.batch * model.seqLen);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 5 + 3) % model.validVocab);
  return tokens;
}

} // namespace

TEST_CASE("a traced step has one span per instruction per rank, on its "
          "stream, in stream order, after every event it waits for",
          "[executor][trace]") {
  LinearModel model;
  plan::Plan p = withAsyncCollectives(makeLinearPlan(model, 1, 2));
  for (size_t i = 0; i < p.instructions.size(); ++i)
    p.instructions[i].loc = "model.yaml:" + std::to_string(i + 1) + ":3";
  REQUIRE(p.numStreams == 2);
  auto runtime = Runtime::create(p, RunOptions{.recordTrace = true});
  REQUIRE(runtime);
  Runtime &rt = **runtime;
  REQUIRE(rt.initParams(3));
  REQUIRE(rt.setBatch(someTokens(model)));
  REQUIRE_FALSE(rt.lastStepTrace()); // no step yet
  REQUIRE(rt.step());
  REQUIRE(rt.step());
  auto json = rt.lastStepTrace();
  REQUIRE(json);
  INFO(*json);

  YAML::Node root;
  REQUIRE_NOTHROW(root = YAML::Load(*json));
  REQUIRE(root["otherData"]["step"].as<int64_t>() == 2);
  const YAML::Node events = root["traceEvents"];
  REQUIRE(events.IsSequence());
  // spans[pid][tid] in file order.
  std::map<int64_t, std::map<int64_t, std::vector<Span>>> spans;
  std::map<std::pair<int64_t, int64_t>, std::string> threadNames;
  std::map<int64_t, std::string> processNames;
  // counters[pid]: (ts, live MiB) of the "activations MiB" counter.
  std::map<int64_t, std::vector<std::pair<double, double>>> counters;
  for (const YAML::Node &event : events) {
    std::string ph = event["ph"].as<std::string>();
    int64_t pid = event["pid"].as<int64_t>();
    if (ph == "C") {
      REQUIRE(event["name"].as<std::string>() == "activations MiB");
      counters[pid].emplace_back(event["ts"].as<double>(),
                                 event["args"]["live"].as<double>());
      continue;
    }
    if (ph == "M") {
      std::string name = event["args"]["name"].as<std::string>();
      if (event["name"].as<std::string>() == "thread_name")
        threadNames[{pid, event["tid"].as<int64_t>()}] = name;
      else
        processNames[pid] = name;
      continue;
    }
    REQUIRE(ph == "X");
    int64_t tid = event["tid"].as<int64_t>();
    int64_t instr = event["args"]["instr"].as<int64_t>();
    REQUIRE(instr >= 0);
    REQUIRE(instr < static_cast<int64_t>(p.instructions.size()));
    REQUIRE(event["name"].as<std::string>() == p.instructions[instr].op);
    REQUIRE(event["args"]["loc"].as<std::string>() ==
            p.instructions[instr].loc);
    REQUIRE(tid == p.instructions[instr].stream);
    Span span{instr, event["ts"].as<double>(), event["dur"].as<double>()};
    REQUIRE(span.ts >= 0.0);
    REQUIRE(span.dur >= 0.0);
    spans[pid][tid].push_back(span);
  }

  REQUIRE(spans.size() == 2);
  REQUIRE(spans.begin()->first == 0);
  REQUIRE(spans.rbegin()->first == 1);
  for (int64_t pid : {0, 1}) {
    REQUIRE(processNames[pid] == "rank " + std::to_string(pid));
    REQUIRE(threadNames[{pid, 0}] == "compute");
    REQUIRE(threadNames[{pid, 1}] == "communication");
    std::map<int64_t, Span> byInstr;
    for (const auto &[tid, list] : spans[pid]) {
      for (size_t i = 0; i < list.size(); ++i) {
        REQUIRE(byInstr.emplace(list[i].instr, list[i]).second); // once
        if (i == 0)
          continue;
        // Instruction order, and the previous span ended before this one
        // began (the printed values are exact to the nanosecond).
        REQUIRE(list[i - 1].instr < list[i].instr);
        REQUIRE(list[i - 1].ts + list[i - 1].dur <= list[i].ts + 1e-6);
      }
    }
    REQUIRE(byInstr.size() == p.instructions.size());
    // An instruction starts only after the ones whose events it waits for
    // have ended.
    std::map<int64_t, int64_t> signaller;
    for (size_t i = 0; i < p.instructions.size(); ++i)
      for (int64_t event : p.instructions[i].signals)
        signaller[event] = static_cast<int64_t>(i);
    int64_t waits = 0;
    for (size_t i = 0; i < p.instructions.size(); ++i)
      for (int64_t event : p.instructions[i].waits) {
        const Span &before = byInstr.at(signaller.at(event));
        REQUIRE(before.ts + before.dur <= byInstr.at(i).ts + 1e-6);
        ++waits;
      }
    REQUIRE(waits > 0);
    // The counter: one sample as each instruction starts, of the
    // activation bytes live then, worked out here directly: a buffer (a
    // view as its base) is live from the first instruction naming it to
    // the last.
    REQUIRE(counters[pid].size() == p.instructions.size());
    // Two streams' instructions may start in the same nanosecond.
    std::multimap<double, double> liveAt(counters[pid].begin(),
                                         counters[pid].end());
    for (const auto &[instr, span] : byInstr) {
      int64_t bytes = 0;
      for (const plan::Buffer &buffer : p.buffers) {
        if (buffer.region != plan::Region::Activation || buffer.viewOf >= 0)
          continue;
        auto names = [&](const plan::Instruction &at) {
          for (const auto *ids : {&at.operands, &at.results})
            for (int64_t id : *ids)
              if (id == buffer.id || p.buffers[id].viewOf == buffer.id)
                return true;
          return false;
        };
        bool before = false, after = false;
        for (int64_t j = 0; j <= instr; ++j)
          before |= names(p.instructions[j]);
        for (size_t j = instr; j < p.instructions.size(); ++j)
          after |= names(p.instructions[j]);
        bytes += before && after ? buffer.numBytes : 0;
      }
      INFO("instr " << instr);
      auto [from, to] = liveAt.equal_range(span.ts);
      REQUIRE(std::any_of(from, to, [&](const auto &sample) {
        return std::abs(sample.second - bytes / 1048576.0) <= 5e-4;
      }));
    }
  }
}

TEST_CASE("the trace is refused when recording is off", "[executor][trace]") {
  LinearModel model;
  auto runtime = Runtime::create(makeLinearPlan(model, 1, 1), RunOptions{});
  REQUIRE(runtime);
  REQUIRE((*runtime)->initParams(3));
  REQUIRE((*runtime)->setBatch(someTokens(model)));
  REQUIRE((*runtime)->step());
  auto trace = (*runtime)->lastStepTrace();
  REQUIRE_FALSE(trace);
  REQUIRE(trace.status().exitCode() == 1);
  REQUIRE((*runtime)->lastStepRecords().records.empty());
}

TEST_CASE("chromeTrace prints exact microseconds and escapes strings",
          "[executor][trace]") {
  plan::Plan p;
  plan::Instruction instr;
  instr.op = "matmul";
  instr.loc = "a \"q\".yaml:1:2";
  p.instructions.push_back(instr);
  StepTrace trace;
  trace.step = 7;
  trace.records = {{{{0, 1234567, 2000001}}}};
  std::string json = chromeTrace(p, trace);
  INFO(json);
  REQUIRE(json.find("\"ts\":1234.567,\"dur\":765.434") != std::string::npos);
  YAML::Node root = YAML::Load(json);
  YAML::Node span;
  for (const YAML::Node &event : root["traceEvents"])
    if (event["ph"].as<std::string>() == "X")
      span = event;
  REQUIRE(span.IsMap());
  REQUIRE(span["args"]["loc"].as<std::string>() == "a \"q\".yaml:1:2");
  REQUIRE(span["ts"].as<double>() == Approx(1234.567));
}
