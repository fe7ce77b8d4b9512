//===- BenchFlags.cpp - `sharc bench` flags and the sweep's points --------===//
//
// The original's orchestrator arguments (seed-system.md, 3.2), its checks
// before any run and its batch policies (3.4). Flags keep the original's
// snake_case spelling so that its commands run unchanged after `sharc
// bench`; sharc's own additions are kebab-case.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/DeviceWorkspace.h"
#include "tools/sharc/BenchModes.h"
#include "tools/sharc/BenchSweep.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace sharc::bench {
namespace {

constexpr int kExitBadInput = 2;

const char *kUsage =
    "usage: sharc bench --kind memory|throughput [--modes MODE...]\n"
    "         [--tp_size N] [--pp_size N] [--cp_size N]\n"
    "         [--cp_comm_type all_gather|a2a] [--pp_schedule gpipe|1f1b|"
    "interleaved]\n"
    "         [--virtual_stages V] [--sequence_parallel] "
    "[--async_communication]\n"
    "         [--vocab_parallel] [--num_hidden_layers L...] [--seq_len S...]\n"
    "         [--hidden_size H] [--num_attention_heads N]\n"
    "         [--num_key_value_heads N] [--vocab_size V] [--head_dim D]\n"
    "         [--intermediate_size I] [--micro_batch_size B]\n"
    "         [--num_microbatches M] [--batch_policy fixed_per_rank|"
    "fixed_global]\n"
    "         [--dtype bfloat16|bf16-mixed|float32] [--warmup_iters N]\n"
    "         [--benchmark_iters N] [--seed N] [--output_csv FILE]\n"
    "         [--output_plot FILE] [--backend auto|cpu|cuda]\n"
    "         [--work-dir DIR] [--machine MACHINE.yaml] [--compile-only]\n"
    "         [--memory-limit-mib N] [--peak-flops F] [--cuda_graph]\n"
    "         [--no_fuse_adds] [--no_fuse_norm_rope]\n"
    "         [--fuse_projections[=all|gate_up]] [--schedule defer|latency]\n"
    "         [--zero_stage 0|1|3] [--recompute none|selective|full|auto]\n"
    "  modes: ddp tp tp_sp tp_sp_async tp_vp tp_sp_async_vp (ddp and tp\n"
    "         runners: the batch in one pass), cp pp tp_cp tp_pp pp_cp\n"
    "         tp_cp_pp (the general runner: num_microbatches of\n"
    "         micro_batch_size through the pipeline schedule)\n"
    "  --tp_size, --cp_size, --pp_size  the ranks on each axis of the modes\n"
    "                  that have it (defaults 2, 1, 2); ddp runs on the\n"
    "                  other modes' world, alone on tp x cp x pp as given\n"
    "  --cp_comm_type  context parallelism's attention exchange: K/V\n"
    "                  all-gathered (default) or Ulysses all-to-all\n"
    "  --pp_schedule   gpipe (default), 1f1b, or interleaved 1F1B with\n"
    "                  --virtual_stages V model chunks a stage (default 2)\n"
    "  --sequence_parallel, --async_communication, --vocab_parallel  the\n"
    "                  features of tp, tp_cp, tp_pp and tp_cp_pp (async: the\n"
    "                  SP re-gather; the overlap is always on)\n"
    "  --compile-only  write the plans and the manifest into --work-dir\n"
    "                  (default sharc-bench) and print the sharc-run\n"
    "                  command that runs them (on a GPU node)\n"
    "  --memory-limit-mib N  the memory one rank may use (a point whose\n"
    "                  plan needs more is an oom row); default: what the\n"
    "                  device has free (cuda), the host's available memory\n"
    "                  shared by the ranks (cpu)\n"
    "  --cuda_graph    on GPUs, time steps replayed from a CUDA graph (the\n"
    "                  second warm-up step is captured)\n"
    "  --no_fuse_adds, --no_fuse_norm_rope, --schedule latency  compile\n"
    "                  every point as `sharc compile --no-fuse-adds`,\n"
    "                  `--no-fuse-norm-rope`, `--schedule latency` would\n"
    "                  (adds in the GEMMs' epilogue and q/k norm + rope as\n"
    "                  one kernel are on by default)\n"
    "  --fuse_projections[=all|gate_up|none], --no_fuse_projections\n"
    "                  compile every point as `sharc compile\n"
    "                  --fuse-projections=...` would: one GEMM for q/k/v\n"
    "                  and one for gate/up (all, the default), for gate/up\n"
    "                  alone, or a GEMM for every projection (none)\n"
    "  --zero_stage 1  ddp with ZeRO-1 (`sharc compile --zero 1`): each dp\n"
    "                  rank keeps the optimizer state of one block of every\n"
    "                  parameter (the other modes have no dp axis); 3: the\n"
    "                  parameters too, gathered where the step reads them\n"
    "  --recompute full  every mode with `sharc compile --recompute full`:\n"
    "                  each layer's forward runs again in the backward and\n"
    "                  only the layers' inputs are kept (under SP it\n"
    "                  replaces the async modes' re-gather); selective: its\n"
    "                  norms, rope and SwiGLU alone; auto: each point\n"
    "                  re-runs the least whose plan fits --memory-limit-mib\n"
    "                  less 1152 MiB for NCCL and the libraries (default:\n"
    "                  the machine file's gpu_memory less 1920 MiB; `sharc\n"
    "                  compile --recompute auto`), and a point none fits is\n"
    "                  an oom row\n";

int badFlags(const std::string &message) {
  std::fprintf(stderr, "sharc: error: %s\n%s", message.c_str(), kUsage);
  return kExitBadInput;
}

std::optional<int64_t> parsePositive(const std::string &text) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || value > (1LL << 40))
    return std::nullopt;
  return value;
}

int64_t defaultIntermediate(int64_t hidden) {
  // ceil(H * pi / 64) * 64 (seed-system.md, 1.1).
  return static_cast<int64_t>(std::ceil(hidden * M_PI / 64.0)) * 64;
}

/// The checks the original makes before any run (3.2); an error or "".
std::string checkConfig(const BenchConfig &c) {
  if (c.kind != "memory" && c.kind != "throughput")
    return "--kind takes memory or throughput, not '" + c.kind + "'";
  if (c.batchPolicy != "fixed_global" && c.batchPolicy != "fixed_per_rank")
    return "--batch_policy takes fixed_per_rank or fixed_global, not '" +
           c.batchPolicy + "'";
  if (c.dtype != "bfloat16" && c.dtype != "float32" && c.dtype != "bf16-mixed")
    return "--dtype takes bfloat16, bf16-mixed or float32, not '" + c.dtype +
           "'";
  if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda")
    return "--backend takes auto, cpu or cuda, not '" + c.backend + "'";
  if (c.schedule != "defer" && c.schedule != "latency")
    return "--schedule takes defer or latency, not '" + c.schedule + "'";
  if (c.recompute != "none" && c.recompute != "full" &&
      c.recompute != "selective" && c.recompute != "auto")
    return "--recompute takes none, selective, full or auto, not '" +
           c.recompute + "'";
  if (c.recompute == "auto" && c.memoryLimitMiB > 0 &&
      c.memoryLimitMiB <= plan::kCudaRankReserveBytes >> 20)
    return "--recompute auto fits each point's plan in --memory-limit-mib "
           "MIB a rank less the 1152 MiB kept for NCCL and the libraries; "
           "give more than that";
  if (c.fuseProjections != "none" && c.fuseProjections != "all" &&
      c.fuseProjections != "gate_up")
    return "--fuse_projections takes all, gate_up or none, not '" +
           c.fuseProjections + "'";
  if (c.numHiddenLayers.size() > 1 && c.seqLens.size() > 1)
    return "at most one of --num_hidden_layers and --seq_len may hold "
           "several values";
  if (c.benchmarkIters < 1)
    return "--benchmark_iters must be at least 1";
  if (c.hiddenSize % c.numAttentionHeads != 0 && !c.headDim)
    return "--hidden_size " + std::to_string(c.hiddenSize) +
           " is not a multiple of --num_attention_heads " +
           std::to_string(c.numAttentionHeads) + " (give --head_dim)";
  if (std::string error = checkModes(c); !error.empty())
    return error;
  if (c.peakFlopsPerGpu <= 0)
    return "--peak-flops must be positive";
  return "";
}

} // namespace

std::variant<BenchConfig, int>
parseBenchFlags(const std::vector<std::string> &args) {
  BenchConfig c;
  std::map<std::string, int64_t *> counts = {
      {"--tp_size", &c.tpSize},
      {"--cp_size", &c.cpSize},
      {"--hidden_size", &c.hiddenSize},
      {"--num_attention_heads", &c.numAttentionHeads},
      {"--num_key_value_heads", &c.numKeyValueHeads},
      {"--vocab_size", &c.vocabSize},
      {"--micro_batch_size", &c.microBatchSize},
      {"--num_microbatches", &c.numMicrobatches},
      {"--benchmark_iters", &c.benchmarkIters},
      {"--memory-limit-mib", &c.memoryLimitMiB}};
  std::map<std::string, std::string *> strings = {
      {"--kind", &c.kind},
      {"--batch_policy", &c.batchPolicy},
      {"--dtype", &c.dtype},
      {"--output_csv", &c.outputCsv},
      {"--output_plot", &c.outputPlot},
      {"--backend", &c.backend},
      {"--work-dir", &c.workDir},
      {"--schedule", &c.schedule},
      {"--recompute", &c.recompute},
      {"--cp_comm_type", &c.cpCommType},
      {"--pp_schedule", &c.ppSchedule},
      {"--machine", &c.machinePath}};
  bool batchPolicyGiven = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &flag = args[i];
    bool hasValue = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flag == "--compile-only") {
      c.compileOnly = true;
    } else if (flag == "--cuda_graph") {
      c.cudaGraph = true;
    } else if (flag == "--fuse_adds") {
      c.fuseAdds = true;
    } else if (flag == "--no_fuse_adds") {
      c.fuseAdds = false;
    } else if (flag == "--fuse_norm_rope") {
      c.fuseNormRope = true;
    } else if (flag == "--no_fuse_norm_rope") {
      c.fuseNormRope = false;
    } else if (flag == "--fuse_projections") {
      c.fuseProjections = "all";
    } else if (flag == "--no_fuse_projections") {
      c.fuseProjections = "none";
    } else if (flag.rfind("--fuse_projections=", 0) == 0) {
      // The value only after '=', as `sharc compile` takes it: a bare flag
      // means all.
      c.fuseProjections =
          flag.substr(std::string("--fuse_projections=").size());
    } else if (flag == "--sequence_parallel") {
      c.sequenceParallel = true;
    } else if (flag == "--async_communication") {
      c.asyncCommunication = true;
    } else if (flag == "--vocab_parallel") {
      c.vocabParallel = true;
    } else if (flag == "--modes") {
      c.modes.clear();
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
        c.modes.push_back(args[++i]);
    } else if (flag == "--num_hidden_layers" || flag == "--seq_len") {
      std::vector<int64_t> &list =
          flag == "--seq_len" ? c.seqLens : c.numHiddenLayers;
      list.clear();
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        std::optional<int64_t> value = parsePositive(args[++i]);
        if (!value || *value < 1)
          return badFlags(flag + " takes positive integers, got '" + args[i] +
                          "'");
        list.push_back(*value);
      }
      if (list.empty())
        return badFlags(flag + " needs at least one value");
    } else if (counts.count(flag) || flag == "--warmup_iters" ||
               flag == "--seed" || flag == "--head_dim" ||
               flag == "--intermediate_size" || flag == "--pp_size" ||
               flag == "--virtual_stages") {
      std::optional<int64_t> value =
          hasValue ? parsePositive(args[++i]) : std::nullopt;
      bool zeroAllowed = flag == "--warmup_iters" || flag == "--seed" ||
                         flag == "--memory-limit-mib";
      if (!value || (*value < 1 && !zeroAllowed))
        return badFlags(flag + " needs a " +
                        (zeroAllowed ? "non-negative" : "positive") +
                        " integer");
      if (flag == "--warmup_iters")
        c.warmupIters = *value;
      else if (flag == "--seed")
        c.seed = *value;
      else if (flag == "--head_dim")
        c.headDim = *value;
      else if (flag == "--intermediate_size")
        c.intermediateSize = *value;
      else if (flag == "--pp_size")
        c.ppSize = *value;
      else if (flag == "--virtual_stages")
        c.virtualStages = *value;
      else
        *counts[flag] = *value;
    } else if (strings.count(flag)) {
      if (!hasValue)
        return badFlags(flag + " needs a value");
      *strings[flag] = args[++i];
      batchPolicyGiven |= flag == "--batch_policy";
    } else if (flag == "--zero_stage") {
      std::string value = hasValue ? args[++i] : "";
      if (value != "0" && value != "1" && value != "3")
        return badFlags("--zero_stage takes 0, 1 or 3 (stage 2's saving is "
                        "in every plan: `sharc compile --zero`)");
      c.zeroStage = std::stoll(value);
    } else if (flag == "--peak-flops") {
      char *end = nullptr;
      c.peakFlopsPerGpu = hasValue ? std::strtod(args[++i].c_str(), &end) : 0;
      if (!hasValue || *end != '\0')
        return badFlags("--peak-flops needs a number (FLOP/s per GPU)");
    } else {
      return badFlags("unknown bench flag '" + flag + "'");
    }
  }
  // The original forces fixed_global for throughput: every mode then
  // processes the same tokens per step.
  if (c.kind == "throughput") {
    if (batchPolicyGiven && c.batchPolicy != "fixed_global")
      std::fprintf(stderr, "sharc: warning: --kind throughput forces "
                           "--batch_policy fixed_global\n");
    c.batchPolicy = "fixed_global";
  }
  if (std::string error = checkConfig(c); !error.empty())
    return badFlags(error);
  std::string stem =
      c.kind == "memory" ? "parallel_memory_scaling" : "parallel_throughput";
  if (c.outputCsv.empty())
    c.outputCsv = stem + ".csv";
  return c;
}

std::vector<BenchPoint> expandSweep(const BenchConfig &c) {
  std::vector<BenchPoint> points;
  int64_t ddpWorld = ddpWorldSize(c);
  int64_t headDim = c.headDim.value_or(c.hiddenSize / c.numAttentionHeads);
  int64_t intermediate =
      c.intermediateSize.value_or(defaultIntermediate(c.hiddenSize));
  for (int64_t layers : c.numHiddenLayers) {
    for (int64_t seqLen : c.seqLens) {
      for (const std::string &mode : c.modes) {
        BenchPoint p;
        resolveMode(c, *findMode(mode), ddpWorld, p);
        p.layers = layers;
        p.seqLen = seqLen;
        p.headDim = headDim;
        p.intermediateSize = intermediate;
        p.params = paramCount(c, layers);
        p.flopsPerToken = flopsPerToken(c, layers, seqLen);
        std::string stem = mode + "-L" + std::to_string(layers) + "-S" +
                           std::to_string(seqLen);
        p.modelPath = "points/" + stem + ".yaml";
        p.planPath = "points/" + stem + ".plan";
        points.push_back(std::move(p));
      }
    }
  }
  return points;
}

double flopsPerToken(const BenchConfig &c, int64_t layers, int64_t seqLen) {
  double hidden = static_cast<double>(c.hiddenSize);
  double headDim = static_cast<double>(
      c.headDim.value_or(c.hiddenSize / c.numAttentionHeads));
  double intermediate = static_cast<double>(
      c.intermediateSize.value_or(defaultIntermediate(c.hiddenSize)));
  double q = c.numAttentionHeads * headDim, kv = c.numKeyValueHeads * headDim;
  double linear = hidden * q * 2 + 2 * hidden * kv + 3 * hidden * intermediate;
  return layers * (6 * linear + 3 * 2 * static_cast<double>(seqLen) * q) +
         6 * hidden * static_cast<double>(c.vocabSize);
}

int64_t paramCount(const BenchConfig &c, int64_t layers) {
  int64_t h = c.hiddenSize;
  int64_t d = c.headDim.value_or(h / c.numAttentionHeads);
  int64_t i = c.intermediateSize.value_or(defaultIntermediate(h));
  int64_t q = c.numAttentionHeads * d, kv = c.numKeyValueHeads * d;
  return 2 * c.vocabSize * h +
         layers * (h * q + 2 * h * kv + q * h + 2 * d + 3 * h * i + 2 * h) + h;
}

} // namespace sharc::bench
