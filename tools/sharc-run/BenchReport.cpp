//===- BenchReport.cpp - progress lines, console table, CSV ---------------===//
//
// Metrics of an oom or error row are written as nan, as the original
// writes them; a prediction the compiler did not make is left empty.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchReport.h"

#include "planner/plan/FileText.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

namespace sharc::benchrun {

const char *const kBenchCsvColumns =
    "mode,label,runner,pp_schedule,pp_size,tp_size,cp_enabled,cp_size,"
    "cp_comm_type,sequence_parallel,async_communication,vocab_parallel,"
    "world_size,batch_policy,model_batch_size,global_batch_size,scaling,"
    "layers,seq_len,num_microbatches,params,peak_mib,time_ms,"
    "tokens_per_second,worker_pp_schedule,status,mfu,planned_peak_mib,"
    "exposed_comm_ms,predicted_step_ms,simulated_bubble,allocated_mib,reason";

namespace {

std::string format(const char *pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

/// 123.4K, 1.23M, as the original's console.
std::string tokensText(double tokensPerSecond) {
  if (tokensPerSecond >= 1e6)
    return format("%.2fM", tokensPerSecond / 1e6);
  if (tokensPerSecond >= 1e3)
    return format("%.1fK", tokensPerSecond / 1e3);
  return format("%.1f", tokensPerSecond);
}

bool scansSequence(const BenchManifest &manifest) {
  return manifest.scaling == "sequence";
}

int64_t rowKey(const BenchManifest &manifest, const BenchPointSpec &point) {
  return scansSequence(manifest) ? point.seqLen : point.layers;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width)
    text.append(width - text.size(), ' ');
  return text;
}

/// One table: rows by the scanned value, columns by mode; `value` gives a
/// cell's number (negative: none), `digits` its printf format.
std::string table(const BenchManifest &manifest,
                  const std::vector<BenchResult> &results,
                  const std::string &title, const char *digits,
                  const std::function<double(const BenchResult &)> &value) {
  std::vector<int64_t> rows;
  std::map<std::pair<int64_t, std::string>, size_t> at;
  for (size_t i = 0; i < manifest.points.size(); ++i) {
    int64_t key = rowKey(manifest, manifest.points[i]);
    if (std::find(rows.begin(), rows.end(), key) == rows.end())
      rows.push_back(key);
    at[{key, manifest.points[i].mode}] = i;
  }
  const std::vector<std::string> &modes = manifest.modes;
  std::string baseline =
      std::find(modes.begin(), modes.end(), "ddp") != modes.end()
          ? "ddp"
          : (modes.empty() ? "" : modes.front());
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {scansSequence(manifest) ? "Sequence"
                                                             : "Layers"};
  for (const std::string &mode : modes) {
    std::string label = mode;
    for (const BenchPointSpec &point : manifest.points)
      if (point.mode == mode)
        label = point.label;
    header.push_back(label);
  }
  cells.push_back(header);
  for (int64_t key : rows) {
    std::vector<std::string> line = {std::to_string(key)};
    double base = -1;
    if (auto it = at.find({key, baseline}); it != at.end())
      base =
          results[it->second].status == "ok" ? value(results[it->second]) : -1;
    for (const std::string &mode : modes) {
      auto it = at.find({key, mode});
      if (it == at.end()) {
        line.push_back("");
        continue;
      }
      const BenchResult &result = results[it->second];
      double cell = result.status == "ok" ? value(result) : -1;
      if (result.status != "ok") {
        line.push_back(result.status == "oom" ? "OOM" : "ERROR");
      } else if (cell < 0) {
        line.push_back("-");
      } else {
        std::string text = format(digits, cell);
        if (base > 0)
          text += mode == baseline ? " (100%)"
                                   : format(" (%.1f%%)", 100.0 * cell / base);
        line.push_back(text);
      }
    }
    cells.push_back(line);
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto &line : cells)
    for (size_t c = 0; c < line.size(); ++c)
      widths[c] = std::max(widths[c], line[c].size());
  std::string baselineLabel = baseline;
  for (const BenchPointSpec &point : manifest.points)
    if (point.mode == baseline)
      baselineLabel = point.label;
  std::string out = title + ", % of " + baselineLabel + " in parentheses:\n";
  for (const auto &line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c)
      text += padded(line[c], widths[c] + (c + 1 < line.size() ? 2 : 0));
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    out += text + "\n";
  }
  return out + "\n";
}

std::string csvField(const std::string &text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string out = "\"";
  for (char ch : text)
    out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

const char *pythonBool(bool value) { return value ? "True" : "False"; }

} // namespace

std::string formatProgress(const BenchManifest &manifest, size_t index,
                           const BenchResult &result) {
  const BenchPointSpec &point = manifest.points[index];
  std::string head = "[" + std::to_string(index + 1) + "/" +
                     std::to_string(manifest.points.size()) + "] " +
                     (scansSequence(manifest) ? "seq " : "layers ") +
                     padded(std::to_string(rowKey(manifest, point)), 7) + " " +
                     padded(point.label, 28);
  if (result.status == "oom")
    return head + "OOM (" + result.reason + ")";
  if (result.status != "ok")
    return head + "ERROR: " + result.reason;
  std::string measured =
      result.peakMiB < 0 ? "-" : format("%.1f", result.peakMiB);
  return head + tokensText(result.tokensPerSecond) + " tokens/s, " +
         format("%.3f ms", result.stepMs) + ", MFU " +
         format("%.2f%%", 100 * result.mfu) + ", planned " +
         format("%.2f", result.plannedPeakMiB) + " MiB, device " + measured +
         " MiB, loss " + format("%.4f", result.firstLoss) + " -> " +
         format("%.4f", result.lastLoss);
}

std::string formatTables(const BenchManifest &manifest,
                         const std::vector<BenchResult> &results) {
  auto planned = [](const BenchResult &r) { return r.plannedPeakMiB; };
  std::string out;
  if (manifest.kind == "throughput") {
    out += table(manifest, results, "Throughput (K tokens/s)", "%.1f",
                 [](const BenchResult &r) { return r.tokensPerSecond / 1e3; });
    out += table(manifest, results, "MFU (%)", "%.2f",
                 [](const BenchResult &r) { return 100 * r.mfu; });
    return out + table(manifest, results, "Planned peak per rank (MiB)", "%.2f",
                       planned);
  }
  out +=
      table(manifest, results, "Planned peak per rank (MiB)", "%.2f", planned);
  bool measured =
      std::any_of(results.begin(), results.end(), [](const BenchResult &r) {
        return r.status == "ok" && r.peakMiB >= 0;
      });
  if (measured)
    out += table(manifest, results, "Device memory in use per rank (MiB)",
                 "%.2f", [](const BenchResult &r) { return r.peakMiB; });
  out += table(manifest, results, "Step time (ms)", "%.3f",
               [](const BenchResult &r) { return r.stepMs; });
  if (scansSequence(manifest)) {
    // As the original: the longest sequence each mode ran.
    for (const std::string &mode : manifest.modes) {
      int64_t longest = 0;
      std::string label = mode;
      for (size_t i = 0; i < manifest.points.size(); ++i)
        if (manifest.points[i].mode == mode) {
          label = manifest.points[i].label;
          if (results[i].status == "ok")
            longest = std::max(longest, manifest.points[i].seqLen);
        }
      out += "max seq_len " + padded(label, 28) +
             (longest ? std::to_string(longest) : std::string("none")) + "\n";
    }
    out += "\n";
  }
  return out;
}

Status writeCsv(const std::string &path, const BenchManifest &manifest,
                const std::vector<BenchResult> &results) {
  std::string csv = std::string(kBenchCsvColumns) + "\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchPointSpec &p = manifest.points[i];
    const BenchResult &r = results[i];
    bool ok = r.status == "ok";
    auto number = [&](const char *pattern, double value, bool known) {
      return known ? format(pattern, value) : std::string("nan");
    };
    bool cpEnabled = p.cpSize > 1;
    std::string row =
        p.mode + "," + csvField(p.label) + "," + p.runner + "," +
        manifest.ppSchedule + "," + std::to_string(p.ppSize) + "," +
        std::to_string(p.tpSize) + "," + pythonBool(cpEnabled) + "," +
        std::to_string(p.cpSize) + "," + (cpEnabled ? p.cpCommType : "") + "," +
        pythonBool(p.sequenceParallel) + "," +
        pythonBool(p.asyncCommunication) + "," + pythonBool(p.vocabParallel) +
        "," + std::to_string(p.worldSize) + "," + manifest.batchPolicy + "," +
        std::to_string(p.modelBatchSize) + "," +
        (r.status == "oom" ? "nan" : std::to_string(p.globalBatchSize)) + "," +
        manifest.scaling + "," + std::to_string(p.layers) + "," +
        std::to_string(p.seqLen) + "," +
        std::to_string(manifest.numMicrobatches) + "," +
        std::to_string(p.params) + "," +
        (ok && r.peakMiB < 0 ? std::string() : number("%.2f", r.peakMiB, ok)) +
        "," + number("%.4f", r.stepMs, ok) + "," +
        number("%.1f", r.tokensPerSecond, ok) + "," + p.ppSchedule + "," +
        r.status + "," + number("%.5f", r.mfu, ok) + "," +
        number("%.2f", r.plannedPeakMiB, r.plannedPeakMiB > 0) + "," +
        (p.exposedCommMs >= 0 ? format("%.4f", p.exposedCommMs) : "") + "," +
        (p.predictedStepMs >= 0 ? format("%.4f", p.predictedStepMs) : "") +
        "," +
        (p.simulatedBubble >= 0 ? format("%.4f", p.simulatedBubble) : "") +
        "," + number("%.2f", r.allocatedMiB, ok) + "," + csvField(r.reason);
    csv += row + "\n";
  }
  return writeFileAtomically(path, {csv}, "CSV");
}

} // namespace sharc::benchrun
