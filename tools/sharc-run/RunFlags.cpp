//===- RunFlags.cpp - sharc-run's flags, parsed and checked ---------------===//
//
// Counts are parsed strictly (parseCount): a sign, a suffix or a value that
// would wrap is refused rather than read as some other number. The checks
// after the loop compare flags with each other, so they run once all are
// read.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/RunFlags.h"

#include "planner/plan/FileText.h"
#include "planner/plan/PlanText.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace sharc {
namespace {

const char *kUsage =
    "usage: sharc-run PLAN [--backend auto|cpu|cuda] [--steps N] [--seed N]\n"
    "                 [--data FILE [--shuffle] | --synthetic]\n"
    "                 [--load CKPT | --resume] [--stop-file FILE]\n"
    "                 [--save CKPT] [--dump-outputs FILE.safetensors]\n"
    "                 [--poison] [--check] [--quiet] [--cuda-graph]\n"
    "                 [--share-gpus]\n"
    "                 [--validate DENSE_PLAN | --compare-cpu]\n"
    "                 [--trace FILE.json] [--timeout SECONDS]\n"
    "                 [--val-data FILE [--eval-every N] [--eval-batches N]]\n"
    "                 [--save-every N [--keep-last K] [--save-in-place]]\n"
    "                 [--log FILE.csv]\n"
    "       sharc-run PLAN --generate IDS [--max-new-tokens N] [--warmup N]\n"
    "                 [--temperature T] [--top-k K] [--top-p P]\n"
    "                 [--stop-id ID] [--load CKPT] [--seed N]\n"
    "       sharc-run --bench MANIFEST [--backend B] [--output_csv FILE]\n"
    "                 (a sweep `sharc bench` compiled; BenchRunner.h)\n"
    "  --backend       auto (default): cuda when this build has it and the\n"
    "                  node has a GPU per rank; with fewer GPUs that can\n"
    "                  read each other's memory, cuda with the ranks\n"
    "                  sharing them (as --share-gpus); else cpu\n"
    "  mpirun -np P sharc-run PLAN ...  spreads the plan's ranks over P\n"
    "                  processes (a GPU each on cuda; on the cpu, messages\n"
    "                  over MPI), with one process's results; the first\n"
    "                  prints and writes files, and a failing process ends\n"
    "                  them all\n"
    "  --resume        continue from the newest checkpoint --save and\n"
    "                  --save-every wrote (by the step inside each), or\n"
    "                  start afresh where there is none; --steps N then\n"
    "                  counts from step 0, so that the same command run\n"
    "                  again (a job requeued after a stop) ends at step N\n"
    "  SIGINT, SIGTERM, SIGUSR1  stop training after the step in flight:\n"
    "                  saved where --save says, then exit 128 + the signal\n"
    "                  (under mpirun, to a sharc-run process: they agree\n"
    "                  on the step); a second signal stops at once\n"
    "  --stop-file FILE  stop the same way once FILE exists (`touch\n"
    "                  FILE`, where the launcher passes no signal on):\n"
    "                  the run removes it and exits 75, and the same\n"
    "                  command with --resume goes on\n"
    "  --data FILE     a token file (docs/data.md: scripts/prepare-data.py's,\n"
    "                  or raw int32 ids), read in windows of seq_len tokens\n"
    "                  (default: --synthetic); --shuffle reads its windows\n"
    "                  in a fixed scattered order that checkpoints keep\n"
    "  --val-data FILE  validation tokens: prints the loss and perplexity\n"
    "                  of the forward pass alone (no parameter changes) on\n"
    "                  its first --eval-batches batches (16) before the\n"
    "                  first step, every --eval-every steps and after the\n"
    "                  last\n"
    "  --log FILE.csv  write one CSV row per step and per evaluation,\n"
    "                  flushed as each is written (plot it while the run\n"
    "                  goes on: scripts/plot-training.py); columns step,\n"
    "                  kind (train|val), loss, lr, grad_norm, tokens_per_s,\n"
    "                  step_s, elapsed_s, val_loss, val_ppl (docs/data.md)\n"
    "  --save-every N  also write CKPT-stepNNNNNN.safetensors every N steps\n"
    "                  (--save CKPT names them), keeping the last\n"
    "                  --keep-last K (3); every checkpoint is atomic.\n"
    "                  The run waits while the state is gathered into host\n"
    "                  memory, and a thread writes the file as training\n"
    "                  goes on; --save-in-place (or a host with less than\n"
    "                  twice the checkpoint available) waits for the file\n"
    "  --poison        fill activations with NaN before every step\n"
    "  --check         reject a plan whose streams may touch the same\n"
    "                  bytes without an event ordering them (exit 1),\n"
    "                  fill each activation with NaN after its last use,\n"
    "                  and stop (exit 1) at the first instruction whose\n"
    "                  output holds a NaN or infinity, naming it\n"
    "  --validate [DENSE_PLAN]  (default: PLAN.dense)\n"
    "                  run PLAN and the dense plan from the same weights and\n"
    "                  tokens; compare loss, logits and every gradient after\n"
    "                  one step and the parameters after --steps (default 5)\n"
    "                  AdamW steps; both compiled with --emit-logits\n"
    "                  --keep-grads. Exit 1 when they differ. PLAN runs on\n"
    "                  --backend, the dense plan on the cpu.\n"
    "  --compare-cpu   as --validate, with PLAN itself run on the cpu as\n"
    "                  the reference (PLAN on --backend, normally cuda)\n"
    "  --timeout S     deadline of every collective and event wait, and of\n"
    "                  a step's drain on the GPU (default 60)\n"
    "  --trace FILE.json  write the last step's instruction timings as a\n"
    "                  Chrome trace (chrome://tracing, Perfetto): one\n"
    "                  process per rank, one thread per stream, and a\n"
    "                  counter of the activation MiB live at each\n"
    "                  instruction\n"
    "  --cuda-graph    on the GPU, capture the second step as a CUDA graph\n"
    "                  and replay it for every later step (fewer launches;\n"
    "                  traced steps run eagerly); evaluation's passes\n"
    "                  too, each from its second run (--generate's always)\n"
    "  --generate IDS  continue the prompt IDS (comma-separated token ids)\n"
    "                  instead of training, each batch row one sample\n"
    "                  (given once per row: each row its own prompt): a\n"
    "                  plan compiled with --decode (one position a token\n"
    "                  through key/value caches of seq_len positions) or\n"
    "                  --emit-logits (a forward pass of the seq_len window\n"
    "                  a token); prints\n"
    "                  `token I: ID...` as each comes, then `sample B: IDS`\n"
    "                  (scripts/generate.py encodes and decodes text)\n"
    "  --max-new-tokens N  tokens to generate (32)\n"
    "  --warmup N      generate N times first, unprinted (CUDA graphs\n"
    "                  captured, caches warm: a server's steady state), so\n"
    "                  the times printed leave out first-run costs\n"
    "  --temperature T the softmax's temperature (0.8); 0 is greedy\n"
    "  --top-k K       draw among the K highest logits (40); 0: all\n"
    "  --top-p P       of those, among the fewest highest whose probability\n"
    "                  reaches P (nucleus sampling; 1, the default: all)\n"
    "  --stop-id ID    a row ends when it draws ID (an end-of-text id; may\n"
    "                  be given more than once); the run ends when all have\n"
    "  --share-gpus    on cuda, run a plan with more ranks than the node has\n"
    "                  GPUs: rank r on GPU r mod GPUs, collectives and\n"
    "                  transfers as copies between the ranks' memory on\n"
    "                  the GPUs (through the host where the GPUs cannot\n"
    "                  reach each other); for checking multi-rank plans\n"
    "                  (with --validate or --compare-cpu) on a small machine\n";

/// Whether two paths, existing or not, name the same file: compared as
/// absolute paths with symbolic links resolved where they exist.
bool samePath(const std::string &a, const std::string &b) {
  std::error_code errorA, errorB;
  auto canonicalA = std::filesystem::weakly_canonical(a, errorA);
  auto canonicalB = std::filesystem::weakly_canonical(b, errorB);
  if (errorA || errorB)
    return a == b;
  return canonicalA == canonicalB || sameFile(a, b);
}

/// A decimal count in [0, 2^62]; anything else (a sign, a suffix, a value
/// that would wrap) is nullopt, never a wrapped number.
std::optional<int64_t> parseCount(const std::string &text) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || value > (1ull << 62))
    return std::nullopt;
  return static_cast<int64_t>(value);
}

/// Comma-separated counts, each at most `limit`; nullopt for anything else.
std::optional<std::vector<int32_t>> parseIds(const std::string &text,
                                             int64_t limit) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(',', begin);
    std::optional<int64_t> id = parseCount(text.substr(begin, end - begin));
    if (!id || *id > limit)
      return std::nullopt;
    ids.push_back(static_cast<int32_t>(*id));
    if (end == std::string::npos)
      return ids;
    begin = end + 1;
  }
}

} // namespace

Result<RunFlags> parseRunFlags(int argc, char **argv) {
  RunFlags options;
  bool timeoutGiven = false, stepsGiven = false;
  bool samplingGiven[6] = {false, false, false, false, false, false};
  auto bad = [](const std::string &message) {
    return Status::invalidInput(message);
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc)
        return std::nullopt;
      return std::string(argv[++i]);
    };
    auto needValue = [&](std::string &into) -> Status {
      auto text = value();
      if (!text)
        return bad(flag + " needs a value");
      into = *text;
      return Status::ok();
    };
    auto needCount = [&](auto &into) -> Status {
      auto text = value();
      std::optional<int64_t> count = text ? parseCount(*text) : std::nullopt;
      if (!count)
        return bad(flag + " needs a non-negative integer" +
                   (text ? ", got '" + *text + "'" : std::string()));
      into = static_cast<std::decay_t<decltype(into)>>(*count);
      return Status::ok();
    };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--backend") {
      SHARC_TRY(needValue(options.backend));
    } else if (flag == "--compare-cpu") {
      options.compareCpu = true;
    } else if (flag == "--timeout") {
      timeoutGiven = true;
      SHARC_TRY(needCount(options.timeoutSeconds));
      if (options.timeoutSeconds < 1 || options.timeoutSeconds > 86400)
        return bad("--timeout needs 1 to 86400 seconds");
    } else if (flag == "--steps") {
      stepsGiven = true;
      SHARC_TRY(needCount(options.steps));
      if (options.steps > 100000000)
        return bad("--steps " + std::to_string(options.steps) +
                   " is over the limit of 100000000");
    } else if (flag == "--seed") {
      SHARC_TRY(needCount(options.seed));
    } else if (flag == "--data") {
      SHARC_TRY(needValue(options.dataPath));
    } else if (flag == "--shuffle") {
      options.shuffle = true;
    } else if (flag == "--val-data") {
      SHARC_TRY(needValue(options.valPath));
    } else if (flag == "--eval-every") {
      SHARC_TRY(needCount(options.evalEvery));
    } else if (flag == "--eval-batches") {
      SHARC_TRY(needCount(options.evalBatches));
      if (options.evalBatches < 1)
        return bad("--eval-batches needs at least 1");
    } else if (flag == "--save-every") {
      SHARC_TRY(needCount(options.saveEvery));
    } else if (flag == "--save-in-place") {
      options.saveInPlace = true;
    } else if (flag == "--keep-last") {
      SHARC_TRY(needCount(options.keepLast));
      if (options.keepLast < 1)
        return bad("--keep-last needs at least 1");
    } else if (flag == "--synthetic") {
      options.dataPath.clear();
    } else if (flag == "--load") {
      SHARC_TRY(needValue(options.loadPath));
    } else if (flag == "--resume") {
      options.resume = true;
    } else if (flag == "--stop-file") {
      SHARC_TRY(needValue(options.stopFile));
    } else if (flag == "--save") {
      SHARC_TRY(needValue(options.savePath));
    } else if (flag == "--dump-outputs") {
      SHARC_TRY(needValue(options.dumpPath));
    } else if (flag == "--trace") {
      SHARC_TRY(needValue(options.tracePath));
    } else if (flag == "--log") {
      SHARC_TRY(needValue(options.logPath));
    } else if (flag == "--validate") {
      // The dense plan may follow; without it, PLAN.dense (what `sharc
      // compile --with-dense-reference` writes beside the plan).
      if (i + 1 < argc && argv[i + 1][0] != '-')
        options.validatePath = argv[++i];
      else
        options.validatePath = "<plan>.dense";
    } else if (flag == "--poison") {
      options.poison = true;
    } else if (flag == "--check") {
      options.check = true;
    } else if (flag == "--quiet") {
      options.quiet = true;
    } else if (flag == "--cuda-graph") {
      options.cudaGraph = true;
    } else if (flag == "--share-gpus") {
      options.shareGpus = true;
    } else if (flag == "--generate") {
      std::string text;
      SHARC_TRY(needValue(text));
      auto ids = parseIds(text, std::numeric_limits<int32_t>::max());
      if (!ids)
        return bad("--generate needs comma-separated token ids, got '" + text +
                   "'");
      options.prompts.push_back(std::move(*ids));
    } else if (flag == "--max-new-tokens") {
      samplingGiven[0] = true;
      SHARC_TRY(needCount(options.maxNewTokens));
      if (options.maxNewTokens < 1 || options.maxNewTokens > 1000000)
        return bad("--max-new-tokens needs 1 to 1000000");
    } else if (flag == "--warmup") {
      samplingGiven[5] = true;
      SHARC_TRY(needCount(options.warmup));
      if (options.warmup < 0 || options.warmup > 1000)
        return bad("--warmup needs 0 to 1000");
    } else if (flag == "--temperature") {
      samplingGiven[1] = true;
      std::string text;
      SHARC_TRY(needValue(text));
      auto value = plan::text::parseDouble(text);
      if (!value || !(*value >= 0.0 && *value <= 100.0))
        return bad("--temperature needs a number from 0 to 100, got '" + text +
                   "'");
      options.temperature = *value;
    } else if (flag == "--top-k") {
      samplingGiven[2] = true;
      SHARC_TRY(needCount(options.topK));
    } else if (flag == "--stop-id") {
      samplingGiven[4] = true;
      std::string text;
      SHARC_TRY(needValue(text));
      auto ids = parseIds(text, std::numeric_limits<int32_t>::max());
      if (!ids || ids->size() != 1)
        return bad("--stop-id needs one token id, got '" + text + "'");
      options.stopIds.push_back(ids->front());
    } else if (flag == "--top-p") {
      samplingGiven[3] = true;
      std::string text;
      SHARC_TRY(needValue(text));
      auto value = plan::text::parseDouble(text);
      if (!value || !(*value > 0.0 && *value <= 1.0))
        return bad("--top-p needs a number above 0 and at most 1, got '" +
                   text + "'");
      options.topP = *value;
    } else if (!flag.empty() && flag[0] == '-') {
      return bad("unknown flag '" + flag + "' (see --help)");
    } else if (options.planPath.empty()) {
      options.planPath = flag;
    } else {
      return bad("unexpected argument '" + flag + "': one plan per run");
    }
  }
  if (options.planPath.empty())
    return bad("no plan file given (see --help)");
  if (!options.tracePath.empty() && options.steps == 0)
    return bad("--trace needs --steps >= 1");
  if (!options.tracePath.empty() && !options.validatePath.empty())
    return bad("--trace does not apply to --validate");
  if (options.shuffle && options.dataPath.empty())
    return bad("--shuffle needs --data FILE");
  if (options.evalEvery > 0 && options.valPath.empty())
    return bad("--eval-every needs --val-data FILE");
  if (options.saveEvery > 0 && options.savePath.empty())
    return bad("--save-every needs --save CKPT (it names the checkpoints)");
  if (options.resume && options.savePath.empty())
    return bad("--resume needs --save CKPT (it continues from the newest "
               "checkpoint that --save and --save-every write)");
  if (options.resume && !options.loadPath.empty())
    return bad("--resume picks the checkpoint itself: give --load or "
               "--resume, not both");
  if (options.saveInPlace && options.saveEvery == 0)
    return bad("--save-in-place needs --save-every N");
  if (options.validatePath == "<plan>.dense")
    options.validatePath = options.planPath + ".dense";
  if (options.backend != "cpu" && options.backend != "cuda" &&
      options.backend != "auto")
    return bad("unknown backend '" + options.backend +
               "' (expected auto, cpu or cuda)");
  if (options.compareCpu && !options.validatePath.empty())
    return bad("--compare-cpu and --validate each pick a reference; give one");
  if (options.compareCpu && !options.tracePath.empty())
    return bad("--trace does not apply to --compare-cpu");
  if (options.compareCpu)
    options.validatePath = options.planPath;
  // Generation trains nothing and reads no data: a flag of training would
  // be silently ignored.
  if (!options.prompts.empty())
    for (const auto &[flag, given] :
         {std::pair{"--steps", stepsGiven},
          {"--data", !options.dataPath.empty()},
          {"--val-data", !options.valPath.empty()},
          {"--save", !options.savePath.empty()},
          {"--dump-outputs", !options.dumpPath.empty()},
          {"--trace", !options.tracePath.empty()},
          {"--log", !options.logPath.empty()},
          {"--stop-file", !options.stopFile.empty()},
          {"--validate", !options.validatePath.empty() && !options.compareCpu},
          {"--compare-cpu", options.compareCpu}})
      if (given)
        return bad(std::string(flag) + " does not apply to --generate");
  if (options.prompts.empty())
    for (const auto &[flag, given] :
         {std::pair{"--max-new-tokens", samplingGiven[0]},
          {"--temperature", samplingGiven[1]},
          {"--top-k", samplingGiven[2]},
          {"--top-p", samplingGiven[3]},
          {"--stop-id", samplingGiven[4]},
          {"--warmup", samplingGiven[5]}})
      if (given)
        return bad(std::string(flag) + " needs --generate IDS");
  // An output may never replace an input of the same run.
  for (const std::string *output : {&options.savePath, &options.dumpPath,
                                    &options.tracePath, &options.logPath})
    for (const std::string *input : {&options.planPath, &options.loadPath,
                                     &options.dataPath, &options.valPath})
      if (!output->empty() && !input->empty() && sameFile(*output, *input))
        return bad("'" + *output + "' is both an input and an output of " +
                   "this run; write the output elsewhere");
  // The run removes its stop file: that must never be another file of it
  // (which need not exist yet, so paths are compared, not inodes).
  if (!options.stopFile.empty())
    for (const std::string *other :
         {&options.planPath, &options.loadPath, &options.dataPath,
          &options.valPath, &options.savePath, &options.dumpPath,
          &options.tracePath, &options.logPath})
      if (!other->empty() && samePath(options.stopFile, *other))
        return bad("--stop-file '" + options.stopFile +
                   "' is another file of this run; name a file of its own");
  // Validation starts both runs from --seed's weights: a checkpoint, an
  // output file or a token file would be silently ignored there.
  if (!options.validatePath.empty())
    for (const auto &[flag, value] : {std::pair{"--load", &options.loadPath},
                                      {"--save", &options.savePath},
                                      {"--dump-outputs", &options.dumpPath},
                                      {"--log", &options.logPath},
                                      {"--stop-file", &options.stopFile},
                                      {"--data", &options.dataPath},
                                      {"--val-data", &options.valPath}})
      if (!value->empty())
        return bad(std::string(flag) + " does not apply to " +
                   (options.compareCpu ? "--compare-cpu" : "--validate"));
  // Nor are the checking modes or the deadline passed to validation.
  if (!options.validatePath.empty())
    for (const auto &[flag, given] : {std::pair{"--check", options.check},
                                      {"--poison", options.poison},
                                      {"--timeout", timeoutGiven}})
      if (given)
        return bad(std::string(flag) + " does not apply to " +
                   (options.compareCpu ? "--compare-cpu" : "--validate"));
  return options;
}

Status checkOutputFolders(const RunFlags &options) {
  for (const auto &[flag, path] : {std::pair{"--save", &options.savePath},
                                   {"--dump-outputs", &options.dumpPath},
                                   {"--trace", &options.tracePath}})
    if (!path->empty())
      SHARC_TRY(checkWritablePath(*path, flag));
  return Status::ok();
}

} // namespace sharc
