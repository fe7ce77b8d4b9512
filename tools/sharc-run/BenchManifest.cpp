//===- BenchManifest.cpp - read bench.yaml --------------------------------===//
//
// Scalars go through YAML::convert<T>::decode, which does not throw; the
// parse goes through the runtime side's one YAML entry point (FileText.h),
// so this file has no try block. Every message carries the node's position
// (yaml-cpp's Mark counts from 0).
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchManifest.h"

#include "planner/plan/FileText.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace sharc::benchrun {
namespace {

class FieldReader {
public:
  explicit FieldReader(std::string path) : path_(std::move(path)) {}

  std::string where(const YAML::Node &node) const {
    const YAML::Mark mark = node.Mark();
    return path_ + ":" + std::to_string(mark.line + 1) + ":" +
           std::to_string(mark.column + 1);
  }

  /// Reads `key` of `map` into `into`; a missing key keeps the default
  /// unless `required`.
  template <typename T>
  Status read(const YAML::Node &map, const char *key, T &into,
              bool required = true) const {
    YAML::Node node = map[key];
    if (!node)
      return required ? Status::invalidInput(where(map) + ": missing '" +
                                             std::string(key) + "'")
                      : Status::ok();
    if (!node.IsScalar() || !YAML::convert<T>::decode(node, into))
      return Status::invalidInput(where(node) + ": '" + std::string(key) +
                                  "' has the wrong type");
    return Status::ok();
  }

private:
  std::string path_;
};

Status readPoint(const FieldReader &r, const YAML::Node &node,
                 const std::filesystem::path &folder, BenchPointSpec &p) {
  if (!node.IsMap())
    return Status::invalidInput(r.where(node) + ": a point is a map");
  SHARC_TRY(r.read(node, "mode", p.mode));
  SHARC_TRY(r.read(node, "label", p.label));
  SHARC_TRY(r.read(node, "runner", p.runner));
  SHARC_TRY(r.read(node, "tp_size", p.tpSize));
  SHARC_TRY(r.read(node, "world_size", p.worldSize));
  // Manifests written before the pipeline and context-parallel modes lack
  // these; their points had neither.
  SHARC_TRY(r.read(node, "pp_size", p.ppSize, false));
  SHARC_TRY(r.read(node, "cp_size", p.cpSize, false));
  SHARC_TRY(r.read(node, "cp_comm_type", p.cpCommType, false));
  SHARC_TRY(r.read(node, "pp_schedule", p.ppSchedule, false));
  SHARC_TRY(r.read(node, "virtual_stages", p.virtualStages, false));
  SHARC_TRY(r.read(node, "micro_batch_size", p.microBatchSize, false));
  SHARC_TRY(r.read(node, "num_microbatches", p.numMicrobatches, false));
  SHARC_TRY(r.read(node, "sequence_parallel", p.sequenceParallel));
  SHARC_TRY(r.read(node, "async_communication", p.asyncCommunication));
  SHARC_TRY(r.read(node, "vocab_parallel", p.vocabParallel));
  SHARC_TRY(r.read(node, "model_batch_size", p.modelBatchSize));
  SHARC_TRY(r.read(node, "global_batch_size", p.globalBatchSize));
  SHARC_TRY(r.read(node, "layers", p.layers));
  SHARC_TRY(r.read(node, "seq_len", p.seqLen));
  SHARC_TRY(r.read(node, "params", p.params));
  SHARC_TRY(r.read(node, "flops_per_token", p.flopsPerToken));
  SHARC_TRY(r.read(node, "predicted_step_ms", p.predictedStepMs, false));
  SHARC_TRY(r.read(node, "exposed_comm_ms", p.exposedCommMs, false));
  SHARC_TRY(r.read(node, "simulated_bubble", p.simulatedBubble, false));
  SHARC_TRY(r.read(node, "plan", p.planPath));
  SHARC_TRY(r.read(node, "status", p.status));
  SHARC_TRY(r.read(node, "reason", p.reason, false));
  if (p.status != "ok" && p.status != "error" && p.status != "oom")
    return Status::invalidInput(r.where(node["status"]) +
                                ": status is ok, oom or error, not '" +
                                p.status + "'");
  if (p.worldSize < 1 || p.globalBatchSize < 1 || p.seqLen < 1 ||
      p.ppSize < 1 || p.cpSize < 1 || p.numMicrobatches < 1)
    return Status::invalidInput(r.where(node) +
                                ": world_size, global_batch_size, seq_len, "
                                "pp_size, cp_size and num_microbatches must "
                                "be positive");
  if (!p.planPath.empty() && std::filesystem::path(p.planPath).is_relative())
    p.planPath = (folder / p.planPath).string();
  return Status::ok();
}

Status readManifest(const FieldReader &r, const YAML::Node &root,
                    const std::filesystem::path &folder, BenchManifest &m) {
  if (!root.IsMap())
    return Status::invalidInput(r.where(root) + ": a manifest is a map");
  SHARC_TRY(r.read(root, "kind", m.kind));
  SHARC_TRY(r.read(root, "scaling", m.scaling));
  SHARC_TRY(r.read(root, "backend", m.backend));
  SHARC_TRY(r.read(root, "cuda_graph", m.cudaGraph, false));
  SHARC_TRY(r.read(root, "batch_policy", m.batchPolicy));
  SHARC_TRY(r.read(root, "pp_schedule", m.ppSchedule, false));
  SHARC_TRY(r.read(root, "warmup_iters", m.warmupIters));
  SHARC_TRY(r.read(root, "benchmark_iters", m.benchmarkIters));
  SHARC_TRY(r.read(root, "num_microbatches", m.numMicrobatches));
  SHARC_TRY(r.read(root, "seed", m.seed));
  SHARC_TRY(r.read(root, "memory_limit_mib", m.memoryLimitMiB, false));
  SHARC_TRY(r.read(root, "peak_flops_per_gpu", m.peakFlopsPerGpu, false));
  SHARC_TRY(r.read(root, "output_csv", m.outputCsv));
  if (m.kind != "memory" && m.kind != "throughput")
    return Status::invalidInput(r.where(root["kind"]) +
                                ": kind is memory or throughput");
  if (m.warmupIters < 0 || m.benchmarkIters < 1 || m.memoryLimitMiB < 0)
    return Status::invalidInput(r.where(root) +
                                ": warmup_iters >= 0, benchmark_iters >= 1 "
                                "and memory_limit_mib >= 0 are required");
  YAML::Node modes = root["modes"];
  if (!modes || !modes.IsSequence())
    return Status::invalidInput(r.where(root) + ": 'modes' is a list");
  for (const YAML::Node &mode : modes) {
    std::string name;
    if (!mode.IsScalar() || !YAML::convert<std::string>::decode(mode, name))
      return Status::invalidInput(r.where(mode) + ": a mode is a name");
    m.modes.push_back(name);
  }
  YAML::Node points = root["points"];
  if (!points || !points.IsSequence())
    return Status::invalidInput(r.where(root) + ": 'points' is a list");
  for (const YAML::Node &node : points) {
    BenchPointSpec point;
    SHARC_TRY(readPoint(r, node, folder, point));
    m.points.push_back(std::move(point));
  }
  return Status::ok();
}

} // namespace

Result<BenchManifest> readBenchManifest(const std::string &path) {
  auto text = readWholeFile(path, "manifest");
  if (!text)
    return text.status();
  BenchManifest manifest;
  std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  SHARC_TRY(readYaml(*text, path, [&](const YAML::Node &root) {
    return readManifest(FieldReader(path), root, folder, manifest);
  }));
  return manifest;
}

} // namespace sharc::benchrun
