//===- Resume.cpp - where a run that was stopped goes on ------------------===//

#include "tools/sharc-run/Resume.h"

#include "executor/Checkpoint.h"
#include "planner/plan/SafeTensors.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace sharc::training {
namespace {

/// The step in a checkpoint's metadata; an error for a file that is not a
/// readable checkpoint.
Result<int64_t> checkpointStep(const std::string &path) {
  auto reader = plan::SafeTensorsReader::open(path);
  if (!reader)
    return reader.status();
  const auto &metadata = (*reader)->metadata();
  auto format = metadata.find("format");
  auto step = exec::checkpointStep(metadata);
  if (format == metadata.end() || format->second != "sharc-checkpoint" ||
      !step || *step < 0)
    return Status::invalidInput(path + ": not a sharc checkpoint with a step");
  return step;
}

/// Whether `name` is a rotating checkpoint's file name of `stem` and
/// `extension`: stem + "-step" + at least six digits + extension.
bool isRotatingName(const std::string &name, const std::string &stem,
                    const std::string &extension) {
  std::string head = stem + "-step";
  if (name.size() < head.size() + 6 + extension.size() ||
      name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - extension.size(), extension.size(),
                   extension) != 0)
    return false;
  return std::all_of(name.begin() + static_cast<ptrdiff_t>(head.size()),
                     name.end() - static_cast<ptrdiff_t>(extension.size()),
                     [](unsigned char c) { return std::isdigit(c); });
}

} // namespace

Result<std::optional<ResumePoint>>
findResumePoint(const std::string &savePath) {
  namespace fs = std::filesystem;
  fs::path save(savePath);
  fs::path folder = save.has_parent_path() ? save.parent_path() : fs::path(".");
  // rotatingCheckpointPath's names: the suffix goes before .safetensors.
  std::string name = save.filename().string(), extension = ".safetensors";
  if (name.size() <= extension.size() ||
      name.compare(name.size() - extension.size(), extension.size(),
                   extension) != 0)
    extension.clear();
  std::string stem = name.substr(0, name.size() - extension.size());

  ResumePoint point;
  bool found = false;
  auto consider = [&](const fs::path &path, bool rotating) {
    auto step = checkpointStep(path.string());
    if (!step) {
      point.skipped.push_back(step.status().message());
      return;
    }
    if (rotating)
      point.rotating.emplace_back(*step, path.string());
    // Ties keep the first: savePath, considered first.
    if (!found || *step > point.step) {
      point.path = path.string();
      point.step = *step;
      found = true;
    }
  };
  std::error_code error;
  if (fs::is_regular_file(save, error))
    consider(save, false);
  fs::directory_iterator entries(folder, error);
  if (error)
    return Status::invalidInput("--resume: cannot list '" + folder.string() +
                                "': " + error.message());
  std::vector<fs::path> rotating;
  for (const fs::directory_entry &entry : entries)
    if (isRotatingName(entry.path().filename().string(), stem, extension) &&
        entry.is_regular_file(error))
      rotating.push_back(entry.path());
  std::sort(rotating.begin(), rotating.end());
  for (const fs::path &path : rotating)
    consider(path, true);
  if (!found)
    return std::optional<ResumePoint>{};
  std::sort(point.rotating.begin(), point.rotating.end());
  return std::optional<ResumePoint>{std::move(point)};
}

Result<std::optional<ResumePoint>>
shareResumePoint(exec::Processes &processes, std::optional<ResumePoint> point) {
  if (processes.count() == 1)
    return point;
  // The chosen file's path and step; the rotating files are process 0's
  // to remove, as it alone writes files.
  int64_t header[2] = {point ? static_cast<int64_t>(point->path.size()) : -1,
                       point ? point->step : 0};
  SHARC_TRY(processes.broadcast(header, sizeof(header), 0));
  if (header[0] < 0)
    return std::optional<ResumePoint>{};
  std::string path(static_cast<size_t>(header[0]), '\0');
  if (processes.index() == 0)
    path = point->path;
  SHARC_TRY(processes.broadcast(path.data(), header[0], 0));
  if (processes.index() == 0)
    return point;
  ResumePoint shared;
  shared.path = std::move(path);
  shared.step = header[1];
  return std::optional<ResumePoint>{std::move(shared)};
}

Result<std::optional<ResumePoint>> applyResume(RunFlags &options,
                                               exec::Processes &processes) {
  if (!options.resume)
    return std::optional<ResumePoint>{};
  auto found = processes.writesFiles() ? findResumePoint(options.savePath)
                                       : std::optional<ResumePoint>{};
  if (!found)
    return found.status();
  auto resumed = shareResumePoint(processes, std::move(*found));
  if (!resumed)
    return resumed.status();
  if (!*resumed) {
    std::printf("--resume: no checkpoint at %s or beside it, starting at "
                "step 1\n",
                options.savePath.c_str());
    return resumed;
  }
  const ResumePoint &point = **resumed;
  for (const std::string &why : point.skipped)
    std::printf("--resume: skipped %s\n", why.c_str());
  std::printf("resuming at step %lld of %lld from %s\n",
              static_cast<long long>(point.step),
              static_cast<long long>(options.steps), point.path.c_str());
  options.loadPath = point.path;
  options.steps = std::max<int64_t>(0, options.steps - point.step);
  return resumed;
}

} // namespace sharc::training
